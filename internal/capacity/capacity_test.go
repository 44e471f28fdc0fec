package capacity_test

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"testing"
	"time"

	"github.com/example/waitingroom/internal/capacity"
	"github.com/example/waitingroom/internal/pace"
)

func TestFreedAt(t *testing.T) {
	c := capacity.Capacity{Level: 3, Steps: []capacity.Step{
		{AtMs: 1000, Freed: 5},                // at once
		{AtMs: 2000, Freed: 9, Rate: rate(2)}, // one at once, then 2/s
		{AtMs: 3000, Freed: 8},                // at or below the level then: holds it
		{AtMs: 5000, Freed: 20, Rate: rate(1)},
	}}
	for _, tt := range []struct {
		ms, want int64
	}{
		{0, 3}, {999, 3}, {1000, 5}, {1999, 5},
		{2000, 6}, {2499, 6}, {2500, 7}, {2999, 7},
		{3000, 8}, {4999, 8}, // the rise stops at the next step
		{5000, 9}, {6000, 10}, {16000, 20}, {99999, 20},
	} {
		if got := c.FreedAt(tt.ms); got != tt.want {
			t.Errorf("FreedAt(%d) = %d, want %d", tt.ms, got, tt.want)
		}
	}
}

// TestReachMs: ReachMs(n, from) is the first ms ≥ from with FreedAt ≥ n,
// on random ceilings, and FreedAt never falls.
func TestReachMs(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 300 {
		var c capacity.Capacity
		c.Level = rng.Int64N(5)
		at, freed := int64(0), c.Level
		for range rng.IntN(5) {
			at += rng.Int64N(3000)
			freed += rng.Int64N(8) - 1
			st := capacity.Step{AtMs: at, Freed: freed}
			if rng.IntN(2) == 0 {
				st.Rate = pace.Rate(1 + rng.Int64N(5000))
			}
			c.Steps = append(c.Steps, st)
		}
		for range 10 {
			n, from := rng.Int64N(freed+3), rng.Int64N(at+2000)
			// FreedAt never falls, so the first ms is a binary search.
			if a, b := from+rng.Int64N(5000), from+rng.Int64N(5000); c.FreedAt(min(a, b)) > c.FreedAt(max(a, b)) {
				t.Fatalf("%+v: FreedAt falls between %d and %d", c, min(a, b), max(a, b))
			}
			const horizon = 1 << 40
			want, wantOK := from+int64(sort.Search(horizon, func(d int) bool { return c.FreedAt(from+int64(d)) >= n })), true
			if want == from+horizon {
				want, wantOK = 0, false
			}
			got, ok := c.ReachMs(n, from)
			if got != want || ok != wantOK {
				t.Fatalf("%+v: ReachMs(%d, %d) = %d, %v; want %d, %v", c, n, from, got, ok, want, wantOK)
			}
		}
	}
}

// TestFoldKeepsTheCeiling: a fold that prunes the steps in effect leaves
// the ceiling where it was at every instant.
func TestFoldKeepsTheCeiling(t *testing.T) {
	c := capacity.Capacity{Steps: []capacity.Step{{AtMs: 1000, Freed: 10, Rate: rate(1)}, {AtMs: 2000, Freed: 20, Rate: rate(1)}}}
	level, steps := capacity.Pruned(c, 3000)
	after := capacity.Capacity{Level: level, Steps: steps}
	for ms := int64(2000); ms <= 30_000; ms += 250 {
		if got, want := after.FreedAt(ms), c.FreedAt(ms); got != want {
			t.Errorf("FreedAt(%d) = %d after pruning, %d before", ms, got, want)
		}
	}
}

// TestReserveBounded: however many issuances, a program keeps at most 8
// reservations, and from the last issuance on they hold at least what
// each issuance alone would, so merging never raises the ceiling.
func TestReserveBounded(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 20))
	for trial := range 20 {
		var kept, all []capacity.Reservation
		ms := int64(1_000_000)
		for range 30 {
			ms += rng.Int64N(60_000)
			r := capacity.Reservation{FromMs: ms, UntilMs: ms + 60_000 + rng.Int64N(3_600_000), N: 1 + rng.Int64N(1000), Rate: pace.Rate(rng.Int64N(3) * 500_000)}
			kept, all = capacity.Reserve(kept, r, ms), append(all, r)
			if len(kept) > 8 {
				t.Fatalf("trial %d: %d reservations kept", trial, len(kept))
			}
			for at := ms; at < ms+5_000_000; at += 1_000 + rng.Int64N(60_000) {
				var held, want int64
				for _, x := range kept {
					held += x.HeldAt(at)
				}
				for _, x := range all {
					want += x.HeldAt(at)
				}
				if held < want {
					t.Fatalf("trial %d: at %d the kept reservations hold %d, the issuances %d", trial, at, held, want)
				}
			}
		}
	}
}

