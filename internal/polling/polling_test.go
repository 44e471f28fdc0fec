package polling_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/example/waitingroom/internal/polling"
)

func TestDefaultTiersBoundaries(t *testing.T) {
	tiers := polling.DefaultTiers()
	tests := []struct {
		position     int64
		wantInterval time.Duration
		wantJitter   time.Duration
	}{
		{0, time.Second, 0},
		{1, time.Second, 0},
		{100, time.Second, 0},
		{101, 5 * time.Second, 300 * time.Millisecond},
		{1000, 5 * time.Second, 300 * time.Millisecond},
		{1001, 15 * time.Second, 500 * time.Millisecond},
		{10000, 15 * time.Second, 500 * time.Millisecond},
		{10001, 30 * time.Second, 4 * time.Second},
		{math.MaxInt64, 30 * time.Second, 4 * time.Second},
	}
	for _, tt := range tests {
		got := tiers.Tier(tt.position)
		if got.Interval != tt.wantInterval || got.Jitter != tt.wantJitter {
			t.Errorf("Tier(%d) = %v±%v, want %v±%v", tt.position, got.Interval, got.Jitter, tt.wantInterval, tt.wantJitter)
		}
		// And RetryAfter stays within the tier's bounds, in whole milliseconds.
		for range 200 {
			d := tiers.RetryAfter(polling.Situation{Position: tt.position}, nil)
			if d < tt.wantInterval-tt.wantJitter || d > tt.wantInterval+tt.wantJitter || d%time.Millisecond != 0 {
				t.Fatalf("RetryAfter(%d) = %v, outside %v±%v or not whole ms", tt.position, d, tt.wantInterval, tt.wantJitter)
			}
		}
	}
}

// TestJitterDistribution draws many delays per tier and checks that both
// extremes occur, nothing falls outside, and the mean sits near the centre.
func TestJitterDistribution(t *testing.T) {
	tiers := polling.DefaultTiers()
	sources := map[string]*rand.Rand{"runtime": nil, "seeded": rand.New(rand.NewPCG(1, 2))}
	for name, rng := range sources {
		for _, pos := range []int64{500, 5000, 50000} {
			tier := tiers.Tier(pos)
			lo, hi := tier.Interval-tier.Jitter, tier.Interval+tier.Jitter
			const n = 200_000
			var sum float64
			seenLo, seenHi := false, false
			for range n {
				d := tiers.RetryAfter(polling.Situation{Position: pos}, rng)
				if d < lo || d > hi {
					t.Fatalf("%s: position %d: %v outside [%v, %v]", name, pos, d, lo, hi)
				}
				seenLo = seenLo || d == lo
				seenHi = seenHi || d == hi
				sum += float64(d.Milliseconds())
			}
			if !seenLo || !seenHi {
				t.Errorf("%s: position %d: extremes reached lo=%v hi=%v, want both", name, pos, seenLo, seenHi)
			}
			// Standard error of the mean of a uniform on ±J ms is J/sqrt(3n); allow 6 of them.
			mean, centre := sum/n, float64(tier.Interval.Milliseconds())
			if tol := 6 * float64(tier.Jitter.Milliseconds()) / math.Sqrt(3*n); math.Abs(mean-centre) > tol {
				t.Errorf("%s: position %d: mean %.1f ms, want %v ± %.1f", name, pos, mean, centre, tol)
			}
		}
	}
}

func TestSeededJitterIsDeterministic(t *testing.T) {
	a, b := rand.New(rand.NewPCG(7, 7)), rand.New(rand.NewPCG(7, 7))
	tiers := polling.DefaultTiers()
	for i := range 1000 {
		s := polling.Situation{Position: int64(i * 37)}
		if x, y := tiers.RetryAfter(s, a), tiers.RetryAfter(s, b); x != y {
			t.Fatalf("draw %d: %v != %v with the same seed", i, x, y)
		}
	}
}

