package polling_test

import (
	"testing"

	"github.com/example/waitingroom/internal/polling"
)

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
