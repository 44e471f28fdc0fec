package polling_test

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/example/waitingroom/internal/polling"
)

func TestETA(t *testing.T) {
	eta := polling.DefaultETA()
	rng := rand.New(rand.NewPCG(3, 4))
	tests := []struct {
		name   string
		sit    polling.Situation
		lo, hi time.Duration
	}{
		{"UnknownFallsBackToTiers", polling.Situation{Position: 500}, 4700 * time.Millisecond, 5300 * time.Millisecond},
		{"UnknownFrontFallsBackToTiers", polling.Situation{Position: 3}, time.Second, time.Second},
		{"NearJustAfterAdmission", polling.Situation{Position: 30, RatePerSecond: 10, Wait: 3 * time.Second}, 3100 * time.Millisecond, 3200 * time.Millisecond},
		{"EdgeOfDirect", polling.Situation{Position: 400, RatePerSecond: 10, Wait: 40 * time.Second}, 40100 * time.Millisecond, 40200 * time.Millisecond},
		{"TinyWaitKeepsFloor", polling.Situation{Position: 1, RatePerSecond: 100, Wait: 5 * time.Millisecond}, time.Second, time.Second},
		{"FarAFraction", polling.Situation{Position: 1000, RatePerSecond: 10, Wait: 100 * time.Second}, 58500 * time.Millisecond, 65 * time.Second},
		{"VeryFarCappedAndSpread", polling.Situation{Position: 1e6, RatePerSecond: 10, Wait: 1e5 * time.Second}, 540 * time.Second, 10 * time.Minute},
		// Stopped with a rate: a fraction (0.65) of the earliest admission, within [floor, hold].
		{"StoppedNearTheDoorKeepsFloor", polling.Situation{Position: 2, Earliest: 700 * time.Millisecond, Paused: true}, time.Second, time.Second},
		{"StoppedAShareOfTheEarliest", polling.Situation{Position: 100, Earliest: 12 * time.Second, Paused: true}, 7020 * time.Millisecond, 7800 * time.Millisecond},
		{"StoppedFarHeld", polling.Situation{Position: 5000, Earliest: 501 * time.Second, Paused: true}, 30600 * time.Millisecond, 34 * time.Second},
		// Paused with a measured manual pace: still within hold.
		{"PausedManualPaceHeld", polling.Situation{Position: 980, RatePerSecond: 0.2, Wait: 4900 * time.Second, Earliest: 981 * time.Second, Paused: true}, 30600 * time.Millisecond, 34 * time.Second},
		// An earliest admission sooner than the estimate (a measured manual pace slower than the rate) decides.
		{"EarliestBeforeWait", polling.Situation{Position: 30, RatePerSecond: 1, Wait: 30 * time.Second, Earliest: 3 * time.Second}, 3100 * time.Millisecond, 3200 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for range 500 {
				got := eta.RetryAfter(tt.sit, rng)
				if got < tt.lo || got > tt.hi {
					t.Fatalf("RetryAfter(%+v) = %v, want within [%v, %v]", tt.sit, got, tt.lo, tt.hi)
				}
			}
		})
	}
}

// TestETANeverOvershootsFarWaits: an early poll never lands after the
// expected admission.
func TestETANeverOvershootsFarWaits(t *testing.T) {
	eta := polling.DefaultETA()
	eta.Fraction, eta.Jitter = 1, 0.2
	for w := eta.Direct + time.Second; w < 20*time.Minute; w += 7 * time.Second {
		if got := eta.RetryAfter(polling.Situation{Position: 1, RatePerSecond: 1, Wait: w}, nil); got > w {
			t.Fatalf("wait %v: slept %v", w, got)
		}
	}
}

func TestParseETA(t *testing.T) {
	tests := []struct {
		spec    string
		wantErr bool
		check   func(polling.ETA) bool
	}{
		{"", false, func(e polling.ETA) bool { return e.Fraction == polling.DefaultETA().Fraction }},
		{"fraction=0.5, cap=1m,direct=5s,lead=50ms,floor=2s,jitter=0", false, func(e polling.ETA) bool {
			return e.Fraction == 0.5 && e.Cap == time.Minute && e.Direct == 5*time.Second && e.Lead == 50*time.Millisecond && e.Floor == 2*time.Second && e.Jitter == 0
		}},
		{"hold=10s", false, func(e polling.ETA) bool { return e.Hold == 10*time.Second }},
		{"hold=500ms", true, nil},
		{"hold=31m", true, nil},
		{"fraction=0", true, nil},
		{"fraction=1.5", true, nil},
		{"cap=31m", true, nil},
		{"floor=10ms", true, nil},
		{"direct=11m", true, nil},
		{"lead=-1s", true, nil},
		{"jitter=0.9", true, nil},
		{"speed=3", true, nil},
		{"fraction", true, nil},
		{"cap=soon", true, nil},
	}
	for _, tt := range tests {
		e, err := polling.ParseETA(tt.spec)
		if tt.wantErr != (err != nil) {
			t.Errorf("ParseETA(%q) err = %v, want error %v", tt.spec, err, tt.wantErr)
			continue
		}
		if err == nil && !tt.check(e) {
			t.Errorf("ParseETA(%q) = %+v", tt.spec, e)
		}
	}
}

// TestETASpreadsTheCap: clients far back do not all come back at the cap.
func TestETASpreadsTheCap(t *testing.T) {
	eta := polling.DefaultETA()
	seen := map[time.Duration]bool{}
	for range 1000 {
		seen[eta.RetryAfter(polling.Situation{Position: 1e6, RatePerSecond: 10, Wait: time.Hour}, nil)/time.Second] = true
	}
	if len(seen) < 20 {
		t.Errorf("1,000 clients at the cap come back in only %d distinct seconds", len(seen))
	}
}