func TestFixed(t *testing.T) {
	f := polling.Fixed(3 * time.Second)
	for _, pos := range []int64{1, 100, 1e9} {
		if got := f.RetryAfter(polling.Situation{Position: pos}, nil); got != 3*time.Second {
			t.Errorf("Fixed(3s) at %d = %v", pos, got)
		}
	}
	if got := f.String(); got != "fixed:3s" {
		t.Errorf("String() = %q", got)
	}
}

func TestParseTiers(t *testing.T) {
	tests := []struct {
		name, spec string
		want       polling.Tiers // nil: want an error
	}{
		{"Default", polling.DefaultTiersSpec, polling.DefaultTiers()},
		{"Spaces", " 100 : 1s , inf : 30s+-4s ", polling.Tiers{{100, time.Second, 0}, {0, 30 * time.Second, 4 * time.Second}}},
		{"Star", "*:2s", polling.Tiers{{0, 2 * time.Second, 0}}},
		{"ErrEmpty", "", nil},
		{"ErrNoColon", "100=1s,inf:30s", nil},
		{"ErrNotLastUnbounded", "inf:1s,100:2s", nil},
		{"ErrLastBounded", "100:1s,1000:5s", nil},
		{"ErrDescending", "1000:1s,100:2s,inf:3s", nil},
		{"ErrEqual", "100:1s,100:2s,inf:3s", nil},
		{"ErrZeroPosition", "0:1s,inf:3s", nil},
		{"ErrNegativePosition", "-5:1s,inf:3s", nil},
		{"ErrBadInterval", "100:fast,inf:3s", nil},
		{"ErrTooShort", "inf:10ms", nil},
		{"ErrTooLong", "inf:2h", nil},
		{"ErrBadJitter", "inf:3s+-x", nil},
		{"ErrJitterTooWide", "inf:1s+-950ms", nil},
		{"ErrNegativeJitter", "inf:1s+--5ms", nil},
		{"ErrSubMsJitter", "inf:1s+-500us", nil},
		{"ErrTooMany", "1:1s,2:1s,3:1s,4:1s,5:1s,6:1s,7:1s,8:1s,9:1s,10:1s,11:1s,12:1s,13:1s,14:1s,15:1s,16:1s,17:1s,18:1s,19:1s,20:1s,21:1s,22:1s,23:1s,24:1s,25:1s,26:1s,27:1s,28:1s,29:1s,30:1s,31:1s,32:1s,inf:1s", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := polling.ParseTiers(tt.spec)
			if tt.want == nil {
				if err == nil {
					t.Fatalf("ParseTiers(%q) = %v, want an error", tt.spec, got)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseTiers(%q): %v", tt.spec, err)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Errorf("band %d = %+v, want %+v", i, got[i], tt.want[i])
				}
			}
			// Spec round-trips.
			again, err := polling.ParseTiers(got.Spec())
			if err != nil || again.Spec() != got.Spec() {
				t.Errorf("Spec() %q does not round-trip: %v", got.Spec(), err)
			}
		})
	}
}

func TestDefaultTiersSpecMatchesDefault(t *testing.T) {
	if got, want := polling.DefaultTiers().Spec(), polling.DefaultTiersSpec; got != want {
		t.Errorf("DefaultTiers().Spec() = %q, want %q", got, want)
	}
}

func TestNamed(t *testing.T) {
	tiers := polling.Tiers{{MaxPosition: 0, Interval: 2e9}}
	reg := polling.Named(tiers, polling.DefaultETA(), polling.DefaultSteady())
	if diff := cmp.Diff([]string{"eta", "steady", "tiers"}, reg.Names()); diff != "" {
		t.Errorf("Names (-want +got):\n%s", diff)
	}
	for _, name := range reg.Names() {
		if got := fmt.Sprint(reg[name]); got != name {
			t.Errorf("policy %q calls itself %q", name, got)
		}
	}
	eta := reg[polling.NameETA].(polling.ETA)
	if diff := cmp.Diff(polling.Policy(tiers), eta.Fallback); diff != "" {
		t.Errorf("eta falls back to (-want +got):\n%s", diff)
	}
	steady := reg[polling.NameSteady].(polling.Steady)
	if diff := cmp.Diff(polling.Policy(eta), steady.Fallback); diff != "" {
		t.Errorf("steady falls back to (-want +got):\n%s", diff)
	}
}

