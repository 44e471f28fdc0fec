// Package storetest is the contract every queue.Store keeps: memstore and
// dynamostore both run it from their tests, so the in-memory store the
// local server and the simulations use behaves like DynamoDB.
//
// Stores keep times to the millisecond, except Token.ExpiresAt (the TTL)
// which a store may round up to the second; the suite only stores times of
// millisecond precision, and accepts that rounding.
package storetest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/example/waitingroom/internal/queue"
	"github.com/example/waitingroom/internal/tickets"
)

// Sizes of the concurrency tests: enough callers to interleave on a real
// server (moto answers a few hundred requests a second), few enough to stay
// within a couple of seconds there.
const (
	concurrentTickets   = 64 // 4 calls per worker: every worker's calls overlap the others' (500 took 15-40 s on moto)
	concurrentReanchors = 48
	concurrentMarks     = 20
	workers             = 16
)

// Run runs the contract against stores from newStore. Each call must return
// a store where no program or token exists yet; Run calls it once per group
// of subtests.
func Run(t *testing.T, newStore func(t *testing.T) queue.Store) {
	t.Run("Program", func(t *testing.T) { testProgram(t, newStore(t)) })
	t.Run("UpdateProgram", func(t *testing.T) { testUpdateProgram(t, newStore(t)) })
	t.Run("IssueTicket", func(t *testing.T) { testIssueTicket(t, newStore(t)) })
	t.Run("IssueTicketConcurrent", func(t *testing.T) { testIssueTicketConcurrent(t, newStore(t)) })
	t.Run("Token", func(t *testing.T) { testToken(t, newStore(t)) })
	t.Run("Mark", func(t *testing.T) { testMark(t, newStore(t)) })
	t.Run("MarkConcurrent", func(t *testing.T) { testMarkConcurrent(t, newStore(t)) })
	t.Run("Revoke", func(t *testing.T) { testRevoke(t, newStore(t)) })
	t.Run("RevokeConcurrent", func(t *testing.T) { testRevokeConcurrent(t, newStore(t)) })
	t.Run("Claims", func(t *testing.T) { testClaims(t, newStore(t)) })
	t.Run("ClaimsConcurrent", func(t *testing.T) { testClaimsConcurrent(t, newStore(t)) })
	t.Run("Catalog", func(t *testing.T) { testCatalog(t, newStore(t)) })
	t.Run("Challenges", func(t *testing.T) { testChallenges(t, newStore(t)) })
	t.Run("ChallengesConcurrent", func(t *testing.T) { testChallengesConcurrent(t, newStore(t)) })
	if _, ok := newStore(t).(tickets.Store); ok {
		ticketStore := func(t *testing.T) tickets.Store { return newStore(t).(tickets.Store) }
		t.Run("IssueTickets", func(t *testing.T) { testIssueTickets(t, ticketStore(t)) })
		t.Run("IssueTicketsConcurrent", func(t *testing.T) { testIssueTicketsConcurrent(t, ticketStore(t)) })
		t.Run("Shards", func(t *testing.T) { testShards(t, ticketStore(t)) })
		t.Run("ShardsConcurrent", func(t *testing.T) { testShardsConcurrent(t, ticketStore(t)) })
		t.Run("SetShards", func(t *testing.T) { testSetShards(t, ticketStore(t)) })
		t.Run("TrimShard", func(t *testing.T) { testTrimShard(t, ticketStore(t)) })
		t.Run("ReturnTickets", func(t *testing.T) { testReturnTickets(t, ticketStore(t)) })
	}
	if _, ok := newStore(t).(queue.PrequeueStore); ok {
		t.Run("FixPrequeue", func(t *testing.T) { testFixPrequeue(t, newStore(t)) })
	}
	if _, ok := newStore(t).(queue.ScheduleStore); ok {
		t.Run("Schedule", func(t *testing.T) { testSchedule(t, newStore(t)) })
	}
	if _, ok := newStore(t).(queue.CapacityStore); ok {
		t.Run("Capacity", func(t *testing.T) {
			s := newStore(t)
			testCapacity(t, s.(queue.CapacityStore), s)
		})
		t.Run("CapacityConcurrent", func(t *testing.T) { testCapacityConcurrent(t, newStore(t).(queue.CapacityStore)) })
	}
}

// saturating edits p to the slowest rate (1,000 s a ticket) with 9.2
// million waiting: the drain instant is a ticket short of the end of
// int64, where WithTicketsIssued saturates it.
func saturating(p *queue.Program) {
	p.Current.Rate, p.Issued, p.DrainAtNs = 1, 9_223_300, math.MaxInt64-600e9
}

// t0 is the suite's epoch; times are derived from it at millisecond
// precision.
var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func ms(n int64) time.Duration { return time.Duration(n) * time.Millisecond }

