package bench

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/example/waitingroom/internal/admission"
	"github.com/example/waitingroom/internal/config"
	"github.com/example/waitingroom/internal/metrics"
	"github.com/example/waitingroom/internal/pace"
	"github.com/example/waitingroom/internal/polling"
	"github.com/example/waitingroom/internal/tools/samtemplate"
)

func TestParseArrival(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Duration
		err  bool
	}{
		{in: "burst"},
		{in: "uniform:60s", want: time.Minute},
		{in: "uniform:1m30s", want: 90 * time.Second},
		{in: "uniform:1.5s", want: 1500 * time.Millisecond},
		{in: "uniform:0s", err: true},
		{in: "uniform:", err: true},
		{in: "poisson:1s", err: true},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseArrival(tc.in)
			if (err != nil) != tc.err || got.Over != tc.want {
				t.Fatalf("ParseArrival(%q) = %v, %v", tc.in, got, err)
			}
			if err == nil && got.String() != tc.in && tc.in != "uniform:1m30s" {
				t.Errorf("String() = %q", got)
			}
		})
	}
	a := Arrival{Over: 10 * time.Second}
	if got := a.At(5, 10); got != 5*time.Second {
		t.Errorf("At(5, 10) = %s, want 5s", got)
	}
	if got := (Arrival{}).At(5, 10); got != 0 {
		t.Errorf("burst At = %s, want 0", got)
	}
}

func TestSchedule(t *testing.T) {
	for _, tc := range []struct {
		name string
		s    Schedule
		ok   bool
		str  string
	}{
		{"constant", ConstantRate(10), true, "10/s"},
		{"paused", ConstantRate(0), true, "0/s"},
		{"two", Schedule{{At: 0, Rate: 0}, {At: time.Minute, Rate: 10}}, true, "0s:0,60s:10"},
		{"empty", nil, false, ""},
		{"late start", Schedule{{At: time.Second, Rate: 1}}, false, ""},
		{"negative", ConstantRate(-1), false, ""},
		{"finer than a thousandth", ConstantRate(0.0015), false, ""},
		{"slowest", ConstantRate(0.001), true, "0.001/s"},
		{"paused for a minute", PausedFor(10, time.Minute), true, "0s:10:paused,60s:10"},
		{"ends paused with a rate", Schedule{{At: 0, Rate: 5}, {At: time.Minute, Rate: 5, Paused: true}}, true, "0s:5,60s:5:paused"},
		{"unordered", Schedule{{At: 0, Rate: 1}, {At: time.Minute, Rate: 2}, {At: time.Second, Rate: 3}}, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.s.Validate()
			if (err == nil) != tc.ok {
				t.Fatalf("Validate() = %v", err)
			}
			if tc.ok && tc.s.String() != tc.str {
				t.Errorf("String() = %q, want %q", tc.s.String(), tc.str)
			}
			if !tc.ok {
				return
			}
			if last := tc.s[len(tc.s)-1]; (tc.s.Final() == 0) != (last.Rate == 0 || last.Paused) {
				t.Errorf("Final() = %g after %+v", tc.s.Final(), last)
			}
		})
	}
}