func TestRegistryLookup(t *testing.T) {
	reg := polling.Named(polling.DefaultTiers(), polling.DefaultETA(), polling.DefaultSteady())
	tests := []struct {
		name, want, wantErr string
	}{
		{"", "tiers", ""},
		{"tiers", "tiers", ""},
		{"eta", "eta", ""},
		{"steady", "steady", ""},
		{"ETA", "", `"ETA" is not one of eta, steady, tiers`},
		{"fastest", "", `"fastest" is not one of eta, steady, tiers`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := reg.Lookup(tt.name)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || fmt.Sprint(p) != tt.want {
				t.Errorf("Lookup(%q) = %v, %v; want %s", tt.name, p, err, tt.want)
			}
		})
	}
}

// FuzzParseTiers: any configuration string either fails with an error or
// yields tiers that validate, round-trip through Spec, and answer every
// position within their bounds. Never a panic.
func FuzzParseTiers(f *testing.F) {
	for _, s := range []string{polling.DefaultTiersSpec, "inf:1s", "*:2s", "100:1s,inf:30s+-4s", "1:100ms,2:200ms+-100ms,inf:10m", "", ",", ":", "inf:", "100:1s+-", "9223372036854775807:1s,inf:1s"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		ts, err := polling.ParseTiers(spec)
		if err != nil {
			return
		}
		if err := ts.Validate(); err != nil {
			t.Fatalf("ParseTiers(%q) returned invalid tiers: %v", spec, err)
		}
		again, err := polling.ParseTiers(ts.Spec())
		if err != nil || again.Spec() != ts.Spec() {
			t.Fatalf("Spec %q of %q does not round-trip: %v", ts.Spec(), spec, err)
		}
		for _, pos := range []int64{-1, 0, 1, 100, 101, 1 << 40} {
			tier := ts.Tier(pos)
			d := ts.RetryAfter(polling.Situation{Position: pos}, nil)
			if d < tier.Interval-tier.Jitter || d > tier.Interval+tier.Jitter || d < polling.MinInterval {
				t.Fatalf("%q at %d: %v outside %v±%v", spec, pos, d, tier.Interval, tier.Jitter)
			}
		}
	})
}

func TestPushed(t *testing.T) {
	fallback := [2]time.Duration{polling.PushFallback * 3 / 4, polling.PushFallback}
	tests := []struct {
		name string
		s    polling.Situation
		told time.Duration
		want [2]time.Duration // the least and the most
	}{
		{"no estimate: the fallback, spread", polling.Situation{Wait: time.Second}, time.Second, fallback},
		{"sleeps past the earliest admission by the slack", polling.Situation{Earliest: 90 * time.Second}, 5 * time.Second, [2]time.Duration{150 * time.Second, 150 * time.Second}},
		{"held places sleep on the held estimate", polling.Situation{Earliest: time.Second, HeldEarliest: 3 * time.Minute}, time.Second, [2]time.Duration{4 * time.Minute, 4 * time.Minute}},
		{"never past the fallback", polling.Situation{Earliest: time.Hour}, 30 * time.Second, fallback},
		{"paused: the fallback", polling.Situation{Earliest: time.Minute, Paused: true}, 30 * time.Second, fallback},
		{"a longer policy delay stands", polling.Situation{Earliest: time.Second}, 20 * time.Minute, [2]time.Duration{20 * time.Minute, 20 * time.Minute}},
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			seen := map[time.Duration]bool{}
			for range 100 {
				got := polling.Pushed(tt.s, tt.told, rng)
				if got < tt.want[0] || got > tt.want[1] {
					t.Fatalf("Pushed(%+v, %v) = %v, want within %v", tt.s, tt.told, got, tt.want)
				}
				seen[got] = true
			}
			if spread := tt.want[0] != tt.want[1]; spread != (len(seen) > 50) {
				t.Errorf("%d distinct delays in 100; spread %v", len(seen), spread)
			}
		})
	}
}
