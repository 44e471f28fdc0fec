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