// unixNs is t in Unix nanoseconds, as Program.DrainAtNs keeps it.
func unixNs(t time.Time) int64 { return t.UnixNano() }

// perSecond is n people per second.
func perSecond(n float64) queue.Rate {
	r, ok := queue.NewRate(n)
	if !ok {
		panic(fmt.Sprintf("storetest: %g is not an admission rate", n))
	}
	return r
}

// program is an advancing program in mid-flight: 40 tickets issued, the
// counter at 12 from t0+1.5 s at 2.5 per second, so the queue drains 28
// tickets later.
func program(id string) queue.Program {
	anchor := t0.Add(ms(1500))
	return queue.Program{
		ID:        id,
		CreatedAt: t0,
		Version:   3,
		Issued:    40,
		Current:   queue.Segment{AnchorMs: anchor.UnixMilli(), Base: 12, Rate: perSecond(2.5)},
		DrainAtNs: unixNs(anchor.Add(28 * ms(400))),
		Changes:   []string{"change-3", "change-2"},
		Options: queue.Options{
			AdmissionWindow: 10 * time.Minute,
			MaxWaiting:      5000,
			ChallengeBits:   16,
			Profile: queue.Profile{
				DisplayName: "Gala — 갈라",
				Message:     "Two nights.\nSeats for both.",
				Notice:      "Saturday is sold out",
				TargetURL:   "https://tickets.example.com/buy?event=gala",
				Translations: queue.Translations{
					"ko":      {DisplayName: "갈라", Message: "이틀 밤.\n두 밤 모두 좌석.", Notice: "토요일 매진"},
					"zh-Hant": {Notice: "星期六售完"},
				},
			},
		},
	}
}

// programDiff describes how got differs from want, "" if it does not. Every
// field counts; times are compared as instants, and an empty Changes list
// equals a missing one.
func programDiff(want, got queue.Program) string {
	return cmp.Diff(want, got, cmpopts.EquateEmpty())
}

func checkProgram(t *testing.T, what string, got, want queue.Program) {
	t.Helper()
	if d := programDiff(want, got); d != "" {
		t.Errorf("%s (-want +got):\n%s", what, d)
	}
}

// checkStoredProgram reads the program and compares it with want.
func checkStoredProgram(t *testing.T, s queue.Store, want queue.Program) {
	t.Helper()
	got, err := s.GetProgram(t.Context(), want.ID)
	if err != nil {
		t.Fatalf("GetProgram(%q): %v", want.ID, err)
	}
	checkProgram(t, "stored program", got, want)
}

func checkErr(t *testing.T, what string, got, want error) {
	t.Helper()
	if want == nil && got != nil || want != nil && !errors.Is(got, want) {
		t.Fatalf("%s: error %v, want %v", what, got, want)
	}
}

func testProgram(t *testing.T, s queue.Store) {
	ctx := t.Context()
	fractional := program("fractional")
	fractional.Current.Rate = perSecond(0.333)
	fractional.DrainAtNs = unixNs(t0) + 1_234_567_891
	paused := program("paused")
	paused.Current.Paused = true
	stopped := program("rate-zero")
	stopped.Current.Rate = 0
	scheduled := program("scheduled")
	scheduled.Next = queue.Segment{AnchorMs: t0.Add(ms(3_000)).UnixMilli(), Base: 15, Rate: perSecond(100_000), Paused: true}
	manual := program("manual")
	manual.Policy, manual.Closed, manual.ManualRate = "eta", true, perSecond(0.125)
	manual.LastAdmitAt, manual.LastAdmitGap = t0.Add(ms(8_000)), ms(1_500)
	fresh := queue.Program{ID: "fresh", CreatedAt: t0, Version: 1, Current: queue.Segment{AnchorMs: t0.UnixMilli(), Rate: queue.DefaultAdmissionRate}, DrainAtNs: unixNs(t0), Options: queue.Options{AdmissionWindow: queue.DefaultAdmissionWindow}}
	sharded := program("sharded")
	sharded.Shards = 7
	sharded.Recent = [queue.RecentTickets]int64{9, 8, 7, 6, 5, 4, 3, 2}
	opening := program("opening")
	opening.OpensAt, opening.ClosesAt = t0.Add(time.Hour), t0.Add(5*time.Hour+ms(1))
	opening.Shuffle, opening.ShuffleNonce = true, "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"
	opening.Current.StartMs = opening.OpensAt.UnixMilli()
	opening.Next = queue.Segment{AnchorMs: t0.Add(ms(3_000)).UnixMilli(), Base: 12, Rate: perSecond(7), StartMs: opening.OpensAt.UnixMilli()}
	opened := opening
	opened.ID, opened.Prequeue, opened.PrequeueFixed = "opened", 40, true
	bypassed := program("bypassed")
	bypassed.MaxActiveUsers, bypassed.Reserved = 50, reservations()

	for _, p := range []queue.Program{program("mid-flight"), fractional, paused, stopped, scheduled, manual, fresh, sharded, opening, opened, bypassed} {
		t.Run("OK "+p.ID, func(t *testing.T) {
			if err := s.CreateProgram(ctx, p); err != nil {
				t.Fatalf("CreateProgram: %v", err)
			}
			checkStoredProgram(t, s, p)
		})
	}

	t.Run("ErrConflict on duplicate", func(t *testing.T) {
		first := program("dup")
		if err := s.CreateProgram(ctx, first); err != nil {
			t.Fatalf("CreateProgram: %v", err)
		}
		second := first
		second.Issued, second.Version, second.Current.Rate = 0, 1, perSecond(7)
		checkErr(t, "second CreateProgram", s.CreateProgram(ctx, second), queue.ErrConflict)
		checkStoredProgram(t, s, first)
	})

	t.Run("ErrNotFound", func(t *testing.T) {
		_, err := s.GetProgram(ctx, "missing")
		checkErr(t, "GetProgram", err, queue.ErrNotFound)
	})
}