// rate is perSecond people a second as a Rate.
func rate(perSecond float64) pace.Rate {
	r, ok := pace.NewRate(perSecond)
	if !ok {
		panic(fmt.Sprintf("rate %g is not a valid admission rate", perSecond))
	}
	return r
}

// foldEvery folds c every period for d from startMs, each fold counting
// the ends released returns for it; it returns c and the slots the steps
// freed by then.
func foldEvery(c capacity.Capacity, p capacity.Program, startMs, period, d int64, released func(ms int64) int64) capacity.Capacity {
	for ms := startMs; ms <= startMs+d; ms += period {
		p.Capacity = c
		c = c.Folded(p, time.UnixMilli(ms), 2*time.Second, released(ms), 0, 0)
	}
	return c
}

// TestTurnoverMeasured: the folds measure the slots freed a second over
// TurnoverWindow, whatever the folds' spacing, and bound the turnover at
// twice it and its spread, within the admission rate; before a window is
// in, at the admission rate.
func TestTurnoverMeasured(t *testing.T) {
	p := capacity.Program{ID: "p", Capped: true, Rate: rate(20)}
	for _, period := range []int64{250, 1000, 3000} {
		// 4 a second, in whole slots: the remainder carried over.
		freed := int64(0)
		c := foldEvery(capacity.Capacity{}, p, 1_000_000, period, 20_000, func(ms int64) int64 {
			n := (ms-1_000_000)*4/1000 - freed
			freed += n
			return n
		})
		if c.BoundRate != rate(20) {
			t.Errorf("every %d ms, before a window: bound %v, want the admission rate", period, c.BoundRate)
		}
		c = foldEvery(c, p, 1_021_000, period, 120_000, func(ms int64) int64 {
			n := (ms-1_000_000)*4/1000 - freed
			freed += n
			return n
		})
		if r := c.ReleaseRate.PerSecond(); r < 3.9 || r > 4.1 {
			t.Errorf("every %d ms: measured %v/s, want about 4/s", period, r)
		}
		if b := c.BoundRate.PerSecond(); b < 7.8 || b > 9 {
			t.Errorf("every %d ms: bound %v/s (spread %v), want twice the rate and its spread", period, b, c.ReleaseSpread)
		}
	}
}

// TestBudgetHoldsABurst: under a bound, slots freed faster than it go
// into the ceiling at it, after a burst of BurstWindow's worth; the rest
// waits as backlog, and nothing is lost.
func TestBudgetHoldsABurst(t *testing.T) {
	p := capacity.Program{ID: "p", Capped: true, Rate: rate(20)}
	c := capacity.Capacity{FoldedAtMs: 1_000_000, BoundRate: rate(4), BoundMarks: []pace.Rate{rate(4)}, BoundMarkAtMs: 1_000_000, Budget: 12_000}
	p.Capacity = c
	c = c.Folded(p, time.UnixMilli(1_000_250), 2*time.Second, 100, 0, 0) // the site ends 100 sessions at once
	if top := c.Steps[len(c.Steps)-1].Freed; top != 12 || c.Backlog != 88 {
		t.Fatalf("a burst of 100 under a bound of 4/s: %d freed, %d held; want the full budget, BurstWindow's 12, and 88 held", top, c.Backlog)
	}
	c = foldEvery(c, p, 1_000_500, 250, 30_000, func(int64) int64 { return 0 })
	top := c.Steps[len(c.Steps)-1].Freed
	if top+c.Backlog != 100 || top > 12+4*31 {
		t.Errorf("30 s later: %d freed, %d held; want 100 in all, freed at 4/s at most", top, c.Backlog)
	}
}

// TestBoundRaisedSlowly: a raised bound refills the budget at the lower
// one until every answer told under it has polled again (AnswerLife).
func TestBoundRaisedSlowly(t *testing.T) {
	p := capacity.Program{ID: "p", Capped: true, Rate: rate(1000)}
	low := capacity.Capacity{FoldedAtMs: 1_000_000, MeasuredSinceMs: 900_000, ReleaseRate: rate(2), BoundRate: rate(4),
		BoundMarks: []pace.Rate{rate(4)}, BoundMarkAtMs: 1_000_000}
	// The turnover jumps to 50/s: the bound follows at once, the budget's refill only after AnswerLife.
	c := foldEvery(low, p, 1_000_250, 250, 30_000, func(int64) int64 { return 12 })
	if c.BoundRate.PerSecond() < 20 {
		t.Fatalf("bound %v after 30 s at 48/s", c.BoundRate)
	}
	freed := func(c capacity.Capacity) int64 { return c.Steps[len(c.Steps)-1].Freed }
	if got := freed(c); got > 12+4*31 {
		t.Errorf("%d freed in 30 s after the raise, want at most the old bound's 4/s", got)
	}
	// Once the answers told under the old bound are out of their time,
	// the budget refills at the new one.
	c = foldEvery(c, p, 1_030_500, 250, capacity.AnswerLife.Milliseconds()+30_000, func(int64) int64 { return 12 })
	before := freed(c)
	c = foldEvery(c, p, 1_000_000+capacity.AnswerLife.Milliseconds()+61_000, 250, 10_000, func(int64) int64 { return 12 })
	if got := freed(c) - before; got < 10*60 {
		t.Errorf("%d freed in 10 s, %v after the raise; want the new bound's, over 60/s", got, capacity.AnswerLife+time.Minute)
	}
}

