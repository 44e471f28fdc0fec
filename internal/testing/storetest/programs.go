package storetest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/example/waitingroom/internal/admission"
	"github.com/example/waitingroom/internal/capacity"
	"github.com/example/waitingroom/internal/pace"
	"github.com/example/waitingroom/internal/queue"
	"github.com/example/waitingroom/internal/settings"
)

// perSecond is n people per second.
func perSecond(n float64) pace.Rate {
	r, ok := pace.NewRate(n)
	if !ok {
		panic(fmt.Sprintf("storetest: %g is not an admission rate", n))
	}
	return r
}

// program is an advancing program in mid-flight: 40 tickets issued, the
// counter at 12 from t0+1.5 s at 2.5 per second (28 tickets to drain).
func program(id string) admission.Program {
	anchor := t0.Add(ms(1500))
	return admission.Program{
		ID: id, CreatedAt: t0, Version: 3, Issued: 40,
		Current:   pace.Segment{AnchorMs: anchor.UnixMilli(), Base: 12, Rate: perSecond(2.5)},
		DrainAtNs: anchor.Add(28 * ms(400)).UnixNano(),
		Changes:   []string{"change-3", "change-2"},
		Options: settings.Options{
			AdmissionWindow: 10 * time.Minute, MaxWaiting: 5000, ChallengeBits: 16,
			Edge:    settings.Edge{Mode: settings.EdgeStandby, Paths: []string{"/tickets/", "/cart"}, SessionSeconds: 600, FailOpenUntil: t0.Add(time.Hour)},
			Enqueue: settings.Enqueue{JWKSURL: "https://shop.example.com/jwks.json", Issuer: "https://shop.example.com", Required: true},
			Profile: settings.Profile{
				DisplayName: "Gala — 갈라", Message: "Two nights.\nSeats for both.", Notice: "Saturday is sold out",
				TargetURL: "https://tickets.example.com/buy?event=gala",
				Translations: settings.Translations{
					"ko":      {DisplayName: "갈라", Message: "이틀 밤.\n두 밤 모두 좌석.", Notice: "토요일 매진"},
					"zh-Hant": {Notice: "星期六售完"},
				},
			},
		},
	}
}

// freshProgram is a program as created with the defaults at t0.
func freshProgram(id string) admission.Program {
	return admission.Program{
		ID: id, CreatedAt: t0, Version: 1,
		Current:   pace.Segment{AnchorMs: t0.UnixMilli(), Rate: admission.DefaultAdmissionRate},
		DrainAtNs: t0.UnixNano(),
		Options:   settings.Options{AdmissionWindow: admission.DefaultAdmissionWindow},
	}
}

// saturating edits p to the slowest rate (1,000 s a ticket) with 9.2 million
// waiting: a ticket short of the end of int64, where the drain saturates.
func saturating(p *admission.Program) {
	p.Current.Rate, p.Issued, p.DrainAtNs = 1, 9_223_300, math.MaxInt64-600e9
}

// reservations are two bypass reservations: one freed at a rate, one at once.
func reservations() []capacity.Reservation {
	return []capacity.Reservation{
		{FromMs: t0.UnixMilli(), UntilMs: t0.Add(time.Hour).UnixMilli(), N: 1000, Rate: perSecond(2.5)},
		{FromMs: t0.Add(ms(1)).UnixMilli(), UntilMs: t0.Add(24 * time.Hour).UnixMilli(), N: 1},
	}
}

