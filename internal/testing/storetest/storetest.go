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

	"github.com/example/waitingroom/internal/queue"
)

// Sizes of the concurrency tests: enough callers to interleave on a real
// server (moto answers a few hundred requests a second), few enough to stay
// within a couple of seconds there.
const (
	concurrentTickets   = 500
	concurrentReanchors = 100
	concurrentMarks     = 20
	workers             = 32
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
}

// t0 is the suite's epoch; times are derived from it at millisecond
// precision.
var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func ms(n int64) time.Duration { return time.Duration(n) * time.Millisecond }

func unixMs(t time.Time) float64 { return float64(t.UnixMilli()) }

// program is an advancing program in mid-flight: 40 tickets issued, the
// counter at 12 from t0+1.5 s at 2.5 per second, so the queue drains 28
// tickets later.
func program(id string) queue.Program {
	anchor := t0.Add(ms(1500))
	return queue.Program{
		ID:              id,
		CreatedAt:       t0,
		Version:         3,
		Issued:          40,
		Rate:            2.5,
		Base:            12,
		Anchor:          anchor,
		DrainAtMs:       unixMs(anchor) + 28*400,
		AdmissionWindow: 10 * time.Minute,
	}
}

// programDiff lists the fields in which got differs from want; DrainAtMs
// within 1e-3 ms, as a store may add in decimal rather than binary.
func programDiff(got, want queue.Program) []string {
	var d []string
	add := func(field string, g, w any) { d = append(d, fmt.Sprintf("%s = %v, want %v", field, g, w)) }
	if got.ID != want.ID {
		add("ID", got.ID, want.ID)
	}
	if !got.CreatedAt.Equal(want.CreatedAt) {
		add("CreatedAt", got.CreatedAt, want.CreatedAt)
	}
	if got.Version != want.Version {
		add("Version", got.Version, want.Version)
	}
	if got.Issued != want.Issued {
		add("Issued", got.Issued, want.Issued)
	}
	if got.Rate != want.Rate {
		add("Rate", got.Rate, want.Rate)
	}
	if got.Paused != want.Paused {
		add("Paused", got.Paused, want.Paused)
	}
	if got.Base != want.Base {
		add("Base", got.Base, want.Base)
	}
	if !got.Anchor.Equal(want.Anchor) {
		add("Anchor", got.Anchor, want.Anchor)
	}
	if !got.NextAt.Equal(want.NextAt) {
		add("NextAt", got.NextAt, want.NextAt)
	}
	if got.NextBase != want.NextBase {
		add("NextBase", got.NextBase, want.NextBase)
	}
	if got.NextRate != want.NextRate {
		add("NextRate", got.NextRate, want.NextRate)
	}
	if got.NextPaused != want.NextPaused {
		add("NextPaused", got.NextPaused, want.NextPaused)
	}
	if got.Policy != want.Policy {
		add("Policy", got.Policy, want.Policy)
	}
	if got.Closed != want.Closed {
		add("Closed", got.Closed, want.Closed)
	}
	if math.Abs(got.ManualRate-want.ManualRate) > 1e-9 {
		add("ManualRate", got.ManualRate, want.ManualRate)
	}
	if !got.LastAdmitAt.Equal(want.LastAdmitAt) {
		add("LastAdmitAt", got.LastAdmitAt, want.LastAdmitAt)
	}
	if got.LastAdmitGap != want.LastAdmitGap {
		add("LastAdmitGap", got.LastAdmitGap, want.LastAdmitGap)
	}
	if math.Abs(got.DrainAtMs-want.DrainAtMs) > 1e-3 || math.IsNaN(got.DrainAtMs) {
		add("DrainAtMs", fmt.Sprintf("%.6f", got.DrainAtMs), fmt.Sprintf("%.6f", want.DrainAtMs))
	}
	if got.AdmissionWindow != want.AdmissionWindow {
		add("AdmissionWindow", got.AdmissionWindow, want.AdmissionWindow)
	}
	return d
}