// reservations are two bypass reservations: one freed at a rate, one all
// at once.
func reservations() []queue.Reservation {
	return []queue.Reservation{
		{FromMs: t0.UnixMilli(), UntilMs: t0.Add(time.Hour).UnixMilli(), N: 1000, Rate: perSecond(2.5)},
		{FromMs: t0.Add(ms(1)).UnixMilli(), UntilMs: t0.Add(24 * time.Hour).UnixMilli(), N: 1},
	}
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
				if err := s.CreateProgram(ctx, orig); err != nil {
					t.Fatalf("CreateProgram: %v", err)
				}
			}
			upd := orig
			upd.Version = tc.version
			upd.Current = queue.Segment{AnchorMs: t0.Add(ms(9_999)).UnixMilli(), Base: 30, Rate: perSecond(4), Paused: true}
			upd.Next = queue.Segment{AnchorMs: t0.Add(ms(11_000)).UnixMilli(), Base: 31, Rate: perSecond(0.001)}
			upd.DrainAtNs = unixNs(t0.Add(ms(9_999))) + 123
			upd.AdmissionWindow = 3 * time.Minute
			upd.Policy, upd.ManualRate, upd.Closed = "eta", perSecond(2.75), true
			upd.LastAdmitAt, upd.LastAdmitGap = t0.Add(ms(8_000)), ms(1_500)
			upd.Changes = append([]string{"change-4"}, orig.Changes...)
			upd.Profile.DisplayName, upd.Profile.Notice = "Gala (late show)", "" // changed, cleared
			upd.ClosesAt = t0.Add(3 * time.Hour)
			upd.Profile.Translations = queue.Translations{"ko": {Message: "이틀 밤."}, "pt-BR": {Notice: "Sábado esgotado"}} // one changed, one gone, one new
			upd.Reserved = reservations()
			if i%2 == 0 {
				upd.Reserved = nil // all over: cleared
			}
			// Fields UpdateProgram must leave alone.
			upd.Issued, upd.CreatedAt, upd.Shards = 999, t0.Add(time.Hour), 9

			checkErr(t, "UpdateProgram", s.UpdateProgram(ctx, upd, tc.expectIssued), tc.wantErr)
			if tc.missing {
				_, err := s.GetProgram(ctx, id)
				checkErr(t, "GetProgram after UpdateProgram", err, queue.ErrNotFound)
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
		if err := s.CreateProgram(ctx, orig); err != nil {
			t.Fatalf("CreateProgram: %v", err)
		}
		upd := orig
		upd.Version++
		upd.ClosesAt, upd.Profile.Translations = time.Time{}, nil
		checkErr(t, "UpdateProgram", s.UpdateProgram(ctx, upd, orig.Issued), nil)
		checkStoredProgram(t, s, upd)
	})

	// A store may keep derived state (DynamoDB keeps whether the counter
	// advances and the time per ticket): tickets issued after an update
	// must follow the new settings.
	now := t0.Add(ms(20_000))
	for i, tc := range []struct {
		name         string
		pausedBefore bool
		rate         queue.Rate
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
				if err := s.CreateProgram(ctx, orig); err != nil {
					t.Fatalf("CreateProgram: %v", err)
				}
				upd := orig.Rebased(now, tc.rate, tc.paused, tc.admit, delay)
				if err := s.UpdateProgram(ctx, upd, orig.Issued); err != nil {
					t.Fatalf("UpdateProgram: %v", err)
				}
				// Once while the queue has people, once long after it drained.
				want := upd
				for _, at := range []time.Time{now.Add(ms(1)), now.Add(time.Hour)} {
					got, err := s.IssueTicket(ctx, orig.ID, at)
					if err != nil {
						t.Fatalf("IssueTicket: %v", err)
					}
					want = want.WithTicketIssued(at)
					checkProgram(t, fmt.Sprintf("IssueTicket at %v", at), got, want)
				}
				checkStoredProgram(t, s, want)
			})
		}
	}
}

