package queue_test

import (
	"math/rand/v2"
	"sort"
	"testing"
	"time"

	"github.com/example/waitingroom/internal/queue"
)

func TestFreedAt(t *testing.T) {
	c := queue.Capacity{Level: 3, Steps: []queue.Step{
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
		var c queue.Capacity
		c.Level = rng.Int64N(5)
		at, freed := int64(0), c.Level
		for range rng.IntN(5) {
			at += rng.Int64N(3000)
			freed += rng.Int64N(8) - 1
			st := queue.Step{AtMs: at, Freed: freed}
			if rng.IntN(2) == 0 {
				st.Rate = queue.Rate(1 + rng.Int64N(5000))
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

// TestCeilingHoldsTheCounter: a capped program's counter stops at
// MaxActiveUsers plus the slots freed, whatever its rate.
func TestCeilingHoldsTheCounter(t *testing.T) {
	p := program(1000, 0, 10, false)
	p.MaxActiveUsers = 50
	p.Capacity = queue.Capacity{Steps: []queue.Step{{AtMs: queue.UnixMs(t0.Add(20 * time.Second)), Freed: 30, Rate: rate(10)}}}
	for _, tt := range []struct {
		at   time.Duration
		want int64
	}{
		{time.Second, 10},
		{5 * time.Second, 50},  // at the cap
		{19 * time.Second, 50}, // held
		{20 * time.Second, 51}, // the first slot freed at once
		{21 * time.Second, 61}, // then the rest at the rate
		{time.Minute, 80},      // all 30
		{time.Minute + time.Second, 80},
	} {
		if got := p.Serving(t0.Add(tt.at)); got != tt.want {
			t.Errorf("Serving(+%v) = %d, want %d", tt.at, got, tt.want)
		}
		if !p.Admits(tt.want, t0.Add(tt.at)) || p.Admits(tt.want+1, t0.Add(tt.at)) {
			t.Errorf("Admits at +%v disagrees with Serving %d", tt.at, tt.want)
		}
	}
	// An admin's manual admission does not pass the cap either.
	q := p.Rebased(t0.Add(10*time.Second), rate(10), false, 500, 0)
	if got := q.Serving(t0.Add(10 * time.Second)); got != 50 {
		t.Errorf("after admitting 500 more: Serving = %d, want the cap, 50", got)
	}
}

// TestSituationUnderTheCeiling: a place the ceiling holds back is told a
// wait from the ceiling's steps, then from the measured release rate.
func TestSituationUnderTheCeiling(t *testing.T) {
	p := program(1000, 0, 100, false)
	p.MaxActiveUsers = 50
	p.Capacity = queue.Capacity{
		Steps:       []queue.Step{{AtMs: queue.UnixMs(t0.Add(10 * time.Second)), Freed: 20, Rate: rate(100)}},
		ReleaseRate: rate(2),
	}
	now := t0.Add(5 * time.Second)
	for _, tt := range []struct {
		place    int64
		wantWait time.Duration
		wantRate float64
	}{
		{40, 0, 100}, // already in
		{60, 5*time.Second + 90*time.Millisecond, 2}, // the 10th freed slot: the first at 10 s, then one each 10 ms
		{70, 5*time.Second + 190*time.Millisecond, 2},
		{80, 5*time.Second + 190*time.Millisecond + 5*time.Second, 2}, // 10 past the steps at 2/s
	} {
		sit := p.Situation(tt.place, now, time.Second)
		if sit.Wait != tt.wantWait || sit.RatePerSecond != tt.wantRate {
			t.Errorf("place %d: wait %v at %v/s, want %v at %v/s", tt.place, sit.Wait, sit.RatePerSecond, tt.wantWait, tt.wantRate)
		}
		if sit.Earliest > sit.Wait && sit.Wait > 0 {
			t.Errorf("place %d: earliest %v after the wait %v", tt.place, sit.Earliest, sit.Wait)
		}
	}
}

// TestFoldKeepsTheCeiling: a fold that prunes the steps in effect leaves
// the ceiling where it was at every instant.
func TestFoldKeepsTheCeiling(t *testing.T) {
	c := queue.Capacity{Steps: []queue.Step{{AtMs: 1000, Freed: 10, Rate: rate(1)}, {AtMs: 2000, Freed: 20, Rate: rate(1)}}}
	level, steps := queue.Pruned(c, 3000)
	after := queue.Capacity{Level: level, Steps: steps}
	for ms := int64(2000); ms <= 30_000; ms += 250 {
		if got, want := after.FreedAt(ms), c.FreedAt(ms); got != want {
			t.Errorf("FreedAt(%d) = %d after pruning, %d before", ms, got, want)
		}
	}
}

// TestEarliestUnderTheCeiling: a place the ceiling holds back is told an
// earliest admission no sooner than the slots could free: steps not yet
// written take effect a notice from now at the soonest, and free at most
// the cap's worth of slots a round.
func TestEarliestUnderTheCeiling(t *testing.T) {
	p := program(1000, 0, 100, false)
	p.MaxActiveUsers = 50
	now := t0.Add(5 * time.Second) // the segments alone admit 500
	for _, tt := range []struct {
		place int64
		want  time.Duration
	}{
		{60, time.Second},      // one round: the notice
		{100, time.Second},     // the cap's worth in that round
		{101, 3 * time.Second}, // a second round: the notice and the write budget
		{170, 5 * time.Second}, // three rounds
	} {
		if sit := p.Situation(tt.place, now, time.Second); sit.Earliest != tt.want {
			t.Errorf("place %d: earliest %v, want %v", tt.place, sit.Earliest, tt.want)
		}
	}
}

// TestCachedWhileHeld: a program the ceiling holds may be cached past its
// drain instant (every poll would read it otherwise, while the line waits
// on the cap); one it does not hold may not.
func TestCachedWhileHeld(t *testing.T) {
	p := program(100, 0, 100, false) // drained 1 s after t0
	loaded := t0.Add(2 * time.Second)
	if got := p.CacheableUntil(loaded, time.Second); !got.Equal(t0.Add(time.Second)) {
		t.Errorf("uncapped: cacheable until %v, want the drain instant %v", got, t0.Add(time.Second))
	}
	p.MaxActiveUsers = 50
	if got := p.CacheableUntil(loaded, time.Second); !got.Equal(loaded.Add(time.Second)) {
		t.Errorf("held by the ceiling: cacheable until %v, want a TTL after the read, %v", got, loaded.Add(time.Second))
	}
	p.MaxActiveUsers = 500
	if got := p.CacheableUntil(loaded, time.Second); !got.Equal(t0.Add(time.Second)) {
		t.Errorf("a cap that does not hold: cacheable until %v, want the drain instant", got)
	}
}