// TestCapRaiseFreedByTheFold: a raise of the cap since admission started
// is freed by the next fold, once, at once, and the places admitted until
// AnswerLife after it acts have AnswerLife more to show.
func TestCapRaiseFreedByTheFold(t *testing.T) {
	p := capacity.Program{ID: "p", Capped: true, Rate: rate(20), CapRaised: 30, NoShowAfter: 10 * time.Second}
	c := capacity.Capacity{FoldedAtMs: 1_000_000, CapRaisedSeen: 10, BoundRate: rate(1), BoundMarks: []pace.Rate{rate(1)}, BoundMarkAtMs: 1_000_000}
	p.Capacity = c
	c = c.Folded(p, time.UnixMilli(1_000_250), 2*time.Second, 0, 0, 0)
	p.Capacity = c
	c = c.Folded(p, time.UnixMilli(1_000_500), 2*time.Second, 0, 0, 0)
	if top := c.Steps[len(c.Steps)-1].Freed; top != 20 || c.CapRaisedSeen != 30 {
		t.Errorf("freed %d, raise seen %d; want the 20 raised at once, once", top, c.CapRaisedSeen)
	}
	grace := []int64{1_000_250, 1_000_250 + 2_000 + capacity.AnswerLife.Milliseconds()}
	if got := []int64{c.GraceFromMs, c.GraceUntilMs}; got[0] != grace[0] || got[1] != grace[1] {
		t.Fatalf("grace %v, want %v", got, grace)
	}
	for _, tt := range []struct{ now, want int64 }{
		{1_000_000, 1_000_000 - 10_000}, // before: the time to show
		{1_020_000, 1_000_249},          // admissions before the grace, only
		{1_200_000, 1_200_000 - 10_000 - capacity.AnswerLife.Milliseconds()}, // in it: AnswerLife more
		{1_500_000, 1_500_000 - 10_000},                                      // its last are due: as before
	} {
		if got := c.NoShowBefore(time.UnixMilli(tt.now), p.NoShowAfter); got != tt.want {
			t.Errorf("at %d, no-shows admitted by %d, want %d", tt.now, got, tt.want)
		}
	}
}

// TestBacklogDrains: slots freed beyond the bound raise it, which does
// not fall while they wait; they are all in once the answers given under
// the lower bound are out of their time.
func TestBacklogDrains(t *testing.T) {
	p := capacity.Program{ID: "p", Capped: true, Rate: rate(1000)}
	c := capacity.Capacity{MeasuredSinceMs: 900_000, ReleaseRate: rate(1), BoundRate: rate(2.5), BoundMarks: []pace.Rate{rate(2.5)}, BoundMarkAtMs: 1_000_000}
	c.FoldedAtMs = 1_000_000
	lump := true
	c = foldEvery(c, p, 1_000_250, 250, capacity.AnswerLife.Milliseconds()+90_000, func(int64) int64 {
		if lump {
			lump = false
			return 1000 // the site ends a thousand sessions at once
		}
		return 0
	})
	if c.Backlog != 0 || c.Steps[len(c.Steps)-1].Freed != 1000 {
		t.Errorf("%v after the lump: %d held, want all 1,000 in", capacity.AnswerLife+90*time.Second, c.Backlog)
	}
}

// TestManualAdmissionDropsTheBound: with a rate of 0 no answer counts on a
// bound; once those told under the last one are out of their time, the
// folds release what they free at once.
func TestManualAdmissionDropsTheBound(t *testing.T) {
	p := capacity.Program{ID: "p", Capped: true}
	c := capacity.Capacity{FoldedAtMs: 1_000_000, MeasuredSinceMs: 900_000, BoundRate: rate(1), BoundMarks: []pace.Rate{rate(1)}, BoundMarkAtMs: 1_000_000, Backlog: 500}
	c = foldEvery(c, p, 1_000_250, 250, capacity.AnswerLife.Milliseconds(), func(int64) int64 { return 0 })
	if c.BoundRate == 0 || c.Backlog == 0 {
		t.Fatalf("within AnswerLife: bound %v, %d held; want the bound kept", c.BoundRate, c.Backlog)
	}
	c = foldEvery(c, p, 1_000_000+capacity.AnswerLife.Milliseconds()+250, 250, capacity.AnswerLife.Milliseconds(), func(int64) int64 { return 0 })
	if c.BoundRate != 0 || c.Backlog != 0 {
		t.Errorf("after: bound %v, %d held; want none, all in", c.BoundRate, c.Backlog)
	}
}