func TestSteady(t *testing.T) {
	steady := polling.DefaultSteady()
	rng := rand.New(rand.NewPCG(5, 6))
	tests := []struct {
		name   string
		sit    polling.Situation
		lo, hi time.Duration
	}{
		// No rate: eta's answer, here the tiers' (eta without an estimate).
		{"NoRateFallsBackToETA", polling.Situation{Position: 500}, 4700 * time.Millisecond, 5300 * time.Millisecond},
		{"NoRateMeasuredPace", polling.Situation{Position: 30, RatePerSecond: 10, Wait: 3 * time.Second}, 3100 * time.Millisecond, 3200 * time.Millisecond},
		// Stopped: the earliest admission itself, within [floor, hold].
		{"StoppedNearTheDoorKeepsFloor", polling.Situation{Position: 2, Earliest: 700 * time.Millisecond, Paused: true}, time.Second, time.Second},
		{"StoppedTheEarliest", polling.Situation{Position: 100, Earliest: 12345 * time.Millisecond, Paused: true}, 12345 * time.Millisecond, 12345 * time.Millisecond},
		{"StoppedFarHeldAndSpread", polling.Situation{Position: 5000, Earliest: 501 * time.Second, Paused: true}, 54 * time.Second, time.Minute},
		{"PausedManualPaceHeld", polling.Situation{Position: 980, RatePerSecond: 0.2, Wait: 4900 * time.Second, Earliest: 981 * time.Second, Paused: true}, 54 * time.Second, time.Minute},
		// Before an opening (not paused): the sooner of the schedule and an opening moved to now.
		{"BeforeTheOpening", polling.Situation{Position: 300, RatePerSecond: 10, Wait: time.Hour, Earliest: 31 * time.Second}, 31100 * time.Millisecond, 31200 * time.Millisecond},
		// Running: a wait within direct is slept through, lead after it.
		{"Direct", polling.Situation{Position: 300, RatePerSecond: 10, Wait: 30 * time.Second, Earliest: 30 * time.Second}, 30100 * time.Millisecond, 30200 * time.Millisecond},
		{"TinyWaitKeepsFloor", polling.Situation{Position: 1, RatePerSecond: 100, Wait: 5 * time.Millisecond, Earliest: 5 * time.Millisecond}, time.Second, time.Second},
		// A longer one: one early poll with 20–40 s left.
		{"OneEarlyPoll", polling.Situation{Position: 5000, RatePerSecond: 10, Wait: 500 * time.Second, Earliest: 500 * time.Second}, 460 * time.Second, 480 * time.Second},
		{"JustPastDirect", polling.Situation{Position: 410, RatePerSecond: 10, Wait: 41 * time.Second, Earliest: 41 * time.Second}, time.Second, 21 * time.Second},
		{"VeryFarCapped", polling.Situation{Position: 1e7, RatePerSecond: 1000, Wait: 1e4 * time.Second, Earliest: 1e4 * time.Second}, 27 * time.Minute, 30 * time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for range 500 {
				got := steady.RetryAfter(tt.sit, rng)
				if got < tt.lo || got > tt.hi || got%time.Millisecond != 0 {
					t.Fatalf("RetryAfter(%+v) = %v, want whole ms within [%v, %v]", tt.sit, got, tt.lo, tt.hi)
				}
			}
		})
	}
}

// TestSteadyThreeRequests: at a constant rate, a person polls at most
// twice: the early poll leaves a wait that is slept through.
func TestSteadyThreeRequests(t *testing.T) {
	steady := polling.DefaultSteady()
	rng := rand.New(rand.NewPCG(7, 8))
	for w := time.Second; w < steady.Cap; w += 997 * time.Millisecond {
		left, polls := w, 0
		for left > 0 {
			d := steady.RetryAfter(polling.Situation{Position: 1, RatePerSecond: 1, Wait: left, Earliest: left}, rng)
			left -= d
			polls++
		}
		if polls > 2 {
			t.Fatalf("a wait of %v takes %d polls", w, polls)
		}
	}
}

func TestParseSteady(t *testing.T) {
	tests := []struct {
		spec    string
		wantErr bool
		check   func(polling.Steady) bool
	}{
		{"", false, func(p polling.Steady) bool { return p.Hold == polling.DefaultSteady().Hold }},
		{"hold=30s, cap=10m,direct=20s,lead=50ms,floor=2s,jitter=0", false, func(p polling.Steady) bool {
			return p.Hold == 30*time.Second && p.Cap == 10*time.Minute && p.Direct == 20*time.Second && p.Lead == 50*time.Millisecond && p.Floor == 2*time.Second && p.Jitter == 0
		}},
		{"hold=500ms", true, nil},
		{"hold=31m", true, nil},
		{"cap=31m", true, nil},
		{"direct=20m,cap=10m", true, nil},
		{"jitter=0.5", true, nil},
		{"fraction=0.5", true, nil},
		{"hold", true, nil},
		{"hold=soon", true, nil},
	}
	for _, tt := range tests {
		p, err := polling.ParseSteady(tt.spec)
		if tt.wantErr != (err != nil) {
			t.Errorf("ParseSteady(%q) err = %v, want error %v", tt.spec, err, tt.wantErr)
			continue
		}
		if err == nil && !tt.check(p) {
			t.Errorf("ParseSteady(%q) = %+v", tt.spec, p)
		}
	}
}