func testProgram(t *testing.T, s queue.Store) {
	fractional := program("fractional")
	fractional.Current.Rate = perSecond(0.333)
	fractional.DrainAtNs = t0.UnixNano() + 1_234_567_891
	paused := program("paused")
	paused.Current.Paused = true
	stopped := program("rate-zero")
	stopped.Current.Rate = 0
	scheduled := program("scheduled")
	scheduled.Next = pace.Segment{AnchorMs: t0.Add(ms(3_000)).UnixMilli(), Base: 15, Rate: perSecond(100_000), Paused: true}
	manual := program("manual")
	manual.Policy, manual.Closed, manual.ManualRate = "eta", true, perSecond(0.125)
	manual.LastAdmitAt, manual.LastAdmitGap = t0.Add(ms(8_000)), ms(1_500)
	sharded := program("sharded")
	sharded.Shards = 7
	sharded.Recent = [admission.RecentTickets]int64{9, 8, 7, 6, 5, 4, 3, 2}
	opening := program("opening")
	opening.OpensAt, opening.ClosesAt = t0.Add(time.Hour), t0.Add(5*time.Hour+ms(1))
	opening.Shuffle, opening.ShuffleNonce = true, "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"
	opening.Current.StartMs = opening.OpensAt.UnixMilli()
	opening.Next = pace.Segment{AnchorMs: t0.Add(ms(3_000)).UnixMilli(), Base: 12, Rate: perSecond(7), StartMs: opening.OpensAt.UnixMilli()}
	opened := opening
	opened.ID, opened.Prequeue, opened.PrequeueFixed = "opened", 40, true
	bypassed := program("bypassed")
	bypassed.MaxActiveUsers, bypassed.Reserved = 50, reservations()

	for _, p := range []admission.Program{program("mid-flight"), fractional, paused, stopped, scheduled, manual, freshProgram("fresh"), sharded, opening, opened, bypassed} {
		t.Run("OK "+p.ID, func(t *testing.T) {
			create(t, s, p)
			checkStoredProgram(t, s, p)
		})
	}

	t.Run("ErrConflict on duplicate", func(t *testing.T) {
		first := program("dup")
		create(t, s, first)
		second := first
		second.Issued, second.Version, second.Current.Rate = 0, 1, perSecond(7)
		checkErr(t, "second CreateProgram", s.CreateProgram(t.Context(), second), queue.ErrConflict)
		checkStoredProgram(t, s, first)
	})

	t.Run("ErrNotFound", func(t *testing.T) {
		checkErr(t, "GetProgram", errOf(s.GetProgram(t.Context(), "missing")), queue.ErrNotFound)
	})
}

func testUpdateProgram(t *testing.T, s queue.Store) {
	ctx := t.Context()
	for i, tc := range []struct {
		name         string
		version      int64 // of the update; the stored one is 3
		expectIssued int64 // the stored one is 40
		missing      bool  // update a program that was never created
		wantErr      error
	}{
		{name: "OK", version: 4, expectIssued: 40},
		{name: "ErrConflict on stale version", version: 3, expectIssued: 40, wantErr: queue.ErrConflict},
		{name: "ErrConflict on version ahead", version: 5, expectIssued: 40, wantErr: queue.ErrConflict},
		{name: "ErrConflict on stale issued", version: 4, expectIssued: 39, wantErr: queue.ErrConflict},
		{name: "ErrConflict on missing program", version: 4, expectIssued: 40, missing: true, wantErr: queue.ErrConflict},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := fmt.Sprintf("update-%d", i)
			orig := program(id)
			orig.Shards = 3
			orig.Reserved = reservations()[1:]
			if !tc.missing {
				create(t, s, orig)
			}
			upd := orig
			upd.Version = tc.version
			upd.Current = pace.Segment{AnchorMs: t0.Add(ms(9_999)).UnixMilli(), Base: 30, Rate: perSecond(4), Paused: true}
			upd.Next = pace.Segment{AnchorMs: t0.Add(ms(11_000)).UnixMilli(), Base: 31, Rate: perSecond(0.001)}
			upd.DrainAtNs = t0.Add(ms(9_999)).UnixNano() + 123
			upd.AdmissionWindow = 3 * time.Minute
			upd.Policy, upd.ManualRate, upd.Closed = "eta", perSecond(2.75), true
			upd.LastAdmitAt, upd.LastAdmitGap = t0.Add(ms(8_000)), ms(1_500)
			upd.Changes = append([]string{"change-4"}, orig.Changes...)
			upd.Profile.DisplayName, upd.Profile.Notice = "Gala (late show)", "" // changed, cleared
			upd.ClosesAt = t0.Add(3 * time.Hour)
			upd.Profile.Translations = settings.Translations{"ko": {Message: "이틀 밤."}, "pt-BR": {Notice: "Sábado esgotado"}} // one changed, one gone, one new
			upd.Reserved = reservations()
			if i%2 == 0 {
				upd.Reserved = nil // all over: cleared
			}
			// Fields UpdateProgram must leave alone.
			upd.Issued, upd.CreatedAt, upd.Shards = 999, t0.Add(time.Hour), 9

			checkErr(t, "UpdateProgram", s.UpdateProgram(ctx, upd, tc.expectIssued), tc.wantErr)
			if tc.missing {
				checkNoProgram(t, s, id, "UpdateProgram")
				return
			}
			want := orig
			if tc.wantErr == nil {
				want = upd
				want.Issued, want.CreatedAt, want.Shards = orig.Issued, orig.CreatedAt, orig.Shards
			}
			checkStoredProgram(t, s, want)
		})
	}

	t.Run("OK clears the scheduled close and the translations", func(t *testing.T) {
		orig := program("update-cleared")
		orig.ClosesAt = t0.Add(time.Hour)
		create(t, s, orig)
		upd := orig
		upd.Version++
		upd.ClosesAt, upd.Profile.Translations = time.Time{}, nil
		checkErr(t, "UpdateProgram", s.UpdateProgram(ctx, upd, orig.Issued), nil)
		checkStoredProgram(t, s, upd)
	})

	// Tickets issued after an update follow the new settings, whatever
	// derived state a store keeps.
	now := t0.Add(ms(20_000))
	for i, tc := range []struct {
		name         string
		pausedBefore bool
		rate         pace.Rate
		paused       bool
		admit        int64
	}{
		{name: "IssueTicket follows pause", rate: perSecond(2.5), paused: true},
		{name: "IssueTicket follows resume", pausedBefore: true, rate: perSecond(7)},
		{name: "IssueTicket follows rate", rate: perSecond(3)},
		{name: "IssueTicket follows rate zero", rate: 0},
		{name: "IssueTicket follows admission", rate: perSecond(2.5), admit: 100},
	} {
		for _, delay := range []time.Duration{0, time.Second} {
			t.Run(fmt.Sprintf("%s delay %v", tc.name, delay), func(t *testing.T) {
				orig := program(fmt.Sprintf("follow-%d-%d", i, delay.Milliseconds()))
				orig.Current.Paused = tc.pausedBefore
				create(t, s, orig)
				upd := orig.Rebased(now, tc.rate, tc.paused, tc.admit, delay)
				checkErr(t, "UpdateProgram", s.UpdateProgram(ctx, upd, orig.Issued), nil)
				// Once while the queue has people, once long after it drained.
				issueSteps(t, s, upd, issueOne(s), []time.Time{now.Add(ms(1)), now.Add(time.Hour)})
			})
		}
	}
}

