package queue_test

import (
	"fmt"
	"math"
	"math/big"
	"testing"
	"time"

	"github.com/example/waitingroom/internal/clock"
	"github.com/example/waitingroom/internal/memstore"
	"github.com/example/waitingroom/internal/polling"
	"github.com/example/waitingroom/internal/queue"
)

func TestNewRate(t *testing.T) {
	for _, tt := range []struct {
		perSecond float64
		want      queue.Rate
		ok        bool
	}{
		{0, 0, true},
		{0.001, 1, true},
		{0.1, 100, true},
		{2.5, 2500, true},
		{1.005, 1005, true},
		{10, 10 * queue.OnePerSecond, true},
		{100_000, 100_000 * queue.OnePerSecond, true},
		{0.0015, 0, false}, // finer than a thousandth: refused, not rounded
		{1.0 / 3, 0, false},
		{0.0005, 0, false},
		{-1, 0, false},
		{100_000.001, 0, false},
		{math.NaN(), 0, false},
		{math.Inf(1), 0, false},
	} {
		got, ok := queue.NewRate(tt.perSecond)
		if got != tt.want || ok != tt.ok {
			t.Errorf("NewRate(%v) = %v, %v; want %v, %v", tt.perSecond, got, ok, tt.want, tt.ok)
		}
		if ok && got.PerSecond() != tt.perSecond {
			t.Errorf("NewRate(%v).PerSecond() = %v", tt.perSecond, got.PerSecond())
		}
	}
}

func TestSegmentArithmetic(t *testing.T) {
	const anchor = 1_780_000_000_000 // Unix ms, 2026
	for _, tt := range []struct {
		name                 string
		s                    queue.Segment
		at                   int64 // ms after anchor
		wantCounter          int64
		ticket               int64
		wantAdmitted         int64 // ms after anchor; -1: never
		wantStepNs           int64
		issued, wantDrainNsD int64 // DrainAtNs(issued) − anchor in ns
	}{
		{"TenPerSecond", queue.Segment{AnchorMs: anchor, Base: 5, Rate: 10 * queue.OnePerSecond}, 1000, 15, 16, 1100, 100_000_000, 25, 2_000_000_000},
		{"ThreePerSecond", queue.Segment{AnchorMs: anchor, Base: 0, Rate: 3 * queue.OnePerSecond}, 1000, 3, 4, 1334, 333_333_334, 1, 333_333_334},
		{"ThreePerSecondMany", queue.Segment{AnchorMs: anchor, Base: 0, Rate: 3 * queue.OnePerSecond}, 1000, 3, 3, 1000, 333_333_334, 3, 1_000_000_000},
		{"Slowest", queue.Segment{AnchorMs: anchor, Rate: 1}, 999_999, 0, 1, 1_000_000, 1_000_000_000_000, 1, 1_000_000_000_000},
		{"Fastest", queue.Segment{AnchorMs: anchor, Rate: 100_000 * queue.OnePerSecond}, 1, 100, 101, 2, 10_000, 100, 1_000_000},
		{"Paused", queue.Segment{AnchorMs: anchor, Base: 7, Rate: queue.OnePerSecond, Paused: true}, 1000, 7, 8, -1, 0, 100, 0},
		{"RateZero", queue.Segment{AnchorMs: anchor, Base: 7}, 1000, 7, 8, -1, 0, 100, 0},
		{"BeforeAnchor", queue.Segment{AnchorMs: anchor, Base: 7, Rate: queue.OnePerSecond}, -5000, 7, 8, 1000, 1_000_000_000, 7, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.s.Counter(anchor + tt.at); got != tt.wantCounter {
				t.Errorf("Counter(+%d ms) = %d, want %d", tt.at, got, tt.wantCounter)
			}
			at, ok := tt.s.AdmittedAt(tt.ticket, anchor+tt.at)
			switch {
			case tt.wantAdmitted < 0 && ok:
				t.Errorf("AdmittedAt(%d) = +%d ms, want never", tt.ticket, at-anchor)
			case tt.wantAdmitted >= 0 && (!ok || at-anchor != tt.wantAdmitted):
				t.Errorf("AdmittedAt(%d) = +%d ms (%v), want +%d ms", tt.ticket, at-anchor, ok, tt.wantAdmitted)
			}
			if got := tt.s.StepNs(); got != tt.wantStepNs {
				t.Errorf("StepNs() = %d, want %d", got, tt.wantStepNs)
			}
			if got := tt.s.DrainAtNs(tt.issued) - anchor*1e6; got != tt.wantDrainNsD {
				t.Errorf("DrainAtNs(%d) = anchor + %d ns, want + %d", tt.issued, got, tt.wantDrainNsD)
			}
		})
	}
}