func TestParseSchedule(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Schedule
		err  bool
	}{
		{in: "0s:200,120s:100,240s:0,300s:200", want: Schedule{{At: 0, Rate: 200}, {At: 2 * time.Minute, Rate: 100}, {At: 4 * time.Minute, Rate: 0}, {At: 5 * time.Minute, Rate: 200}}},
		{in: " 0s:0.5 , 1m30s:10 ", want: Schedule{{At: 0, Rate: 0.5}, {At: 90 * time.Second, Rate: 10}}},
		{in: "0s:10", want: ConstantRate(10)},
		{in: "0s:10:paused, 60s:10", want: PausedFor(10, time.Minute)},
		{in: "0s:10:stopped,60s:10", err: true}, // only :paused
		{in: "0s:10:paused:now", err: true},
		{in: "10s:10", err: true},          // must start at 0
		{in: "0s:10,5s:1,5s:2", err: true}, // not ascending
		{in: "0s:-1", err: true},           // negative
		{in: "0s:0.0015", err: true},       // finer than the service takes
		{in: "0s:0.0001", err: true},       // below the service's minimum
		{in: "0s:200000", err: true},       // above its maximum
		{in: "0s:10,later:5", err: true},   // not a duration
		{in: "0s", err: true},              // no rate
		{in: "", err: true},                // empty
		{in: "0s:10,-5s:1", err: true},     // negative offset
		{in: "0s:10,120s:abc", err: true},  // not a number
		{in: "0s:200,120s:100,240s:0", want: Schedule{{At: 0, Rate: 200}, {At: 2 * time.Minute, Rate: 100}, {At: 4 * time.Minute, Rate: 0}}}, // ends paused
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseSchedule(tc.in)
			if (err != nil) != tc.err {
				t.Fatalf("ParseSchedule(%q) error %v", tc.in, err)
			}
			if err != nil {
				return
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("ParseSchedule(%q) = %v, want %v", tc.in, got, tc.want)
			}
			if len(got) > 1 {
				back, err := ParseSchedule(got.String())
				if err != nil || !slices.Equal(back, got) {
					t.Errorf("String() %q does not read back: %v, %v", got.String(), back, err)
				}
			}
		})
	}
}

func TestLeaving(t *testing.T) {
	sc := Scenario{Users: 1001, Abandon: 0.2, Rates: ConstantRate(1)}
	a := sc.Leaving(7)
	n := 0
	for _, f := range a {
		if f >= 0 {
			n++
			if f >= 1 {
				t.Fatalf("fraction %g not in [0, 1)", f)
			}
		}
	}
	if n != 200 { // round(0.2 × 1001)
		t.Errorf("%d users leave, want 200", n)
	}
	if !slices.Equal(a, sc.Leaving(7)) || slices.Equal(a, sc.Leaving(8)) {
		t.Error("the draws do not follow the seed")
	}
	if sc.Abandon = 0; sc.Leaving(7) != nil {
		t.Error("nobody leaves, yet a plan")
	}
	if err := (Scenario{Users: 1, Abandon: 1, Rates: ConstantRate(1)}).Validate(); err == nil {
		t.Error("abandon 1 accepted")
	}
}

// TestApplyChange: the first change holds at once, later ones one TTL
// later, a pause keeps the rate, and a change waits for a pending one.
func TestApplyChange(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	p := admission.Program{ID: "p", CreatedAt: t0}
	p, ok := ApplyChange(p, t0, RateChange{Rate: 10}, true, time.Second)
	if !ok || p.Pending(t0) || !p.Segment(t0).Advancing() {
		t.Fatalf("first change: ok %v, pending %v", ok, p.Pending(t0))
	}
	for range 100 {
		p = p.WithTicketIssued(t0)
	}
	t1 := t0.Add(2 * time.Second)
	p, ok = ApplyChange(p, t1, RateChange{At: 2 * time.Second, Rate: 0}, false, time.Second)
	if !ok || !p.Pending(t1) || p.Serving(t1.Add(999*time.Millisecond)) != 29 || p.Serving(t1.Add(5*time.Second)) != 30 {
		t.Fatalf("pause: ok %v, pending %v, serving %d then %d; want 29 then 30", ok, p.Pending(t1), p.Serving(t1.Add(999*time.Millisecond)), p.Serving(t1.Add(5*time.Second)))
	}
	if s := p.Settled(); !s.Paused || s.Rate != 10*pace.OnePerSecond {
		t.Errorf("paused segment %+v, want the rate kept", s)
	}
	if _, ok := ApplyChange(p, t1.Add(500*time.Millisecond), RateChange{Rate: 20}, false, time.Second); ok {
		t.Error("a change made while another is pending")
	}
}