// issueFunc issues n tickets of program id at at.
type issueFunc func(ctx context.Context, id string, at time.Time, n int64) (admission.Program, error)

func issueOne(s queue.Store) issueFunc {
	return func(ctx context.Context, id string, at time.Time, _ int64) (admission.Program, error) {
		return s.IssueTicket(ctx, id, at)
	}
}

// issueSteps issues tickets of p, stored, a call at each of at, n[i] tickets
// (1 past n): each answer, and the program stored, is p.WithTicketsIssued.
func issueSteps(t *testing.T, s queue.Store, p admission.Program, issue issueFunc, at []time.Time, n ...int64) {
	t.Helper()
	want := p
	for i, at := range at {
		k := int64(1)
		if i < len(n) {
			k = n[i]
		}
		want = want.WithTicketsIssued(at, k)
		checkCall(t, fmt.Sprintf("%d tickets issued at %v", k, at), answer(issue(t.Context(), p.ID, at, k)), want)
	}
	checkStoredProgram(t, s, want)
}

// issueInStates runs issueSteps on a program in each of programStates(now).
func issueInStates(t *testing.T, s queue.Store, prefix string, now time.Time, issue issueFunc, at []time.Time, n ...int64) {
	for i, tc := range programStates(now) {
		t.Run(tc.name, func(t *testing.T) {
			p := program(fmt.Sprintf("%s-%d", prefix, i))
			tc.edit(&p)
			create(t, s, p)
			issueSteps(t, s, p, issue, at, n...)
		})
	}
}

func testIssueTicket(t *testing.T, s queue.Store) {
	ctx := t.Context()
	// now is not on a millisecond: stores truncate it as WithTicketIssued does.
	now := t0.Add(ms(10_345) + 678*time.Microsecond)
	nowNs := now.Truncate(time.Millisecond).UnixNano()
	// At now, 1 µs later (same millisecond), and once the queue has drained.
	issueInStates(t, s, "issue", now, issueOne(s), []time.Time{now, now.Add(time.Microsecond), now.Add(time.Hour)})

	t.Run("ErrNotFound", func(t *testing.T) {
		checkErr(t, "IssueTicket", errOf(s.IssueTicket(ctx, "missing", now)), queue.ErrNotFound)
		checkNoProgram(t, s, "missing", "IssueTicket")
	})

	// A closed program takes no ticket, drained or not; reopened, it does.
	for _, at := range []time.Time{now.Add(ms(1)), now.Add(time.Hour)} {
		t.Run(fmt.Sprintf("ErrClosed at %v", at.Sub(now)), func(t *testing.T) {
			p := program(fmt.Sprintf("closed-%d", at.Sub(now).Milliseconds()))
			p.Closed = true
			p.DrainAtNs = nowNs - 1e9 // drained: the re-anchoring write must refuse it too
			create(t, s, p)
			checkErr(t, "IssueTicket", errOf(s.IssueTicket(ctx, p.ID, at)), queue.ErrClosed)
			checkStoredProgram(t, s, p)
			open := p
			open.Closed = false
			open.Version++
			checkErr(t, "UpdateProgram", s.UpdateProgram(ctx, open, p.Issued), nil)
			checkCall(t, "IssueTicket after reopening", answer(s.IssueTicket(ctx, p.ID, at)), open.WithTicketIssued(at))
		})
	}
}

