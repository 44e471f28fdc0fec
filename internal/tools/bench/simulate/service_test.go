package simulate

import (
	"math"
	"testing"
	"time"

	"github.com/example/waitingroom/internal/admission"
	"github.com/example/waitingroom/internal/pace"
	"github.com/example/waitingroom/internal/polling"
	"github.com/example/waitingroom/internal/queue"
	"github.com/example/waitingroom/internal/settings"
	"github.com/example/waitingroom/internal/tickets"
	"github.com/example/waitingroom/internal/tools/bench"
	"github.com/example/waitingroom/internal/tools/partitionmodel"
	"github.com/example/waitingroom/internal/tools/simclock"
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
	t.Parallel()
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
	t.Parallel()
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
	t.Parallel()
	r := runServiceMode(t, Config{
		Scenario:        bench.Scenario{Users: 4_000, Arrival: bench.Arrival{Over: 4 * time.Second}, Rates: bench.ConstantRate(500)},
		PartitionLimits: &partitionmodel.AWS, Instances: 20, OpensAt: 2 * time.Second, Shuffle: true,
	})
	if r.Admitted != 4_000 || r.ThrottledEnters != 0 || r.Prequeue < 2_000 || r.Prequeue > 2_100 || r.MaxInversionMs >= 1000 {
		t.Errorf("admitted %d, throttled %d, pre-queue %d, worst inversion %g ms; want all, 0, about 2,000, < 1 s", r.Admitted, r.ThrottledEnters, r.Prequeue, r.MaxInversionMs)
	}
}

func TestServiceModeErrors(t *testing.T) {
	t.Parallel()
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

// TestServiceClockSkew: crowds through instances whose clocks are off the
// true time by up to ±500 ms (the skew docs/design.md, "Ticket shards",
// tolerates), polling every 200 ms so that answers of instances that
// disagree follow each other closely. No ticket is held twice or after it
// was given back, nobody seen admitted is then answered otherwise, a
// position goes up by at most the admissions of twice the skew (never
// without skew), and arrival order bends by at most a block lifetime plus
// twice the skew.
func TestServiceClockSkew(t *testing.T) {
	t.Parallel()
	const rate = 500 // admitted a second
	for _, tc := range []struct {
		name    string
		skew    time.Duration
		opensAt time.Duration
	}{
		{"no skew", 0, 0},
		{"±500ms", 500 * time.Millisecond, 0},
		{"±500ms, shuffled opening", 500 * time.Millisecond, 2 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for seed := uint64(1); seed <= 2; seed++ {
				r, err := Run(Config{
					Scenario: bench.Scenario{Users: 4_000, Arrival: bench.Arrival{Over: 4 * time.Second}, Rates: bench.ConstantRate(rate)},
					Policy:   fixed(200 * time.Millisecond), Prices: bench.DefaultPrices(), Seed: seed,
					Service: true, PartitionLimits: &partitionmodel.AWS, Instances: 8, ClockSkew: tc.skew,
					OpensAt: tc.opensAt, Shuffle: tc.opensAt > 0,
				})
				if err != nil {
					t.Fatal(err)
				}
				spread := time.Duration(r.ClockSpreadMs * float64(time.Millisecond))
				if tc.skew > 0 && spread < tc.skew {
					t.Fatalf("seed %d: the clocks spread over %v only; want at least %v", seed, spread, tc.skew)
				}
				if r.Entered != 4_000 || r.Admitted != 4_000 || r.EntersPerSecondPeak < 900 {
					t.Errorf("seed %d: entered %d, admitted %d, enters %d a second at most; want all, all, the crowd's 1,000 (on ticket shards)", seed, r.Entered, r.Admitted, r.EntersPerSecondPeak)
				}
				if r.DuplicateTickets != 0 || r.TicketsPastIssued != 0 || r.StatusRegressions != 0 {
					t.Errorf("seed %d: %d duplicate tickets, %d held past the last ticket, %d admissions answered otherwise; want none", seed, r.DuplicateTickets, r.TicketsPastIssued, r.StatusRegressions)
				}
				// Two clocks disagree by 2×skew at most: on the counter by as
				// many tickets' admission (and one of rounding), and on a
				// block's age by as long.
				rise := int64(0)
				if tc.skew > 0 {
					rise = int64(math.Ceil(rate*(2*tc.skew).Seconds())) + 1
				}
				if r.MaxPositionRise > rise {
					t.Errorf("seed %d: a position went up by %d; want at most %d", seed, r.MaxPositionRise, rise)
				}
				if bound := tickets.BlockLifetime + 2*tc.skew; r.MaxInversionMs > bench.Ms(bound) {
					t.Errorf("seed %d: arrival order bent by %g ms; want at most %v (a block lifetime plus twice the skew)", seed, r.MaxInversionMs, bound)
				}
				t.Logf("seed %d: spread %v, gaps %d, max inversion %g ms, max position rise %d, program item writes %d/s", seed, spread, r.Gaps, r.MaxInversionMs, r.MaxPositionRise, *r.ProgramItemWritesPerSecondMax)
			}
		})
	}
}

// TestTicketCounts: gaps, duplicates and numbers past the last ticket are
// counted ticket by ticket, so that a duplicate does not hide a gap.
func TestTicketCounts(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name                   string
		tickets                []int64 // 0: not entered
		issued                 int64
		gaps, duplicates, past int64
	}{
		{"one each", []int64{1, 2, 3}, 3, 0, 0, 0},
		{"a gap", []int64{1, 3, 0}, 3, 1, 0, 0},
		{"a duplicate hides no gap", []int64{1, 1, 3}, 4, 2, 1, 0},
		{"three holders", []int64{2, 2, 2}, 2, 1, 2, 0},
		{"given back while held", []int64{1, 2, 5}, 2, 0, 0, 1},
	} {
		s := &sim{}
		for _, tk := range tc.tickets {
			s.users = append(s.users, user{ticket: tk})
		}
		gaps, dup, past := s.ticketCounts(tc.issued)
		if gaps != tc.gaps || dup != tc.duplicates || past != tc.past {
			t.Errorf("%s: gaps %d, duplicates %d, past issued %d; want %d, %d, %d", tc.name, gaps, dup, past, tc.gaps, tc.duplicates, tc.past)
		}
	}
}

// TestStoreChargesScheduledWrites: the admin path's scheduled writes
// (queue.ScheduleStore, which the embedded memstore provides) are writes of
// the program item, charged like UpdateProgram.
func TestStoreChargesScheduledWrites(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := newStore(simclock.NewFake(Epoch), nil)
	var ss queue.ScheduleStore = s
	p := admission.Program{ID: programKey, CreatedAt: Epoch, Options: settings.Options{AdmissionWindow: admission.DefaultAdmissionWindow}}
	p = p.Rebased(Epoch, pace.OnePerSecond, false, 0, 0)
	if err := s.CreateProgram(ctx, p); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		var err error
		if p, err = s.IssueTicket(ctx, p.ID, Epoch); err != nil {
			t.Fatal(err)
		}
	}
	change := p.Rebased(Epoch, pace.OnePerSecond, true, 0, 10*time.Second)
	change.Changes = []string{"x"}
	before := s.programWrites[Epoch.Unix()]
	issued, err := ss.UpdateScheduled(ctx, change)
	if err != nil {
		t.Fatal(err)
	}
	if err := ss.MoveDrain(ctx, change, issued); err != nil {
		t.Fatal(err)
	}
	if got := s.programWrites[Epoch.Unix()] - before; got != 2 {
		t.Errorf("%d program writes charged for UpdateScheduled and MoveDrain, want 2", got)
	}
}