func testIssueTicket(t *testing.T, s queue.Store) {
	ctx := t.Context()
	// now is not on a millisecond: stores truncate it as WithTicketIssued
	// does.
	now := t0.Add(ms(10_345) + 678*time.Microsecond)
	nowNs := unixNs(now.Truncate(time.Millisecond))
	for i, tc := range programStates(now) {
		t.Run(tc.name, func(t *testing.T) {
			p := program(fmt.Sprintf("issue-%d", i))
			tc.edit(&p)
			if err := s.CreateProgram(ctx, p); err != nil {
				t.Fatalf("CreateProgram: %v", err)
			}
			// Three tickets: at now, 1 µs later (same millisecond), and
			// once the queue has long drained.
			want := p
			for _, at := range []time.Time{now, now.Add(time.Microsecond), now.Add(time.Hour)} {
				got, err := s.IssueTicket(ctx, p.ID, at)
				if err != nil {
					t.Fatalf("IssueTicket: %v", err)
				}
				want = want.WithTicketIssued(at)
				checkProgram(t, fmt.Sprintf("IssueTicket at %v", at), got, want)
			}
			checkStoredProgram(t, s, want)
		})
	}

	t.Run("ErrNotFound", func(t *testing.T) {
		_, err := s.IssueTicket(ctx, "missing", now)
		checkErr(t, "IssueTicket", err, queue.ErrNotFound)
		_, err = s.GetProgram(ctx, "missing")
		checkErr(t, "GetProgram after IssueTicket", err, queue.ErrNotFound)
	})

	// A closed program takes no ticket, drained or not, and is left as it
	// was; reopened, it takes them again.
	for _, at := range []time.Time{now.Add(ms(1)), now.Add(time.Hour)} {
		t.Run(fmt.Sprintf("ErrClosed at %v", at.Sub(now)), func(t *testing.T) {
			p := program(fmt.Sprintf("closed-%d", at.Sub(now).Milliseconds()))
			p.Closed = true
			p.DrainAtNs = nowNs - 1e9 // drained: the re-anchoring write must refuse it too
			if err := s.CreateProgram(ctx, p); err != nil {
				t.Fatalf("CreateProgram: %v", err)
			}
			_, err := s.IssueTicket(ctx, p.ID, at)
			checkErr(t, "IssueTicket", err, queue.ErrClosed)
			checkStoredProgram(t, s, p)
			open := p
			open.Closed = false
			open.Version++
			if err := s.UpdateProgram(ctx, open, p.Issued); err != nil {
				t.Fatalf("UpdateProgram: %v", err)
			}
			got, err := s.IssueTicket(ctx, p.ID, at)
			if err != nil {
				t.Fatalf("IssueTicket after reopening: %v", err)
			}
			checkProgram(t, "IssueTicket after reopening", got, open.WithTicketIssued(at))
		})
	}
}

// programState is a state a program's tickets are issued in: edit puts a
// program in it.
type programState struct {
	name string
	edit func(p *queue.Program)
}

