package simulate

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/example/waitingroom/internal/polling"
	"github.com/example/waitingroom/internal/tools/bench"
	"github.com/example/waitingroom/internal/tools/partitionmodel"
)

var (
	eta    = bench.NamedPolicy{Name: "eta", Policy: polling.DefaultETA()}
	steady = bench.NamedPolicy{Name: "steady", Policy: polling.DefaultSteady()}
)

// runSim runs cfg and returns the simulation, to read its users, and its result.
func runSim(t *testing.T, cfg Config) (*sim, bench.Result) {
	t.Helper()
	s, err := newSim(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s.run()
	return s, s.result()
}

// TestPushBurst: everyone subscribed to a burst: each admitted person makes
// at most their enter, the poll the turn push wakes, and a fallback poll
// per PushFallback of their wait; hears their admission within a second
// (the sender's pass) and the push latency; and gets one turn push, and
// one ready push since their earliest admission is within the lead at
// some whole second before it.
func TestPushBurst(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		users   int
		rate    float64
		policy  bench.NamedPolicy
		latency time.Duration
	}{
		{"1,000 at 10/s, eta", 1000, 10, eta, 500 * time.Millisecond},
		{"1,000 at 10/s, tiers", 1000, 10, tiers, 500 * time.Millisecond},
		{"1,000 at 10/s, steady, instant push", 1000, 10, steady, 0},
		{"1,000 at 1/s, eta: waits past the fallback", 1000, 1, eta, 2 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := Config{Scenario: bench.Scenario{Users: tc.users, Rates: bench.ConstantRate(tc.rate)}, Policy: tc.policy, Seed: 1,
				Prices: bench.DefaultPrices(), PushShare: 1, PushLatency: tc.latency}
			s, r := runSim(t, cfg)
			if r.Admitted != tc.users || r.Subscribed != tc.users {
				t.Fatalf("admitted %d, subscribed %d; want %d", r.Admitted, r.Subscribed, tc.users)
			}
			var admittedSubscribed int64
			for i, us := range s.users {
				if !us.subscribed {
					continue
				}
				admittedSubscribed++
				wait := time.Duration(s.admitAt[us.ticket]-us.enteredMs) * time.Millisecond
				if most := 2 + int32((wait+polling.PushFallback-1)/polling.PushFallback); us.requests > most {
					t.Errorf("user %d waited %v and made %d requests, want at most %d", i, wait, us.requests, most)
				}
			}
			if most := bench.Ms(time.Second + tc.latency); r.NotifyDelayMs.Max > most {
				t.Errorf("notify delay max %g ms, want at most %g", r.NotifyDelayMs.Max, most)
			}
			if r.PushesTurn != admittedSubscribed || r.PushesReady != admittedSubscribed {
				t.Errorf("pushes: %d turn, %d ready; want %d each", r.PushesTurn, r.PushesReady, admittedSubscribed)
			}
			if minutes := int64(r.DurationSeconds/60) + 1; r.SenderMinutes != minutes {
				t.Errorf("sender minutes %d, want %d (the run's %g s)", r.SenderMinutes, minutes, r.DurationSeconds)
			}
		})
	}
}

// TestPushShareZero: share 0, whatever the latency, is the run without
// push, Result for Result; reporting push at share 0 adds only the push
// fields, all zero.
func TestPushShareZero(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		sc     bench.Scenario
		policy bench.NamedPolicy
	}{
		{"burst, tiers", bench.Scenario{Users: 2000, Rates: bench.ConstantRate(20)}, tiers},
		{"uniform, eta", bench.Scenario{Users: 2000, Arrival: bench.Arrival{Over: time.Minute}, Rates: bench.ConstantRate(20)}, eta},
		{"changing rate and abandon, steady", bench.Scenario{Users: 3000, Abandon: 0.2,
			Rates: bench.Schedule{{At: 0, Rate: 40}, {At: 10 * time.Second, Rate: 20}, {At: 20 * time.Second, Rate: 0}, {At: 30 * time.Second, Rate: 40}}}, steady},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			base := Config{Scenario: tc.sc, Policy: tc.policy, Seed: 1, CacheTTL: 2 * time.Second, Prices: bench.DefaultPrices()}
			want, err := Run(base)
			if err != nil {
				t.Fatal(err)
			}
			zero := base
			zero.PushLatency = 500 * time.Millisecond
			got, err := Run(zero)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("share 0 (-without +with):\n%s", diff)
			}
			zero.ReportPush = true
			if got, err = Run(zero); err != nil {
				t.Fatal(err)
			}
			if got.PushShare == nil || *got.PushShare != 0 || got.Subscribed != 0 || got.PushesReady != 0 || got.PushesTurn != 0 || got.SenderMinutes != 0 {
				t.Errorf("reported at share 0: share %v, %d subscribed, %d+%d pushes, %d minutes", got.PushShare, got.Subscribed, got.PushesReady, got.PushesTurn, got.SenderMinutes)
			}
			if diff := cmp.Diff(want, got, cmpopts.IgnoreFields(bench.Result{}, "PushShare", "PushLatencyMs")); diff != "" {
				t.Errorf("reported at share 0 (-without +with):\n%s", diff)
			}
		})
	}
}