func checkProgram(t *testing.T, what string, got, want queue.Program) {
	t.Helper()
	if d := programDiff(got, want); len(d) > 0 {
		t.Errorf("%s: %q", what, d)
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
	fractional.Rate = 1.0 / 3
	fractional.DrainAtMs = unixMs(fractional.Anchor) + 1234.5678
	paused := program("paused")
	paused.Paused = true
	stopped := program("rate-zero")
	stopped.Rate = 0
	fresh := queue.Program{ID: "fresh", CreatedAt: t0, Version: 1, Rate: queue.DefaultAdmissionRate, Anchor: t0, DrainAtMs: unixMs(t0), AdmissionWindow: queue.DefaultAdmissionWindow}

	for _, p := range []queue.Program{program("mid-flight"), fractional, paused, stopped, fresh} {
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
		second.Issued, second.Version, second.Rate = 0, 1, 7
		checkErr(t, "second CreateProgram", s.CreateProgram(ctx, second), queue.ErrConflict)
		checkStoredProgram(t, s, first)
	})

	t.Run("ErrNotFound", func(t *testing.T) {
		_, err := s.GetProgram(ctx, "missing")
		checkErr(t, "GetProgram", err, queue.ErrNotFound)
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
			if !tc.missing {
				if err := s.CreateProgram(ctx, orig); err != nil {
					t.Fatalf("CreateProgram: %v", err)
				}
			}
			upd := orig
			upd.Version = tc.version
			upd.Rate, upd.Paused, upd.Base = 4, true, 30
			upd.Anchor = t0.Add(ms(9_999))
			upd.DrainAtMs = unixMs(upd.Anchor)
			upd.AdmissionWindow = 3 * time.Minute
			upd.Policy, upd.ManualRate, upd.Closed = "eta", 2.75, true
			upd.LastAdmitAt, upd.LastAdmitGap = t0.Add(ms(8_000)), ms(1_500)
			// Fields UpdateProgram must leave alone.
			upd.Issued, upd.CreatedAt = 999, t0.Add(time.Hour)

			checkErr(t, "UpdateProgram", s.UpdateProgram(ctx, upd, tc.expectIssued), tc.wantErr)
			if tc.missing {
				_, err := s.GetProgram(ctx, id)
				checkErr(t, "GetProgram after UpdateProgram", err, queue.ErrNotFound)
				return
			}
			want := orig
			if tc.wantErr == nil {
				want = upd
				want.Issued, want.CreatedAt = orig.Issued, orig.CreatedAt
			}
			checkStoredProgram(t, s, want)
		})
	}

	// A store may keep derived state (DynamoDB keeps whether the counter
	// advances and the time per ticket): tickets issued after an update
	// must follow the new settings.
	now := t0.Add(ms(20_000))
	for i, tc := range []struct {
		name         string
		pausedBefore bool
		rate         float64
		paused       bool
		admit        int64
	}{
		{name: "IssueTicket follows pause", rate: 2.5, paused: true},
		{name: "IssueTicket follows resume", pausedBefore: true, rate: 7},
		{name: "IssueTicket follows rate", rate: 3},
		{name: "IssueTicket follows rate zero", rate: 0},
		{name: "IssueTicket follows admission", rate: 2.5, admit: 100},
	} {
		for _, delay := range []time.Duration{0, time.Second} {
			t.Run(fmt.Sprintf("%s delay %v", tc.name, delay), func(t *testing.T) {
				orig := program(fmt.Sprintf("follow-%d-%d", i, delay.Milliseconds()))
				orig.Paused = tc.pausedBefore
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
	nowMs := unixMs(now)
	for i, tc := range []struct {
		name string
		edit func(p *queue.Program)
	}{
		{"paused, drain time past", func(p *queue.Program) { p.Paused, p.DrainAtMs = true, nowMs-5000 }},
		{"paused, drain time ahead", func(p *queue.Program) { p.Paused, p.DrainAtMs = true, nowMs+5000 }},
		{"advancing busy queue", func(p *queue.Program) { p.Rate, p.DrainAtMs = 4, nowMs+2500.25 }},
		{"advancing, drains in half a ms", func(p *queue.Program) { p.DrainAtMs = nowMs + 0.5 }},
		{"advancing, drained exactly now", func(p *queue.Program) { p.DrainAtMs = nowMs }},
		{"drained queue re-anchors", func(p *queue.Program) { p.DrainAtMs = nowMs - 1000 }},
		{"drained, fractional time per ticket", func(p *queue.Program) { p.Rate, p.DrainAtMs = 3, nowMs-333.3333333333333 }},
		{"busy, fractional time per ticket", func(p *queue.Program) { p.Rate, p.DrainAtMs = 7, nowMs+1e6/7 }},
		{"rate 0", func(p *queue.Program) { p.Rate, p.DrainAtMs = 0, nowMs-1000 }},
		{"fresh program", func(p *queue.Program) {
			*p = queue.Program{ID: p.ID, CreatedAt: t0, Version: 1, Rate: queue.DefaultAdmissionRate, Anchor: t0, DrainAtMs: unixMs(t0), AdmissionWindow: queue.DefaultAdmissionWindow}
		}},
	} {
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
			// Every call extends drainAtMs.
			name: "busy queue",
			n:    concurrentTickets,
			p:    queue.Program{ID: "busy", CreatedAt: t0, Version: 2, Rate: 1, Anchor: t0, DrainAtMs: unixMs(t0) + 1e9, AdmissionWindow: time.Minute},
			want: queue.Program{ID: "busy", CreatedAt: t0, Version: 2, Issued: concurrentTickets, Rate: 1, Anchor: t0, DrainAtMs: unixMs(t0) + 1e9 + concurrentTickets*1000, AdmissionWindow: time.Minute},
		},
		{
			// Every call finds the queue drained at the same now; exactly
			// one re-anchors it, the others then find it busy.
			name: "drained queue",
			n:    concurrentReanchors,
			p:    queue.Program{ID: "drained", CreatedAt: t0, Version: 2, Issued: 7, Rate: 1000, Base: 7, Anchor: t0, DrainAtMs: unixMs(now) - 10, AdmissionWindow: time.Minute},
			want: queue.Program{ID: "drained", CreatedAt: t0, Version: 3, Issued: 7 + concurrentReanchors, Rate: 1000, Base: 7, Anchor: now, DrainAtMs: unixMs(now) + concurrentReanchors, AdmissionWindow: time.Minute},
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
			checkStoredProgram(t, s, tc.want)
		})
	}
}

// tokenDiff lists the fields in which got differs from want. ExpiresAt may
// be rounded up to the second.
func tokenDiff(got, want queue.Token) []string {
	var d []string
	add := func(field string, g, w any) { d = append(d, fmt.Sprintf("%s = %v, want %v", field, g, w)) }
	if got.ID != want.ID {
		add("ID", got.ID, want.ID)
	}
	if got.ProgramID != want.ProgramID {
		add("ProgramID", got.ProgramID, want.ProgramID)
	}
	if got.Ticket != want.Ticket {
		add("Ticket", got.Ticket, want.Ticket)
	}
	for _, f := range []struct {
		name      string
		got, want time.Time
	}{
		{"IssuedAt", got.IssuedAt, want.IssuedAt},
		{"AdmittedAt", got.AdmittedAt, want.AdmittedAt},
		{"AdmissionExpiresAt", got.AdmissionExpiresAt, want.AdmissionExpiresAt},
		{"LeftAt", got.LeftAt, want.LeftAt},
	} {
		if !f.got.Equal(f.want) || f.got.IsZero() != f.want.IsZero() {
			add(f.name, f.got, f.want)
		}
	}
	if g, w := got.ExpiresAt, want.ExpiresAt; g.IsZero() != w.IsZero() || g.Before(w) || !g.Before(w.Add(time.Second)) && !w.IsZero() {
		add("ExpiresAt", g, fmt.Sprintf("%v (or up to 1s later)", w))
	}
	return d
}

func checkToken(t *testing.T, what string, got, want queue.Token) {
	t.Helper()
	if d := tokenDiff(got, want); len(d) > 0 {
		t.Errorf("%s: %q", what, d)
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

// markAdmittedLate is a second sighting of the admission, at another time.
func markAdmittedLate(ctx context.Context, s queue.Store, t queue.Token) (queue.Token, error) {
	t = admitted(t)
	t.AdmittedAt = t.AdmittedAt.Add(time.Minute)
	t.AdmissionExpiresAt = t.AdmissionExpiresAt.Add(time.Minute)
	t.ExpiresAt = t.ExpiresAt.Add(time.Minute)
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
		if d := tokenDiff(a, want); len(d) > 0 {
			t.Errorf("token %d: MarkAdmitted: %q", i, d)
		}
		if d := tokenDiff(l, a); len(d) > 0 || !l.ExpiresAt.Equal(a.ExpiresAt) {
			t.Errorf("token %d: MarkLeft returned %+v, MarkAdmitted %+v: want the same stored token", i, l, a)
		}
		got, err := s.GetToken(ctx, tok.ID)
		if err != nil {
			t.Errorf("token %d: GetToken: %v", i, err)
		} else if d := tokenDiff(got, a); len(d) > 0 || !got.ExpiresAt.Equal(a.ExpiresAt) {
			t.Errorf("token %d: stored %+v, marks returned %+v", i, got, a)
		}
	})
	t.Logf("%d races: MarkAdmitted won %d, MarkLeft won %d", concurrentMarks, admittedWins, leftWins)
}