// programStates are the states tickets are issued in, at now, single or in
// blocks.
func programStates(now time.Time) []programState {
	nowNs := unixNs(now.Truncate(time.Millisecond))
	return []programState{
		{"paused, drain time past", func(p *queue.Program) { p.Current.Paused, p.DrainAtNs = true, nowNs-5e9 }},
		{"paused, drain time ahead", func(p *queue.Program) { p.Current.Paused, p.DrainAtNs = true, nowNs+5e9 }},
		{"advancing busy queue", func(p *queue.Program) { p.Current.Rate, p.DrainAtNs = perSecond(4), nowNs+2_500_250_000 }},
		{"advancing, drains in half a ms", func(p *queue.Program) { p.DrainAtNs = nowNs + 500_000 }},
		{"advancing, drains in a ns", func(p *queue.Program) { p.DrainAtNs = nowNs + 1 }},
		{"advancing, drained exactly now", func(p *queue.Program) { p.DrainAtNs = nowNs }},
		{"drained queue re-anchors", func(p *queue.Program) { p.DrainAtNs = nowNs - 1e9 }},
		{"drained, fractional time per ticket", func(p *queue.Program) { p.Current.Rate, p.DrainAtNs = perSecond(3), nowNs-333_333_334 }},
		{"busy, fractional time per ticket", func(p *queue.Program) { p.Current.Rate, p.DrainAtNs = perSecond(7), nowNs+142_857_143_000 }},
		{"slowest rate", func(p *queue.Program) { p.Current.Rate, p.DrainAtNs = 1, nowNs-1 }},
		{"slowest rate, millions waiting: the drain instant saturates", saturating},
		{"drain instant saturated", func(p *queue.Program) { p.Current.Rate, p.Issued, p.DrainAtNs = 1, 9_300_000, math.MaxInt64 }},
		{"fastest rate", func(p *queue.Program) { p.Current.Rate, p.DrainAtNs = perSecond(100_000), nowNs+10_000 }},
		{"rate 0", func(p *queue.Program) { p.Current.Rate, p.DrainAtNs = 0, nowNs-1e9 }},
		{"change pending", func(p *queue.Program) {
			p.Next = queue.Segment{AnchorMs: now.Add(time.Minute).UnixMilli(), Base: 20, Rate: perSecond(5)}
			p.DrainAtNs = nowNs - 1e9
		}},
		{"change due, drained", func(p *queue.Program) {
			p.Next = queue.Segment{AnchorMs: now.Add(-time.Second).UnixMilli(), Base: 20, Rate: perSecond(5)}
			p.DrainAtNs = nowNs - 1e9
		}},
		{"change due to a pause, drained", func(p *queue.Program) {
			p.Next = queue.Segment{AnchorMs: now.Add(-time.Second).UnixMilli(), Base: 20, Rate: perSecond(5), Paused: true}
			p.DrainAtNs = nowNs - 1e9
		}},
		{"fresh program", func(p *queue.Program) {
			*p = queue.Program{ID: p.ID, CreatedAt: t0, Version: 1, Current: queue.Segment{AnchorMs: t0.UnixMilli(), Rate: queue.DefaultAdmissionRate}, DrainAtNs: unixNs(t0), Options: queue.Options{AdmissionWindow: queue.DefaultAdmissionWindow}}
		}},
		{"opening ahead, shuffled", func(p *queue.Program) {
			p.OpensAt, p.Shuffle, p.ShuffleNonce = now.Truncate(time.Millisecond).Add(time.Minute), true, "ab"
			p.Current.StartMs, p.DrainAtNs = p.OpensAt.UnixMilli(), unixNs(p.OpensAt)+28*400e6
		}},
		{"opening just passed, shuffled: the pre-queue is fixed first", func(p *queue.Program) {
			p.OpensAt, p.Shuffle, p.ShuffleNonce = now.Truncate(time.Millisecond).Add(-ms(1)), true, "ab"
			p.Current.StartMs = p.OpensAt.UnixMilli()
		}},
		{"opening passed, pre-queue fixed", func(p *queue.Program) {
			p.OpensAt, p.Shuffle, p.ShuffleNonce, p.Prequeue, p.PrequeueFixed = now.Truncate(time.Millisecond).Add(-time.Second), true, "ab", 33, true
		}},
		{"change due to an opening, drained", func(p *queue.Program) {
			p.Next = queue.Segment{AnchorMs: now.Add(-time.Second).UnixMilli(), Base: 20, Rate: perSecond(5), StartMs: now.Add(-ms(500)).UnixMilli()}
			p.DrainAtNs = nowNs - 1e9
		}},
	}
}

