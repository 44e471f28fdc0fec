package pace_test

import (
	"math"
	"math/big"
	"testing"
	"time"

	"github.com/example/waitingroom/internal/pace"
)

func TestNewRate(t *testing.T) {
	for _, tt := range []struct {
		perSecond float64
		want      pace.Rate
		ok        bool
	}{
		{0, 0, true},
		{0.001, 1, true},
		{0.1, 100, true},
		{2.5, 2500, true},
		{1.005, 1005, true},
		{10, 10 * pace.OnePerSecond, true},
		{100_000, 100_000 * pace.OnePerSecond, true},
		{0.0015, 0, false}, // finer than a thousandth: refused, not rounded
		{1.0 / 3, 0, false},
		{0.0005, 0, false},
		{-1, 0, false},
		{100_000.001, 0, false},
		{math.NaN(), 0, false},
		{math.Inf(1), 0, false},
	} {
		got, ok := pace.NewRate(tt.perSecond)
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
		s                    pace.Segment
		at                   int64 // ms after anchor
		wantCounter          int64
		ticket               int64
		wantAdmitted         int64 // ms after anchor; -1: never
		wantStepNs           int64
		issued, wantDrainNsD int64 // DrainAtNs(issued) − anchor in ns
	}{
		{"TenPerSecond", pace.Segment{AnchorMs: anchor, Base: 5, Rate: 10 * pace.OnePerSecond}, 1000, 15, 16, 1100, 100_000_000, 25, 2_000_000_000},
		{"ThreePerSecond", pace.Segment{AnchorMs: anchor, Base: 0, Rate: 3 * pace.OnePerSecond}, 1000, 3, 4, 1334, 333_333_334, 1, 333_333_334},
		{"ThreePerSecondMany", pace.Segment{AnchorMs: anchor, Base: 0, Rate: 3 * pace.OnePerSecond}, 1000, 3, 3, 1000, 333_333_334, 3, 1_000_000_000},
		{"Slowest", pace.Segment{AnchorMs: anchor, Rate: 1}, 999_999, 0, 1, 1_000_000, 1_000_000_000_000, 1, 1_000_000_000_000},
		{"Fastest", pace.Segment{AnchorMs: anchor, Rate: 100_000 * pace.OnePerSecond}, 1, 100, 101, 2, 10_000, 100, 1_000_000},
		{"Paused", pace.Segment{AnchorMs: anchor, Base: 7, Rate: pace.OnePerSecond, Paused: true}, 1000, 7, 8, -1, 0, 100, 0},
		{"RateZero", pace.Segment{AnchorMs: anchor, Base: 7}, 1000, 7, 8, -1, 0, 100, 0},
		{"BeforeAnchor", pace.Segment{AnchorMs: anchor, Base: 7, Rate: pace.OnePerSecond}, -5000, 7, 8, 1000, 1_000_000_000, 7, 0},
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
	s := pace.Segment{AnchorMs: 1_780_000_000_000, Base: 1, Rate: 1}
	if got := s.Counter(math.MaxInt64); got != s.Base+(math.MaxInt64-s.AnchorMs)/1_000_000 {
		t.Errorf("Counter(MaxInt64) = %d", got)
	}
	if at, ok := s.AdmittedAt(math.MaxInt64, s.AnchorMs); !ok || at != math.MaxInt64 {
		t.Errorf("AdmittedAt(MaxInt64) = %d, %v; want MaxInt64 (saturated), true", at, ok)
	}
	if got := s.DrainAtNs(math.MaxInt64); got != math.MaxInt64 {
		t.Errorf("DrainAtNs(MaxInt64) = %d, want MaxInt64", got)
	}
	fast := pace.Segment{Base: math.MaxInt64 - 5, Rate: 100_000 * pace.OnePerSecond}
	if got := fast.Counter(math.MaxInt64); got != math.MaxInt64 {
		t.Errorf("Counter of a saturated segment = %d, want MaxInt64", got)
	}
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
		s := pace.Segment{AnchorMs: anchor, Base: base, Rate: pace.Rate(rate)}
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

// The zero time and 0 stand for each other (an absent time in the store);
// every other time is its Unix ms, rounded down, read back in UTC.
func TestUnixMs(t *testing.T) {
	tests := []struct {
		name     string
		t        time.Time
		ms       int64
		readBack time.Time
	}{
		{"Zero", time.Time{}, 0, time.Time{}},
		{"Epoch", time.Unix(0, 0), 0, time.Time{}},
		{"RoundedDown", time.Date(2026, 3, 1, 12, 0, 0, 1_999_999, time.UTC), 1772366400001, time.Date(2026, 3, 1, 12, 0, 0, 1_000_000, time.UTC)},
		{"InUTC", time.Date(2026, 3, 1, 13, 0, 0, 0, time.FixedZone("CET", 3600)), 1772366400000, time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)},
		{"BeforeEpoch", time.UnixMilli(-5).UTC(), -5, time.UnixMilli(-5).UTC()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := pace.UnixMs(tt.t); got != tt.ms {
				t.Errorf("UnixMs(%v) = %d, want %d", tt.t, got, tt.ms)
			}
			got := pace.FromUnixMs(tt.ms)
			if !got.Equal(tt.readBack) || got.Location() != time.UTC {
				t.Errorf("FromUnixMs(%d) = %v, want %v in UTC", tt.ms, got, tt.readBack)
			}
		})
	}
}
