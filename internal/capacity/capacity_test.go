package capacity_test

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"testing"

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