// inParallel calls f(0..n-1) from a pool of workers.
func inParallel(n int, f func(i int)) {
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(workers, n) {
		wg.Go(func() {
			for i := range next {
				f(i)
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
}

func testIssueTicketConcurrent(t *testing.T, s queue.Store) {
	ctx := t.Context()
	now := t0.Add(time.Minute)
	for _, tc := range []struct {
		name string
		n    int
		// p's state when the tickets are issued; want its state after.
		p, want queue.Program
	}{
		{
			// Every call extends DrainAtNs.
			name: "busy queue",
			n:    concurrentTickets,
			p:    queue.Program{ID: "busy", CreatedAt: t0, Version: 2, Current: queue.Segment{AnchorMs: t0.UnixMilli(), Rate: perSecond(1)}, DrainAtNs: unixNs(t0) + 1e15, Options: queue.Options{AdmissionWindow: time.Minute}},
			want: queue.Program{ID: "busy", CreatedAt: t0, Version: 2, Issued: concurrentTickets, Current: queue.Segment{AnchorMs: t0.UnixMilli(), Rate: perSecond(1)}, DrainAtNs: unixNs(t0) + 1e15 + concurrentTickets*1e9, Options: queue.Options{AdmissionWindow: time.Minute}},
		},
		{
			// Every call finds the queue drained at the same now; exactly
			// one re-anchors it, the others then find it busy.
			name: "drained queue",
			n:    concurrentReanchors,
			p:    queue.Program{ID: "drained", CreatedAt: t0, Version: 2, Issued: 7, Current: queue.Segment{AnchorMs: t0.UnixMilli(), Base: 7, Rate: perSecond(1000)}, DrainAtNs: unixNs(now) - 10e6, Options: queue.Options{AdmissionWindow: time.Minute}},
			want: queue.Program{ID: "drained", CreatedAt: t0, Version: 3, Issued: 7 + concurrentReanchors, Current: queue.Segment{AnchorMs: now.UnixMilli(), Base: 7, Rate: perSecond(1000)}, DrainAtNs: unixNs(now) + concurrentReanchors*1e6, Options: queue.Options{AdmissionWindow: time.Minute}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := s.CreateProgram(ctx, tc.p); err != nil {
				t.Fatalf("CreateProgram: %v", err)
			}
			tickets := make([]int64, tc.n)
			errs := make([]error, tc.n)
			start := time.Now()
			inParallel(tc.n, func(i int) {
				p, err := s.IssueTicket(ctx, tc.p.ID, now)
				tickets[i], errs[i] = p.Issued, err
			})
			t.Logf("%d concurrent IssueTicket in %v", tc.n, time.Since(start))
			if err := errors.Join(errs...); err != nil {
				t.Fatalf("IssueTicket: %v", err)
			}
			slices.Sort(tickets)
			for i, got := range tickets {
				if want := tc.p.Issued + int64(i) + 1; got != want {
					t.Fatalf("sorted tickets[%d] = %d, want %d (each of %d..%d exactly once)", i, got, want, tc.p.Issued+1, tc.p.Issued+int64(tc.n))
				}
			}
			want := tc.want
			for i := range want.Recent {
				want.Recent[i] = now.UnixMilli() // the last tickets, all at now
			}
			checkStoredProgram(t, s, want)
		})
	}
}

// tokenDiff describes how got differs from want, "" if it does not. Every
// field counts, times as instants; got's ExpiresAt may be rounded up to the
// second (a zero one stays zero).
func tokenDiff(want, got queue.Token) string {
	return cmp.Diff(want, got, ttlField(".ExpiresAt"))
}

// ttlField compares the time fields named field (".ExpiresAt") as a TTL:
// one may be the other rounded up to the second (a zero one stays zero).
func ttlField(field string) cmp.Option {
	return cmp.FilterPath(func(p cmp.Path) bool { return p.Last().String() == field },
		cmp.Comparer(func(w, g time.Time) bool {
			if w.After(g) { // the comparer must be symmetric: w is the earlier
				w, g = g, w
			}
			return w.IsZero() == g.IsZero() && !g.Before(w) && g.Before(w.Add(time.Second)) && g.Equal(g.Truncate(time.Second)) || w.Equal(g)
		}))
}

func checkToken(t *testing.T, what string, got, want queue.Token) {
	t.Helper()
	if d := tokenDiff(want, got); d != "" {
		t.Errorf("%s (-want +got):\n%s", what, d)
	}
}

func checkStoredToken(t *testing.T, s queue.Store, want queue.Token) {
	t.Helper()
	got, err := s.GetToken(t.Context(), want.ID)
	if err != nil {
		t.Fatalf("GetToken: %v", err)
	}
	checkToken(t, "stored token", got, want)
}

// waiting is a token as Enter stores it.
func waiting(ticket int64) queue.Token {
	issued := t0.Add(ms(1_234))
	return queue.Token{
		ID:        queue.NewTokenID(),
		ProgramID: "prog",
		Ticket:    ticket,
		IssuedAt:  issued,
		ExpiresAt: issued.Add(48 * time.Hour),
	}
}

func admitted(t queue.Token) queue.Token {
	t.AdmittedAt = t0.Add(ms(5_001))
	t.AdmissionExpiresAt = t.AdmittedAt.Add(10 * time.Minute)
	t.ExpiresAt = t.AdmissionExpiresAt.Add(24 * time.Hour).Add(ms(500)) // not on a second
	t.AdmissionPass = "pass-of-" + t.ID
	return t
}

func left(t queue.Token) queue.Token {
	t.LeftAt = t0.Add(ms(7_777))
	t.ExpiresAt = t.LeftAt.Add(24 * time.Hour)
	return t
}

func testToken(t *testing.T, s queue.Store) {
	ctx := t.Context()
	for _, tc := range []struct {
		name string
		tok  queue.Token
	}{
		{"waiting", waiting(1)},
		{"admitted", admitted(waiting(2))},
		{"left", left(waiting(3))},
		{"every field", left(admitted(waiting(4)))},
		{"zero times stay zero", queue.Token{ID: queue.NewTokenID(), ProgramID: "prog", Ticket: 5}},
		{"large ticket", waiting(1 << 53)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := s.PutToken(ctx, tc.tok); err != nil {
				t.Fatalf("PutToken: %v", err)
			}
			checkStoredToken(t, s, tc.tok)
		})
	}

	t.Run("ErrConflict on duplicate", func(t *testing.T) {
		first := waiting(10)
		if err := s.PutToken(ctx, first); err != nil {
			t.Fatalf("PutToken: %v", err)
		}
		second := waiting(11)
		second.ID = first.ID
		checkErr(t, "second PutToken", s.PutToken(ctx, second), queue.ErrConflict)
		checkStoredToken(t, s, first)
	})

	t.Run("ErrNotFound", func(t *testing.T) {
		_, err := s.GetToken(ctx, queue.NewTokenID())
		checkErr(t, "GetToken", err, queue.ErrNotFound)
	})
}

type markFunc func(ctx context.Context, s queue.Store, t queue.Token) (queue.Token, error)

func markAdmitted(ctx context.Context, s queue.Store, t queue.Token) (queue.Token, error) {
	return s.MarkAdmitted(ctx, admitted(t))
}

func markLeft(ctx context.Context, s queue.Store, t queue.Token) (queue.Token, error) {
	return s.MarkLeft(ctx, left(t))
}

// endAdmission ends t's admission, once admitted, at left's instant.
func endAdmission(ctx context.Context, s queue.Store, t queue.Token) (queue.Token, error) {
	return s.EndAdmission(ctx, ended(t))
}

// ended is t admitted, then its admission ended at left's instant.
func ended(t queue.Token) queue.Token { return left(admitted(t)) }

// admitThenEnd marks t admitted, then ends its admission.
func admitThenEnd(ctx context.Context, s queue.Store, t queue.Token) (queue.Token, error) {
	if _, err := markAdmitted(ctx, s, t); err != nil {
		return queue.Token{}, err
	}
	return endAdmission(ctx, s, t)
}

// endAdmissionLate is a second end, at another time.
func endAdmissionLate(ctx context.Context, s queue.Store, t queue.Token) (queue.Token, error) {
	e := ended(t)
	e.LeftAt, e.ExpiresAt = e.LeftAt.Add(time.Minute), e.ExpiresAt.Add(time.Minute)
	return s.EndAdmission(ctx, e)
}

// markAdmittedLate is a second sighting of the admission, at another time.
func markAdmittedLate(ctx context.Context, s queue.Store, t queue.Token) (queue.Token, error) {
	t = admitted(t)
	t.AdmittedAt = t.AdmittedAt.Add(time.Minute)
	t.AdmissionExpiresAt = t.AdmissionExpiresAt.Add(time.Minute)
	t.ExpiresAt = t.ExpiresAt.Add(time.Minute)
	t.AdmissionPass = "a later pass"
	return s.MarkAdmitted(ctx, t)
}

func testMark(t *testing.T, s queue.Store) {
	ctx := t.Context()
	for _, tc := range []struct {
		name          string
		first, second markFunc
		want          func(queue.Token) queue.Token // stored after both, from the waiting token
	}{
		{"MarkAdmitted then MarkLeft", markAdmitted, markLeft, admitted},
		{"MarkLeft then MarkAdmitted", markLeft, markAdmitted, left},
		{"MarkAdmitted twice", markAdmitted, markAdmittedLate, admitted},
		{"MarkLeft twice", markLeft, markLeft, left},
		// EndAdmission acts on an admitted token only, once.
		{"MarkLeft then EndAdmission", markLeft, endAdmission, left},
		{"MarkAdmitted, EndAdmission, then both again", admitThenEnd, endAdmissionLate, ended},
		{"MarkAdmitted, EndAdmission, then MarkLeft", admitThenEnd, markLeft, ended},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tok := waiting(3)
			if err := s.PutToken(ctx, tok); err != nil {
				t.Fatalf("PutToken: %v", err)
			}
			want := tc.want(tok)
			got, err := tc.first(ctx, s, tok)
			if err != nil {
				t.Fatalf("first mark: %v", err)
			}
			checkToken(t, "first mark", got, want)
			got, err = tc.second(ctx, s, tok)
			if err != nil {
				t.Fatalf("second mark: %v", err)
			}
			checkToken(t, "second mark (first writer wins)", got, want)
			checkStoredToken(t, s, want)
		})
	}

	// EndAdmission leaves a waiting token as it is.
	t.Run("EndAdmission of a waiting token", func(t *testing.T) {
		tok := waiting(6)
		if err := s.PutToken(ctx, tok); err != nil {
			t.Fatalf("PutToken: %v", err)
		}
		got, err := endAdmission(ctx, s, tok)
		if err != nil {
			t.Fatalf("EndAdmission: %v", err)
		}
		checkToken(t, "EndAdmission", got, tok)
		checkStoredToken(t, s, tok)
	})

	// EndAdmission past the admission window changes nothing: the
	// admission ended by itself (EXPIRED).
	t.Run("EndAdmission after the window", func(t *testing.T) {
		tok := waiting(7)
		if err := s.PutToken(ctx, tok); err != nil {
			t.Fatalf("PutToken: %v", err)
		}
		if _, err := markAdmitted(ctx, s, tok); err != nil {
			t.Fatalf("MarkAdmitted: %v", err)
		}
		late := ended(tok)
		late.LeftAt = late.AdmissionExpiresAt
		got, err := s.EndAdmission(ctx, late)
		if err != nil {
			t.Fatalf("EndAdmission: %v", err)
		}
		checkToken(t, "EndAdmission", got, admitted(tok))
		checkStoredToken(t, s, admitted(tok))
	})

	// A mark writes only its own fields: the rest of the token as stored
	// stays, whatever the caller's copy says.
	t.Run("MarkAdmitted keeps stored fields", func(t *testing.T) {
		tok := waiting(4)
		if err := s.PutToken(ctx, tok); err != nil {
			t.Fatalf("PutToken: %v", err)
		}
		stale := tok
		stale.Ticket, stale.ProgramID, stale.IssuedAt = 99, "other", t0
		got, err := s.MarkAdmitted(ctx, admitted(stale))
		if err != nil {
			t.Fatalf("MarkAdmitted: %v", err)
		}
		checkToken(t, "MarkAdmitted", got, admitted(tok))
	})

	for _, tc := range []struct {
		name, op string
		mark     markFunc
	}{
		{"MarkAdmitted ErrNotFound", "MarkAdmitted", markAdmitted},
		{"MarkLeft ErrNotFound", "MarkLeft", markLeft},
		{"EndAdmission ErrNotFound", "EndAdmission", endAdmission},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tok := waiting(5)
			_, err := tc.mark(ctx, s, tok)
			checkErr(t, tc.op, err, queue.ErrNotFound)
			_, err = s.GetToken(ctx, tok.ID)
			checkErr(t, "GetToken after mark", err, queue.ErrNotFound)
		})
	}
}