// TestPushTiny: three people in a burst at 1/s, everyone subscribed: all
// are within the lead at 0 s (ready), each is admitted at a whole second
// (turn, heard half a second later), and someone waits in the first minute
// only. The bill's push lines follow by hand.
func TestPushTiny(t *testing.T) {
	t.Parallel()
	cfg := Config{Scenario: bench.Scenario{Users: 3, Rates: bench.ConstantRate(1)}, Policy: eta, Seed: 1, Prices: bench.DefaultPrices(),
		PushShare: 1, PushLatency: 500 * time.Millisecond}
	r, err := Run(cfg)
	if err != nil {
		t.Fatal(err)
	}
	type counts struct {
		Requests, Polls, Ready, Turn, Minutes int64
		Subscribed                            int
		Delay                                 bench.Percentiles
	}
	want := counts{Requests: 6, Polls: 3, Ready: 3, Turn: 3, Minutes: 1, Subscribed: 3,
		Delay: bench.Percentiles{Count: 3, P50: 500, P95: 500, P99: 500, Max: 500}}
	got := counts{r.Requests, r.Polls, r.PushesReady, r.PushesTurn, r.SenderMinutes, r.Subscribed, r.NotifyDelayMs}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	p := bench.DefaultPrices()
	c := r.Cost
	gbs := 1 * 60.0 * 256 / 1024 // a minute of the 256 MB sender
	wantUsage := [4]float64{1, gbs, 3*1 + 3*2 + 3*2, 3 * 9.0 / 80}
	if diff := cmp.Diff(wantUsage, [4]float64{float64(c.Usage.SenderMinutes), c.Usage.SenderGBSeconds, c.Usage.PushWRU, c.Usage.PushRRU}, cmpopts.EquateApprox(1e-12, 0)); diff != "" {
		t.Errorf("push usage: minutes, GB-s, WRU, RRU (-want +got):\n%s", diff)
	}
	wantCost := [3]float64{1*0.20/1e6 + gbs*0.0000133334, 15 * 0.625 / 1e6, 3 * 9.0 / 80 * 0.125 / 1e6}
	if diff := cmp.Diff(wantCost, [3]float64{c.PushLambda, c.PushDynamoWrite, c.PushDynamoRead}, cmpopts.EquateApprox(1e-12, 0)); diff != "" {
		t.Errorf("push cost (-want +got):\n%s", diff)
	}
	without := c.APIGateway + c.LambdaRequests + c.LambdaDuration + c.DynamoReads + c.DynamoWrites + c.Logs + c.KMS + c.Edge
	if diff := cmp.Diff(without+wantCost[0]+wantCost[1]+wantCost[2], c.Total, cmpopts.EquateApprox(1e-12, 0)); diff != "" {
		t.Errorf("total (-want +got):\n%s", diff)
	}
	if p.SenderMemoryMB != 256 || p.SenderMsPerMinute != 60000 {
		t.Errorf("sender defaults %g MB, %g ms a minute", p.SenderMemoryMB, p.SenderMsPerMinute)
	}
}

// TestPushAbandon: people who leave are never pushed their turn, and
// nobody is pushed twice; the same people leave at every share.
func TestPushAbandon(t *testing.T) {
	t.Parallel()
	sc := bench.Scenario{Users: 4000, Abandon: 0.3, Rates: bench.Schedule{{At: 0, Rate: 40}, {At: 30 * time.Second, Rate: 0}, {At: 60 * time.Second, Rate: 40}}}
	for _, share := range []float64{0, 0.5, 1} {
		s, r := runSim(t, Config{Scenario: sc, Policy: eta, Seed: 3, CacheTTL: 2 * time.Second, Prices: bench.DefaultPrices(), PushShare: share, PushLatency: time.Second})
		if r.Left != 1200 || r.Admitted != 2800 {
			t.Errorf("share %g: %d left, %d admitted; want 1,200 and 2,800", share, r.Left, r.Admitted)
		}
		var admitted int64
		for _, us := range s.users {
			if us.subscribed && s.leaveAt[us.ticket-1] < 0 { // the burst's user i holds ticket i+1
				admitted++
			}
		}
		if r.PushesTurn > admitted || r.PushesReady > int64(r.Subscribed) {
			t.Errorf("share %g: %d turn pushes for %d subscribed who stayed, %d ready for %d subscribed", share, r.PushesTurn, admitted, r.PushesReady, r.Subscribed)
		}
	}
}

// TestPushValidate: push runs on the program model only, and its share and
// latency are checked.
func TestPushValidate(t *testing.T) {
	t.Parallel()
	ok := Config{Scenario: bench.Scenario{Users: 10, Rates: bench.ConstantRate(1)}, Policy: eta, PushShare: 0.5}
	for _, tc := range []struct {
		name string
		edit func(*Config)
		want string // "" : valid
	}{
		{"program model", func(*Config) {}, ""},
		{"share 0 with the service", func(c *Config) { c.PushShare, c.Service = 0, true }, ""},
		{"service", func(c *Config) { c.Service = true }, "-push-share"},
		{"partition model", func(c *Config) { c.PartitionLimits = &partitionmodel.Limits{WriteUnits: 1000, ReadUnits: 3000} }, "-partition-model"},
		{"opens at", func(c *Config) { c.OpensAt = time.Second }, "-opens-at"},
		{"single tickets", func(c *Config) { c.SingleTickets = true }, "-tickets single"},
		{"clock skew", func(c *Config) { c.ClockSkew = time.Second }, "-clock-skew"},
		{"crowd", func(c *Config) { c.Crowd.MaxActive = 5 }, "-max-active"},
		{"share above 1", func(c *Config) { c.PushShare = 1.5 }, "-push-share 1.5"},
		{"negative share", func(c *Config) { c.PushShare = -0.1 }, "-push-share"},
		{"negative latency", func(c *Config) { c.PushLatency = -time.Millisecond }, "-push-latency"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := ok
			tc.edit(&cfg)
			err := cfg.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("error %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("error %v, want one naming %q", err, tc.want)
			}
		})
	}
}