// TestSegmentExtremes: far beyond any real queue, the arithmetic saturates
// instead of wrapping, and answers at once.
func TestSegmentExtremes(t *testing.T) {
	s := queue.Segment{AnchorMs: 1_780_000_000_000, Base: 1, Rate: 1}
	if got := s.Counter(math.MaxInt64); got != s.Base+(math.MaxInt64-s.AnchorMs)/1_000_000 {
		t.Errorf("Counter(MaxInt64) = %d", got)
	}
	if at, ok := s.AdmittedAt(math.MaxInt64, s.AnchorMs); !ok || at != math.MaxInt64 {
		t.Errorf("AdmittedAt(MaxInt64) = %d, %v; want MaxInt64 (saturated), true", at, ok)
	}
	if got := s.DrainAtNs(math.MaxInt64); got != math.MaxInt64 {
		t.Errorf("DrainAtNs(MaxInt64) = %d, want MaxInt64", got)
	}
	fast := queue.Segment{Base: math.MaxInt64 - 5, Rate: 100_000 * queue.OnePerSecond}
	if got := fast.Counter(math.MaxInt64); got != math.MaxInt64 {
		t.Errorf("Counter of a saturated segment = %d, want MaxInt64", got)
	}
}

// TestSituationBeyondRange is the regression test of the endless loop: at
// the slowest rates behind millions of tickets the wait exceeds what a
// time.Duration holds. It is answered at once, capped at MaxEstimatedWait.
func TestSituationBeyondRange(t *testing.T) {
	for _, tt := range []struct {
		name    string
		rate    float64
		waiting int64
	}{
		{"0.001/s, 9.3 million waiting", 0.001, 9_300_000},
		{"0.01/s, 93 million waiting", 0.01, 93_000_000},
		{"0.001/s, every ticket there is", 0.001, math.MaxInt64 - 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := program(tt.waiting+1, 1, tt.rate, false)
			done := make(chan struct{})
			var sit, later = p.Situation(0, t0, 0), p.Situation(0, t0, 0)
			go func() {
				defer close(done)
				sit = p.Situation(p.Issued, t0, 0)
				later = p.Situation(p.Issued, t0.Add(time.Hour), 0)
			}()
			select {
			case <-done:
			case <-time.After(5 * time.Second):
				t.Fatal("Situation did not answer within 5 s")
			}
			if sit.Wait != queue.MaxEstimatedWait || later.Wait != queue.MaxEstimatedWait {
				t.Errorf("Wait = %v and an hour later %v, want both capped at %v", sit.Wait, later.Wait, queue.MaxEstimatedWait)
			}
			if sit.Position != tt.waiting {
				t.Errorf("Position = %d, want %d", sit.Position, tt.waiting)
			}
			if at, ok := p.AdmissionTime(p.Issued, t0); !ok || !at.After(t0.Add(math.MaxInt64)) {
				t.Errorf("AdmissionTime = %v, %v; want beyond %v", at, ok, t0.Add(math.MaxInt64))
			}
		})
	}
	t.Run("measured manual pace", func(t *testing.T) {
		p := queue.Program{ID: "p", Issued: math.MaxInt64, ManualRate: 1, LastAdmitAt: t0, LastAdmitGap: time.Minute}
		if sit := p.Situation(math.MaxInt64, t0, 0); sit.Wait != queue.MaxEstimatedWait {
			t.Errorf("Wait = %v, want %v", sit.Wait, queue.MaxEstimatedWait)
		}
	})
}