// TestApplyChangePausedWithRate: a program made paused with a rate admits
// nobody, keeps the rate, and admits at it once a resume takes effect.
func TestApplyChangePausedWithRate(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s := PausedFor(10, time.Minute)
	p, ok := ApplyChange(admission.Program{ID: "p", CreatedAt: t0}, t0, s[0], true, 2*time.Second)
	if !ok || p.Pending(t0) {
		t.Fatalf("create: ok %v, pending %v", ok, p.Pending(t0))
	}
	for range 100 {
		p = p.WithTicketIssued(t0)
	}
	if got := p.Settled(); !got.Paused || got.Rate != 10*pace.OnePerSecond {
		t.Fatalf("created %+v, want paused at 10/s", got)
	}
	t1 := t0.Add(time.Minute)
	if n := p.Serving(t1); n != 0 {
		t.Fatalf("serving %d after a minute paused, want 0", n)
	}
	p, ok = ApplyChange(p, t1, s[1], false, 2*time.Second)
	if !ok {
		t.Fatal("resume refused")
	}
	if a, b := p.Serving(t1.Add(2*time.Second)), p.Serving(t1.Add(3*time.Second)); a != 0 || b != 10 {
		t.Errorf("serving %d when the resume takes effect and %d a second later, want 0 and 10", a, b)
	}
}

func TestPoliciesParse(t *testing.T) {
	reg := polling.Named(polling.DefaultTiers(), polling.DefaultETA(), polling.DefaultSteady())
	for _, tc := range []struct {
		in    string
		names []string
		err   bool
	}{
		{in: "fixed:3s,tiers", names: []string{"fixed:3s", "tiers"}},
		{in: " tiers , fixed:500ms ", names: []string{"tiers", "fixed:500ms"}},
		{in: "fixed:0s", err: true},
		{in: "fixed", err: true},
		{in: "tiers:x", err: true},
		{in: "eta,tiers", names: []string{"eta", "tiers"}},
		{in: "eta:fraction=1", err: true},
		{in: "gamma", err: true},
		{in: ",", err: true},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParsePolicies(tc.in, reg)
			if (err != nil) != tc.err {
				t.Fatalf("Parse(%q) error %v", tc.in, err)
			}
			if len(got) != len(tc.names) {
				t.Fatalf("Parse(%q) = %d policies, want %d", tc.in, len(got), len(tc.names))
			}
			for i, p := range got {
				if p.Name != tc.names[i] || p.Policy == nil {
					t.Errorf("policy %d = %q, want %q", i, p.Name, tc.names[i])
				}
			}
		})
	}
}

// constPolicy shows how a new policy plugs in: by its name in the registry.
type constPolicy time.Duration

func (c constPolicy) RetryAfter(polling.Situation, *rand.Rand) time.Duration {
	return time.Duration(c)
}

func TestPoliciesPluggable(t *testing.T) {
	reg := polling.Named(polling.DefaultTiers(), polling.DefaultETA(), polling.DefaultSteady())
	reg["const"] = constPolicy(time.Second)
	got, err := ParsePolicies("fixed:3s,const", reg)
	if err != nil || len(got) != 2 || got[1].Policy.RetryAfter(polling.Situation{}, nil) != time.Second {
		t.Fatalf("Parse = %v, %v", got, err)
	}
}