func testMarkConcurrent(t *testing.T, s queue.Store) {
	ctx := t.Context()
	// Per token, MarkAdmitted and MarkLeft race: one wins, both callers
	// get the winner's token. Enough tokens that both orders happen.
	admittedWins, leftWins := 0, 0
	var mu sync.Mutex
	inParallel(concurrentMarks, func(i int) {
		tok := waiting(int64(i + 1))
		if err := s.PutToken(ctx, tok); err != nil {
			t.Errorf("PutToken: %v", err)
			return
		}
		var a, l queue.Token
		var errA, errL error
		var wg sync.WaitGroup
		wg.Go(func() { a, errA = markAdmitted(ctx, s, tok) })
		wg.Go(func() { l, errL = markLeft(ctx, s, tok) })
		wg.Wait()
		if err := errors.Join(errA, errL); err != nil {
			t.Errorf("token %d: %v", i, err)
			return
		}
		var want queue.Token
		switch {
		case !a.AdmittedAt.IsZero() && a.LeftAt.IsZero():
			want = admitted(tok)
		case !a.LeftAt.IsZero() && a.AdmittedAt.IsZero():
			want = left(tok)
		default:
			t.Errorf("token %d: MarkAdmitted returned AdmittedAt %v, LeftAt %v: want exactly one set", i, a.AdmittedAt, a.LeftAt)
			return
		}
		mu.Lock()
		if want.LeftAt.IsZero() {
			admittedWins++
		} else {
			leftWins++
		}
		mu.Unlock()
		if d := tokenDiff(want, a); d != "" {
			t.Errorf("token %d: MarkAdmitted (-want +got):\n%s", i, d)
		}
		if d := cmp.Diff(a, l); d != "" {
			t.Errorf("token %d: MarkLeft and MarkAdmitted returned different tokens (-MarkAdmitted +MarkLeft):\n%s", i, d)
		}
		got, err := s.GetToken(ctx, tok.ID)
		if err != nil {
			t.Errorf("token %d: GetToken: %v", i, err)
		} else if d := cmp.Diff(a, got); d != "" {
			t.Errorf("token %d: stored token differs from the marks' (-marks +stored):\n%s", i, d)
		}
	})
	t.Logf("%d races: MarkAdmitted won %d, MarkLeft won %d", concurrentMarks, admittedWins, leftWins)
}