// FuzzSegment checks the segment's integer arithmetic against exact
// rational arithmetic: the counter is ⌊Base + Rate×elapsed⌋, AdmittedAt is
// the first millisecond that admits the ticket, and DrainAtNs is the exact
// drain instant rounded up to the nanosecond.
func FuzzSegment(f *testing.F) {
	f.Add(int64(1_780_000_000_000), int64(0), int64(3000), int64(1_780_000_001_000), int64(5))
	f.Add(int64(0), int64(10), int64(1), int64(9_300_000_000_000), int64(9_300_000))
	f.Add(int64(1_780_000_000_000), int64(1<<40), int64(100_000_000), int64(math.MaxInt64), int64(math.MaxInt64))
	f.Fuzz(func(t *testing.T, anchor, base, rate, at, ticket int64) {
		// The domain: times from 1970 on, a valid rate, counters ≥ 0.
		if anchor < 0 || base < 0 || at < 0 || ticket < 0 || rate < 1 || rate > 100_000_000 {
			t.Skip()
		}
		s := queue.Segment{AnchorMs: anchor, Base: base, Rate: queue.Rate(rate)}
		maxInt := big.NewInt(math.MaxInt64)
		sat := func(x *big.Int) int64 {
			if x.Cmp(maxInt) > 0 {
				return math.MaxInt64
			}
			return x.Int64()
		}
		counter := func(t int64) int64 {
			if t <= anchor {
				return base
			}
			n := new(big.Int).Mul(big.NewInt(t-anchor), big.NewInt(rate))
			n.Quo(n, big.NewInt(1_000_000))
			return sat(n.Add(n, big.NewInt(base)))
		}
		if got, want := s.Counter(at), counter(at); got != want {
			t.Fatalf("%+v: Counter(%d) = %d, want %d", s, at, got, want)
		}
		got, ok := s.AdmittedAt(ticket, at)
		if !ok {
			t.Fatalf("%+v: AdmittedAt(%d, %d) says never", s, ticket, at)
		}
		if got < at || got < math.MaxInt64 && counter(got) < ticket || got > at && counter(got-1) >= ticket {
			t.Fatalf("%+v: AdmittedAt(%d, %d) = %d, not the first ms at or after %d that admits it", s, ticket, at, got, at)
		}
		if ticket > base {
			// anchor×10⁶ + ⌈(ticket − base)×10¹² / rate⌉
			num := new(big.Int).Mul(big.NewInt(ticket-base), big.NewInt(1_000_000_000_000))
			num.Add(num, big.NewInt(rate-1))
			num.Quo(num, big.NewInt(rate))
			num.Add(num, new(big.Int).Mul(big.NewInt(anchor), big.NewInt(1_000_000)))
			if got, want := s.DrainAtNs(ticket), sat(num); got != want {
				t.Fatalf("%+v: DrainAtNs(%d) = %d, want %d", s, ticket, got, want)
			}
		}
	})
}

// TestPollBeyondRange: a poll at the back of a queue whose wait exceeds a
// time.Duration is answered, with the estimate capped (the service once
// spun forever on it).
func TestPollBeyondRange(t *testing.T) {
	store := memstore.New()
	svc := queue.NewService(store, polling.DefaultETA(), queue.WithClock(clock.NewFake(t0)))
	for _, tt := range []struct {
		rate    float64
		waiting int64
	}{{0.001, 9_300_000}, {0.01, 93_000_000}} {
		id := fmt.Sprintf("slow-%d", tt.waiting)
		p := program(tt.waiting, 0, tt.rate, false)
		p.ID = id
		if err := store.CreateProgram(t.Context(), p); err != nil {
			t.Fatal(err)
		}
		v, _, err := svc.Enter(t.Context(), id, queue.Entry{})
		if err != nil {
			t.Fatal(err)
		}
		if v.Position != tt.waiting+1 || v.EstimatedWait != queue.MaxEstimatedWait || v.RetryAfter <= 0 {
			t.Errorf("%s: position %d, wait %v, retry after %v; want %d, %v and a delay", id, v.Position, v.EstimatedWait, v.RetryAfter, tt.waiting+1, queue.MaxEstimatedWait)
		}
	}
}