func TestSummarize(t *testing.T) {
	var hundred []float64
	for i := 100; i >= 1; i-- {
		hundred = append(hundred, float64(i))
	}
	for _, tc := range []struct {
		name    string
		samples []float64
		want    Percentiles
	}{
		{"empty", nil, Percentiles{}},
		{"one", []float64{7}, Percentiles{1, 7, 7, 7, 7}},
		{"hundred", hundred, Percentiles{100, 50, 95, 99, 100}},
		{"ten", []float64{10, 9, 8, 7, 6, 5, 4, 3, 2, 1}, Percentiles{10, 5, 10, 10, 10}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Summarize(tc.samples); got != tc.want {
				t.Errorf("Summarize = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestFormatting(t *testing.T) {
	for _, tc := range []struct{ got, want string }{
		{Thousands(0), "0"},
		{Thousands(999), "999"},
		{Thousands(1000), "1,000"},
		{Thousands(1234567), "1,234,567"},
		{Thousands(-1234), "-1,234"},
		{change(100, 17), "−83.0%"},
		{change(100, 240), "+140.0%"},
		{change(100, 100), "0%"},
		{change(0, 5), ""},
		{USD(0.01234), "$0.0123"},
		{USD(12.345), "$12.35"},
		{USD(1234.5), "$1,235"},
		{USD(0.0000301), "$0.000030"},
		{USD(0), "$0.0000"},
		{formatBytes(8_190_000_000), "8.19 GB"},
		{formatBytes(30_620_000), "30.62 MB"},
		{formatBytes(999), "999 B"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}

func sampleResults() []Result {
	a := Result{Policy: "fixed:3s", Mode: "simulate", Users: 10, Admitted: 10, Requests: 100, Polls: 90,
		RpsSeries: []int64{10, 0, 0, 30, 0, 0, 30}, PollSeries: []int64{0, 0, 0, 30, 0, 0, 30},
		ByRoute: map[string]int64{"GET poll 200": 90, "POST enter 201": 10}, NotifyDelayMs: Summarize([]float64{1, 2, 3})}
	a.Finish(7 * time.Second)
	b := a
	b.Policy, b.Requests, b.Polls = "tiers", 40, 30
	b.Finish(7 * time.Second)
	return []Result{a, b}
}

func TestWriteDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	results := sampleResults()
	if err := WriteDir(dir, Report{Title: "Test <run>", Command: "bench simulate -users 10"}, results); err != nil {
		t.Fatal(err)
	}
	js, err := os.ReadFile(filepath.Join(dir, ResultsFile))
	if err != nil {
		t.Fatal(err)
	}
	var back []Result
	if err := json.Unmarshal(js, &back); err != nil || len(back) != 2 || back[1].Polls != 30 {
		t.Fatalf("results.json: %v, %+v", err, back)
	}
	md, _ := os.ReadFile(filepath.Join(dir, ReportFile))
	for _, want := range []string{"# Test <run>", "bench simulate -users 10", "| metric | fixed:3s | tiers | tiers vs fixed:3s |", "| polls (GET) | 90 | 30 | −66.7% |"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("report.md lacks %q:\n%s", want, md)
		}
	}
	if err := WriteDir(dir, Report{Title: "Trade-off", Table: "| setting |\n"}, results); err != nil {
		t.Fatal(err)
	}
	if md, _ := os.ReadFile(filepath.Join(dir, ReportFile)); !strings.Contains(string(md), "| setting |") || strings.Contains(string(md), "| metric |") {
		t.Errorf("report.md with a table of its own:\n%s", md)
	}
}

func TestMarkdownTable(t *testing.T) {
	out := MarkdownTable(sampleResults())
	for _, want := range []string{"fixed:3s", "tiers vs fixed:3s", "−60.0%", "notify delay p99"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "latency") || strings.Contains(out, "cost") {
		t.Errorf("table of simulated results without cost shows latency or cost:\n%s", out)
	}
}

func TestMaxInversion(t *testing.T) {
	tests := []struct {
		name string
		es   []Entrant
		want int64
	}{
		{"arrival order", []Entrant{{EnteredMs: 0, Place: 1}, {EnteredMs: 10, Place: 2}, {EnteredMs: 20, Place: 3}}, 0},
		{"one bent pair", []Entrant{{EnteredMs: 0, Place: 2}, {EnteredMs: 300, Place: 1}, {EnteredMs: 400, Place: 3}}, 300},
		{"the worst pair counts", []Entrant{{EnteredMs: 100, Place: 3}, {EnteredMs: 0, Place: 4}, {EnteredMs: 900, Place: 1}, {EnteredMs: 50, Place: 2}}, 900},
		{"equal places are admitted together", []Entrant{{EnteredMs: 0, Place: 1}, {EnteredMs: 500, Place: 1}}, 0},
		{"a shuffled pre-queue is left out", []Entrant{{EnteredMs: 0, Place: 2, Prequeue: true}, {EnteredMs: 800, Place: 1, Prequeue: true}, {EnteredMs: 900, Place: 3}}, 0},
		{"none", nil, 0},
	}
	for _, tt := range tests {
		if got := MaxInversion(tt.es); got != tt.want {
			t.Errorf("%s: MaxInversion = %d, want %d", tt.name, got, tt.want)
		}
	}
}

// TestCapacityRows: the capacity rows appear when a result has the
// capacity model, a rate-only result leaves the cap's cells and the slot
// reuse empty, and the time to serve is compared.
func TestCapacityRows(t *testing.T) {
	rateOnly, capped := sampleResults()[0], sampleResults()[0]
	rateOnly.Policy, capped.Policy = "rate only", "cap 50"
	rateOnly.Capacity = &Capacity{NoShows: 600, Wasted: 600, ServedMs: 100_000, MostActive: 250}
	capped.Capacity = &Capacity{MaxActiveUsers: 50, NoShowSeconds: 10, NoShows: 600, ServerNoShows: 600, ServedMs: 600_000, MostActive: 50,
		SlotReuseMs: &Percentiles{Count: 1950, P50: 2500, Max: 4000}}
	cells := map[string][]string{}
	for _, line := range table([]Result{rateOnly, capped}) {
		cells[line[0]] = line[1:]
	}
	for label, want := range map[string][]string{
		"cap (maxActiveUsers)":              {"–", "50", ""},
		"time to serve everyone who shows":  {"100.00 s", "600.00 s", "+500.0%"},
		"admissions wasted (net)":           {"600", "0", "−100.0%"},
		"most active at once (users' view)": {"250", "50", "−80.0%"},
		"slot reuse delay p50":              {"–", "2.50 s", ""},
		"slot reuse delay max":              {"–", "4.00 s", ""},
	} {
		if !slices.Equal(cells[label], want) {
			t.Errorf("%s: %q, want %q", label, cells[label], want)
		}
	}
	for _, line := range table(sampleResults()) {
		if line[0] == "cap (maxActiveUsers)" {
			t.Error("results without the capacity model have its rows")
		}
	}
}

// TestCost: every line of the bill, from the units a run used. KMS is a
// Decrypt per instance and a key pair per key period; instances are the
// peak rate times the billed duration.
func TestCost(t *testing.T) {
	p := DefaultPrices()
	logBytes := p.EMFBytes + p.LambdaLogBytes + p.AccessLogBytes
	for _, tc := range []struct {
		name   string
		prices func(*Prices)
		r      Result
		want   Cost
	}{
		{"a million, eta-like", nil,
			Result{Requests: 5_000_000, Enters: 1_000_000, Polls: 4_000_000, Admitted: 1_000_000, PeakRps: 1_000_000, DurationSeconds: 1000,
				RpsSeries: []int64{1_000_000, 4000, 20, 0}},
			Cost{
				Usage: Usage{Requests: 5_000_000, GBSeconds: 12_500, Instances: 10_000,
					// Program reads: 10,000 instances in the first second, then 40, then one for 20 requests.
					RRU: 4_000_000 + 1_000_000 + 10_000 + 40 + 1, WRU: 1_000_000*3 + 1_000_000 + 10_000,
					KMS: 10_000 + 1, KeyPeriods: 1, LogBytes: 5e6 * logBytes,
					ReportWRU: 10_000}, // a minute's tally from each of the peak second's instances
				APIGateway: 5, LambdaRequests: 1, LambdaDuration: 12_500 * 0.0000133334,
				DynamoReads: 5.010041 * 0.125, DynamoWrites: 4.01 * 0.625, Logs: 5e6 * logBytes / 1e9 * 0.5,
				KMS: (10_000*0.03 + 0.10) / 1e4,
			}},
		{"leaves, an idle peak, three key periods", nil,
			Result{Requests: 300, Enters: 100, Polls: 100, Leaves: 100, Admitted: 0, PeakRps: 0, DurationSeconds: 2*86400 + 1},
			Cost{
				Usage: Usage{Requests: 300, GBSeconds: 300 * 0.25 * 0.01, Instances: 1,
					RRU: 100 + 100, WRU: 100*3 + 100, KMS: 3 + 3, KeyPeriods: 3, LogBytes: 300 * logBytes},
				APIGateway: 300e-6, LambdaRequests: 300 * 0.2e-6, LambdaDuration: 300 * 0.25 * 0.01 * 0.0000133334,
				DynamoReads: 200 * 0.125e-6, DynamoWrites: 400 * 0.625e-6, Logs: 300 * logBytes / 1e9 * 0.5,
				KMS: (3*0.03 + 3*0.10) / 1e4,
			}},
		{"no rotation, no key-less enters, no program cache", func(p *Prices) {
			p.KeyRotation, p.EnterRRU, p.EnterWRU, p.LambdaMsPerRequest, p.ProgramCacheTTL = 0, 0, 2, 100, 0
		},
			Result{Requests: 20, Enters: 10, Polls: 10, Admitted: 10, PeakRps: 15, DurationSeconds: 5},
			Cost{
				Usage: Usage{Requests: 20, GBSeconds: 20 * 0.25 * 0.1, Instances: 2,
					RRU: 20, WRU: 10*2 + 10, KMS: 2 + 1, KeyPeriods: 1, LogBytes: 20 * logBytes},
				APIGateway: 20e-6, LambdaRequests: 20 * 0.2e-6, LambdaDuration: 20 * 0.25 * 0.1 * 0.0000133334,
				DynamoReads: 20 * 0.125e-6, DynamoWrites: 30 * 0.625e-6, Logs: 20 * logBytes / 1e9 * 0.5,
				KMS: (2*0.03 + 0.10) / 1e4,
			}},
		{"a capped simulation: the site's session ends billed, a unit for each capacity record written", nil,
			Result{Mode: "simulate", Requests: 20, Enters: 10, Polls: 10, Admitted: 8, SessionEnds: 6, PeakRps: 15, DurationSeconds: 5,
				CapacityWrites: map[string]int64{"sighting": 8, "end": 6, "fold": 3}},
			Cost{
				Usage: Usage{Requests: 26, GBSeconds: 26 * 0.25 * 0.01, Instances: 1,
					RRU: 10 + 10, WRU: 10*3 + 8 + 8 + 6 + 3, KMS: 1 + 1, KeyPeriods: 1, LogBytes: 26 * logBytes},
				APIGateway: 26e-6, LambdaRequests: 26 * 0.2e-6, LambdaDuration: 26 * 0.25 * 0.01 * 0.0000133334,
				DynamoReads: 20 * 0.125e-6, DynamoWrites: 55 * 0.625e-6, Logs: 26 * logBytes / 1e9 * 0.5,
				KMS: (0.03 + 0.10) / 1e4,
			}},
		{"a run's requests hold the site's session ends already", nil,
			Result{Mode: "run", Requests: 26, Enters: 10, Polls: 10, Admitted: 8, SessionEnds: 6, PeakRps: 15, DurationSeconds: 5},
			Cost{
				Usage: Usage{Requests: 26, GBSeconds: 26 * 0.25 * 0.01, Instances: 1,
					RRU: 10 + 10, WRU: 10*3 + 8, KMS: 1 + 1, KeyPeriods: 1, LogBytes: 26 * logBytes},
				APIGateway: 26e-6, LambdaRequests: 26 * 0.2e-6, LambdaDuration: 26 * 0.25 * 0.01 * 0.0000133334,
				DynamoReads: 20 * 0.125e-6, DynamoWrites: 38 * 0.625e-6, Logs: 26 * logBytes / 1e9 * 0.5,
				KMS: (0.03 + 0.10) / 1e4,
			}},
		{"behind the edge gate, 10 site requests each, on a new distribution", func(p *Prices) { p.SiteRequests, p.CloudFrontPerMillion = 10, 1 },
			Result{Requests: 20, Enters: 10, Entered: 10, Polls: 10, Admitted: 8, PeakRps: 15, DurationSeconds: 5},
			Cost{
				Usage: Usage{Requests: 20, GBSeconds: 20 * 0.25 * 0.01, Instances: 1,
					RRU: 10 + 10 + 10*0.125, WRU: 10*3 + 8, KMS: 1 + 1, KeyPeriods: 1, LogBytes: 20 * logBytes, EdgeCalls: 10 + 8*11,
					ReportRRU: 10 * 0.125}, // the report's pass over the 10 who entered
				APIGateway: 20e-6, LambdaRequests: 20 * 0.2e-6, LambdaDuration: 20 * 0.25 * 0.01 * 0.0000133334,
				DynamoReads: 21.25 * 0.125e-6, DynamoWrites: 38 * 0.625e-6, Logs: 20 * logBytes / 1e9 * 0.5,
				KMS: (0.03 + 0.10) / 1e4, Edge: 98e-6 * (0.10 + 3*0.03 + 1),
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			prices := DefaultPrices()
			if tc.prices != nil {
				tc.prices(&prices)
			}
			want := tc.want
			want.Total = want.APIGateway + want.LambdaRequests + want.LambdaDuration + want.DynamoReads + want.DynamoWrites + want.Logs + want.KMS + want.Edge
			if diff := cmp.Diff(want, prices.Cost(tc.r), cmpopts.EquateApprox(1e-12, 1e-12)); diff != "" {
				t.Errorf("Cost (-want +got):\n%s", diff)
			}
		})
	}
}

// TestCostRows: a priced result shows every line, the total and the total
// per million admitted.
func TestCostRows(t *testing.T) {
	r := Result{Policy: "eta", Users: 1000, Admitted: 1000, Entered: 1000, Requests: 5000, Enters: 1000, Polls: 4000, RpsSeries: []int64{1000, 1000, 1000, 1000, 1000}}
	r.Finish(100 * time.Second)
	r.Price(DefaultPrices())
	cells := map[string][]string{}
	for _, line := range table([]Result{r}) {
		cells[line[0]] = line[1:]
	}
	c := r.Cost
	for label, want := range map[string]string{
		"DynamoDB read units":                                "5,175",
		"DynamoDB write units":                               "4,010",
		"of them, the report's write units (minute tallies)": "10",
		"of them, the report's read units (its pass)":        "125",
		"Lambda instances (peak, Little's law)":              "10",
		"KMS requests":                                       "11",
		"log bytes (EMF, Lambda, access)":                    "1.57 MB",
		"cost: total":                                        USD(c.Total),
		"per million admitted":                               USD(c.Total * 1000),
	} {
		if got := cells[label]; len(got) != 1 || got[0] != want {
			t.Errorf("%s: %q, want %q", label, got, want)
		}
	}
	if c.Usage.RRU != 4000+1000+10*5+125 { // polls, enters, 10 instances reading the program each of 5 busy seconds, the report's pass
		t.Errorf("read units %g, want 5,175", c.Usage.RRU)
	}
}

// TestCostDefaults: the defaults read from the code are what the code
// writes: the function's memory size, a WAITING poll's EMF line and the
// access log line of template.yaml's format.
func TestCostDefaults(t *testing.T) {
	p := DefaultPrices()
	tpl, err := samtemplate.Load("../../../template.yaml")
	if err != nil {
		t.Fatal(err)
	}
	fn, err := tpl.Function("QueueFunction")
	if err != nil {
		t.Fatal(err)
	}
	if float64(fn.MemorySize) != p.LambdaMemoryMB {
		t.Errorf("LambdaMemoryMB %g, template's QueueFunction MemorySize %d", p.LambdaMemoryMB, fn.MemorySize)
	}

	// An instance's EMF lines over one interval of 1,000 WAITING polls,
	// per poll: what the aggregation leaves of each.
	var emf bytes.Buffer
	sink := metrics.NewEMF(&emf, metrics.DefaultNamespace, metrics.WithEMFInterval(config.DefaultMetricsInterval),
		metrics.WithEMFClock(func() time.Time { return time.Unix(1768990530, 0) }))
	const polls = 1000
	for i := range polls {
		sink.Observe(metrics.Request{Op: metrics.OpPoll, Method: "GET", Status: 200,
			ProgramID: "spring-sale-2026", TokenStatus: "WAITING", RetryAfter: time.Duration(15000+i) * time.Millisecond, EstimatedWait: time.Duration(240000-i*7) * time.Millisecond,
			Waiting: 234_567 - int64(i), WaitingKnown: true, Duration: time.Duration(6789+i*13) * time.Microsecond})
	}
	sink.Flush()
	if got := math.Round(float64(emf.Len()) / polls); got != p.EMFBytes {
		t.Errorf("EMFBytes %g, 1,000 WAITING polls aggregated take %g bytes each:\n%s", p.EMFBytes, got, emf.String())
	}
	// Lambda's own lines are off (SystemLogLevel WARN) exactly when they are not counted.
	if level := fn.LoggingConfig["SystemLogLevel"]; (level == "WARN") != (p.LambdaLogBytes == 0) {
		t.Errorf("LambdaLogBytes %g with the template's SystemLogLevel %q", p.LambdaLogBytes, level)
	}

	settings, _ := tpl.Properties("HttpApi")["AccessLogSettings"].(map[string]any)
	format, _ := settings["Format"].(string)
	// A poll from a desktop browser, answered 200.
	values := map[string]string{
		"$context.requestId":           "JZ3pnhUroAMEVbw=",
		"$context.requestTime":         "21/Jan/2026:10:15:30 +0000",
		"$context.requestTimeEpoch":    "1768990530123",
		"$context.identity.sourceIp":   "203.0.113.42",
		"$context.identity.userAgent":  "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36",
		"$context.httpMethod":          "GET",
		"$context.routeKey":            "ANY /api/v1/queues/programs/{programId}",
		"$context.path":                "/api/v1/queues/programs/spring-sale-2026",
		"$context.status":              "200",
		"$context.responseLength":      "412",
		"$context.responseLatency":     "12",
		"$context.integrationLatency":  "10",
		"$context.integrationStatus":   "200",
		"$context.identity.userArn":    "-",
		"$context.identity.accountId":  "-",
		"$context.error.messageString": `"-"`,
	}
	line := regexp.MustCompile(`\$context(\.[A-Za-z0-9]+)+`).ReplaceAllStringFunc(format, func(v string) string {
		s, ok := values[v]
		if !ok {
			t.Errorf("the access log format's %s has no sample value", v)
		}
		return s
	}) + "\n"
	if !json.Valid([]byte(line)) {
		t.Errorf("the sample access log line is not JSON:\n%s", line)
	}
	if float64(len(line)) != p.AccessLogBytes {
		t.Errorf("AccessLogBytes %g, the sample line has %d:\n%s", p.AccessLogBytes, len(line), line)
	}
}