// programState is a state tickets are issued in; edit puts a program in it.
type programState struct {
	name string
	edit func(p *admission.Program)
}

// programStates are the states tickets are issued in at now.
func programStates(now time.Time) []programState {
	nowNs := now.Truncate(time.Millisecond).UnixNano()
	due := func(p *admission.Program, at time.Duration, paused bool, startMs int64) {
		p.Next = pace.Segment{AnchorMs: now.Add(at).UnixMilli(), Base: 20, Rate: perSecond(5), Paused: paused, StartMs: startMs}
		p.DrainAtNs = nowNs - 1e9
	}
	return []programState{
		{"paused, drain time past", func(p *admission.Program) { p.Current.Paused, p.DrainAtNs = true, nowNs-5e9 }},
		{"paused, drain time ahead", func(p *admission.Program) { p.Current.Paused, p.DrainAtNs = true, nowNs+5e9 }},
		{"advancing busy queue", func(p *admission.Program) { p.Current.Rate, p.DrainAtNs = perSecond(4), nowNs+2_500_250_000 }},
		{"advancing, drains in half a ms", func(p *admission.Program) { p.DrainAtNs = nowNs + 500_000 }},
		{"advancing, drains in a ns", func(p *admission.Program) { p.DrainAtNs = nowNs + 1 }},
		{"advancing, drained exactly now", func(p *admission.Program) { p.DrainAtNs = nowNs }},
		{"drained queue re-anchors", func(p *admission.Program) { p.DrainAtNs = nowNs - 1e9 }},
		{"drained, fractional time per ticket", func(p *admission.Program) { p.Current.Rate, p.DrainAtNs = perSecond(3), nowNs-333_333_334 }},
		{"busy, fractional time per ticket", func(p *admission.Program) { p.Current.Rate, p.DrainAtNs = perSecond(7), nowNs+142_857_143_000 }},
		{"slowest rate", func(p *admission.Program) { p.Current.Rate, p.DrainAtNs = 1, nowNs-1 }},
		{"slowest rate, millions waiting: the drain instant saturates", saturating},
		{"drain instant saturated", func(p *admission.Program) { p.Current.Rate, p.Issued, p.DrainAtNs = 1, 9_300_000, math.MaxInt64 }},
		{"fastest rate", func(p *admission.Program) { p.Current.Rate, p.DrainAtNs = perSecond(100_000), nowNs+10_000 }},
		{"rate 0", func(p *admission.Program) { p.Current.Rate, p.DrainAtNs = 0, nowNs-1e9 }},
		{"change pending", func(p *admission.Program) { due(p, time.Minute, false, 0) }},
		{"change due, drained", func(p *admission.Program) { due(p, -time.Second, false, 0) }},
		{"change due to a pause, drained", func(p *admission.Program) { due(p, -time.Second, true, 0) }},
		{"fresh program", func(p *admission.Program) { *p = freshProgram(p.ID) }},
		{"opening ahead, shuffled", func(p *admission.Program) {
			p.OpensAt, p.Shuffle, p.ShuffleNonce = now.Truncate(time.Millisecond).Add(time.Minute), true, "ab"
			p.Current.StartMs, p.DrainAtNs = p.OpensAt.UnixMilli(), p.OpensAt.UnixNano()+28*400e6
		}},
		{"opening just passed, shuffled: the pre-queue is fixed first", func(p *admission.Program) {
			p.OpensAt, p.Shuffle, p.ShuffleNonce = now.Truncate(time.Millisecond).Add(-ms(1)), true, "ab"
			p.Current.StartMs = p.OpensAt.UnixMilli()
		}},
		{"opening passed, pre-queue fixed", func(p *admission.Program) {
			p.OpensAt, p.Shuffle, p.ShuffleNonce, p.Prequeue, p.PrequeueFixed = now.Truncate(time.Millisecond).Add(-time.Second), true, "ab", 33, true
		}},
		{"change due to an opening, drained", func(p *admission.Program) { due(p, -time.Second, false, now.Add(-ms(500)).UnixMilli()) }},
	}
}

