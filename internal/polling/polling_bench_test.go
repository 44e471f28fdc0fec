package polling_test

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/example/waitingroom/internal/polling"
)

// BenchmarkTiersRetryAfter measures the seed policy's answer, once per
// band, with the runtime's generator (as the service runs it) and with a
// seeded one (as the simulator does).
func BenchmarkTiersRetryAfter(b *testing.B) {
	ts := polling.DefaultTiers()
	for _, bc := range []struct {
		name string
		pos  int64
	}{{"pos=50", 50}, {"pos=500", 500}, {"pos=5000", 5000}, {"pos=50000", 50000}} {
		b.Run(bc.name+"/rng=runtime", func(b *testing.B) {
			b.ReportAllocs()
			var sink time.Duration
			for b.Loop() {
				sink += ts.RetryAfter(polling.Situation{Position: bc.pos, RatePerSecond: 10}, nil)
			}
			_ = sink
		})
		b.Run(bc.name+"/rng=seeded", func(b *testing.B) {
			rng := rand.New(rand.NewPCG(1, 2))
			b.ReportAllocs()
			var sink time.Duration
			for b.Loop() {
				sink += ts.RetryAfter(polling.Situation{Position: bc.pos, RatePerSecond: 10}, rng)
			}
			_ = sink
		})
	}
}

// BenchmarkFixedRetryAfter is the floor: a policy that does nothing.
func BenchmarkFixedRetryAfter(b *testing.B) {
	var p polling.Policy = polling.Fixed(3 * time.Second)
	b.ReportAllocs()
	var sink time.Duration
	for b.Loop() {
		sink += p.RetryAfter(polling.Situation{Position: 500}, nil)
	}
	_ = sink
}

// BenchmarkETARetryAfter measures the rate-aware policy: near (one sleep to
// the admission), far (a fraction of the wait, jittered) and without an
// estimate (the tiers' answer).
func BenchmarkETARetryAfter(b *testing.B) {
	eta := polling.DefaultETA()
	for _, bc := range []struct {
		name string
		sit  polling.Situation
	}{
		{"near", polling.Situation{Position: 50, RatePerSecond: 10, Wait: 5 * time.Second}},
		{"far", polling.Situation{Position: 50000, RatePerSecond: 10, Wait: 5000 * time.Second}},
		{"unknown", polling.Situation{Position: 500}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			var sink time.Duration
			for b.Loop() {
				sink += eta.RetryAfter(bc.sit, nil)
			}
			_ = sink
		})
	}
}
