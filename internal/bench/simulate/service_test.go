package simulate

import (
	"testing"
	"time"

	"github.com/example/waitingroom/internal/bench"
	"github.com/example/waitingroom/internal/polling"
	"github.com/example/waitingroom/internal/testing/partitionmodel"
)

var etaDefault = bench.NamedPolicy{Name: "eta", Policy: polling.DefaultETA()}

func runServiceMode(t *testing.T, cfg Config) bench.Result {
	t.Helper()
	cfg.Policy, cfg.Prices, cfg.Seed = etaDefault, bench.DefaultPrices(), 1
	r, err := Run(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestServiceCrowd: 20,000 people in 4 s (5,000 a second, five times what
// one item writes) through 50 instances of the service on DynamoDB's
// partition model: everyone enters at once, nothing is throttled, the
// program item takes at most half its limit, the gaps stay under 1 % and
// the order bends by less than a second.
func TestServiceCrowd(t *testing.T) {
	r := runServiceMode(t, Config{
		Scenario:        bench.Scenario{Users: 20_000, Arrival: bench.Arrival{Over: 4 * time.Second}, Rates: bench.ConstantRate(1000)},
		PartitionLimits: &partitionmodel.AWS, Instances: 50,
	})
	if r.Entered != 20_000 || r.Admitted != 20_000 || r.ThrottledEnters != 0 || r.StoreThrottles != 0 {
		t.Errorf("entered %d, admitted %d, throttled enters %d, store throttles %d; want all, all, 0, 0", r.Entered, r.Admitted, r.ThrottledEnters, r.StoreThrottles)
	}
	if w := *r.ProgramItemWritesPerSecondMax; w > 500 || r.EntersPerSecondPeak < 4_900 {
		t.Errorf("program item writes %d a second at most, enters %d a second at most; want ≤ 500 and the whole 5,000", w, r.EntersPerSecondPeak)
	}
	if r.Gaps > 400 || r.MaxInversionMs >= 1000 || r.NotifyDelayMs.P99 > 1000 {
		t.Errorf("gaps %d, worst inversion %g ms, notify p99 %g ms; want ≤ 2 %% (a 4-second crowd: its end leaves the blocks in flight), < 1 s, ≤ 1 s", r.Gaps, r.MaxInversionMs, r.NotifyDelayMs.P99)
	}
}

// TestServiceSingleTickets: the same crowd with every ticket from the
// program item (before ticket shards) is stuck at the item's limit:
// throttled enters, sent again a second later, and the crowd takes many
// times its 4 s to get in.
func TestServiceSingleTickets(t *testing.T) {
	r := runServiceMode(t, Config{
		Scenario:        bench.Scenario{Users: 20_000, Arrival: bench.Arrival{Over: 4 * time.Second}, Rates: bench.ConstantRate(1000), Timeout: 8 * time.Second},
		PartitionLimits: &partitionmodel.AWS, Instances: 50, SingleTickets: true,
	})
	if r.ThrottledEnters == 0 || r.Entered > 12_000 || r.EntersPerSecondPeak > 2_000 {
		t.Errorf("throttled enters %d, entered %d in 8 s, at most %d a second; want throttles, about 1,000 a second", r.ThrottledEnters, r.Entered, r.EntersPerSecondPeak)
	}
}

// TestServiceOpening: half the crowd before a shuffled opening: the
// pre-queue is who came before it, everyone is admitted, the order of who
// came after bends by less than a second.
func TestServiceOpening(t *testing.T) {
	r := runServiceMode(t, Config{
		Scenario:        bench.Scenario{Users: 4_000, Arrival: bench.Arrival{Over: 4 * time.Second}, Rates: bench.ConstantRate(500)},
		PartitionLimits: &partitionmodel.AWS, Instances: 20, OpensAt: 2 * time.Second, Shuffle: true,
	})
	if r.Admitted != 4_000 || r.ThrottledEnters != 0 || r.Prequeue < 2_000 || r.Prequeue > 2_100 || r.MaxInversionMs >= 1000 {
		t.Errorf("admitted %d, throttled %d, pre-queue %d, worst inversion %g ms; want all, 0, about 2,000, < 1 s", r.Admitted, r.ThrottledEnters, r.Prequeue, r.MaxInversionMs)
	}
}

func TestServiceModeErrors(t *testing.T) {
	sc := bench.Scenario{Users: 10, Rates: bench.ConstantRate(1)}
	for _, cfg := range []Config{
		{Scenario: sc, Shuffle: true},
		{Scenario: bench.Scenario{Users: 10, Rates: bench.ConstantRate(1), Abandon: 0.5}, Service: true},
		{Scenario: bench.Scenario{Users: 10, Rates: pauseRestart, Timeout: time.Minute}, Service: true},
	} {
		cfg.Policy = etaDefault
		if _, err := Run(cfg); err == nil {
			t.Errorf("%+v: no error", cfg)
		}
	}
}