func testIssueTicketConcurrent(t *testing.T, s queue.Store) {
	now := t0.Add(time.Minute)
	for _, tc := range []struct {
		name string
		n    int
		// p's state when the tickets are issued; want its state after.
		p, want admission.Program
	}{
		{
			name: "busy queue", // every call extends DrainAtNs
			n:    concurrentTickets,
			p:    admission.Program{ID: "busy", CreatedAt: t0, Version: 2, Current: pace.Segment{AnchorMs: t0.UnixMilli(), Rate: perSecond(1)}, DrainAtNs: t0.UnixNano() + 1e15, Options: settings.Options{AdmissionWindow: time.Minute}},
			want: admission.Program{ID: "busy", CreatedAt: t0, Version: 2, Issued: concurrentTickets, Current: pace.Segment{AnchorMs: t0.UnixMilli(), Rate: perSecond(1)}, DrainAtNs: t0.UnixNano() + 1e15 + concurrentTickets*1e9, Options: settings.Options{AdmissionWindow: time.Minute}},
		},
		{
			name: "drained queue", // one call re-anchors it, the others find it busy
			n:    concurrentReanchors,
			p:    admission.Program{ID: "drained", CreatedAt: t0, Version: 2, Issued: 7, Current: pace.Segment{AnchorMs: t0.UnixMilli(), Base: 7, Rate: perSecond(1000)}, DrainAtNs: now.UnixNano() - 10e6, Options: settings.Options{AdmissionWindow: time.Minute}},
			want: admission.Program{ID: "drained", CreatedAt: t0, Version: 3, Issued: 7 + concurrentReanchors, Current: pace.Segment{AnchorMs: now.UnixMilli(), Base: 7, Rate: perSecond(1000)}, DrainAtNs: now.UnixNano() + concurrentReanchors*1e6, Options: settings.Options{AdmissionWindow: time.Minute}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			create(t, s, tc.p)
			tickets := make([]int64, tc.n)
			errs := make([]error, tc.n)
			start := time.Now()
			inParallel(tc.n, func(i int) {
				p, err := s.IssueTicket(t.Context(), tc.p.ID, now)
				tickets[i], errs[i] = p.Issued, err
			})
			t.Logf("%d concurrent IssueTicket in %v", tc.n, time.Since(start))
			checkErr(t, "IssueTicket", errors.Join(errs...), nil)
			checkEach(t, "tickets issued", tickets, tc.p.Issued+1, tc.p.Issued+int64(tc.n))
			want := tc.want
			for i := range want.Recent {
				want.Recent[i] = now.UnixMilli() // the last tickets, all at now
			}
			checkStoredProgram(t, s, want)
		})
	}
}

// testFixPrequeue: a shuffled program's pre-queue is fixed once, from its
// opening, to the tickets issued then.
func testFixPrequeue(t *testing.T, s queue.Store) {
	ctx := t.Context()
	ps := s.(queue.PrequeueStore)
	opens := t0.Add(time.Hour)
	p := program("prequeue")
	p.OpensAt, p.Shuffle, p.ShuffleNonce = opens, true, "cd"
	p.Current.StartMs, p.DrainAtNs = opens.UnixMilli(), opens.UnixNano()+28*400e6
	plain := program("no-shuffle")
	plain.OpensAt = opens
	create(t, s, p, plain)
	fix := func(what, id string, at time.Time, want admission.Program) {
		t.Helper()
		checkCall(t, what, answer(ps.FixPrequeue(ctx, id, at)), want)
	}
	fix("before the opening: unchanged", p.ID, opens.Add(-ms(1)), p)
	fix("without a shuffle: unchanged", plain.ID, opens.Add(time.Second), plain)
	fixed := p.WithPrequeueFixed(opens)
	if fixed.Prequeue != 40 || !fixed.PrequeueFixed {
		t.Fatalf("WithPrequeueFixed: pre-queue %d (fixed %v), want the 40 tickets issued", fixed.Prequeue, fixed.PrequeueFixed)
	}
	fix("at the opening: fixed", p.ID, opens, fixed)
	checkErr(t, "IssueTicket", errOf(s.IssueTicket(ctx, p.ID, opens.Add(ms(1)))), nil)
	fix("again later, with one more ticket: as fixed", p.ID, opens.Add(time.Minute), fixed.WithTicketIssued(opens.Add(ms(1))))
	checkErr(t, "FixPrequeue of a missing program", errOf(ps.FixPrequeue(ctx, "missing", opens)), queue.ErrNotFound)
}
