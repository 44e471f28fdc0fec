package main

import (
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/example/waitingroom/internal/tools/bench"
)

func TestSimulateJSON(t *testing.T) {
	got := runJSON[contract](t, nil, 2, "simulate", "-users", "1000", "-admit-rate", "10", "-policy", "fixed:3s,tiers", "-seed", "3", "-json")
	for _, c := range got {
		c.check(t, false)
	}
	if *got[0].Policy != "fixed:3s" || *got[1].Policy != "tiers" || *got[0].Polls != 17170 {
		t.Errorf("policies %s, %s; fixed polls %d, want 17,170", *got[0].Policy, *got[1].Policy, *got[0].Polls)
	}
}

// TestSimulateCost: the bill's units follow the run and the usage flags
// (writes per enter and per admission, KMS a Decrypt per instance and a
// key pair per key period), its prices follow the price flags, and the
// table has every line.
func TestSimulateCost(t *testing.T) {
	type usage struct {
		RRU       float64 `json:"dynamoRRU"`
		WRU       float64 `json:"dynamoWRU"`
		Instances int64   `json:"lambdaInstances"`
		KMS       int64   `json:"kms"`
		LogBytes  float64 `json:"logBytes"`
	}
	type result struct {
		Admitted        int     `json:"admitted"`
		Polls           int64   `json:"polls"`
		RpsSeries       []int64 `json:"rpsSeries"`
		DurationSeconds float64 `json:"durationSeconds"`
		Cost            struct {
			Usage usage   `json:"usage"`
			KMS   float64 `json:"kms"`
			Logs  float64 `json:"logs"`
			Total float64 `json:"total"`
		} `json:"costUSD"`
	}
	args := []string{"simulate", "-users", "1000", "-admit-rate", "10", "-policy", "eta", "-seed", "3", "-json"}
	for _, tc := range []struct {
		name  string
		flags []string
		want  func(r result) usage
	}{
		{"defaults", nil, func(r result) usage {
			programReads, tallies := 0.0, 0.0 // each busy instance once a second; a tally a minute
			for i, n := range r.RpsSeries {
				programReads += math.Ceil(float64(n) * 10 / 1000)
				if i%60 == 0 {
					tallies += math.Ceil(float64(slices.Max(r.RpsSeries[i:min(i+60, len(r.RpsSeries))])) * 10 / 1000)
				}
			}
			return usage{RRU: float64(r.Polls+1000) + programReads + 1000*0.125, WRU: 3*1000 + 1000 + tallies, Instances: 10, KMS: 10 + 1,
				LogBytes: float64(r.Polls+1000) * (26 + 0 + 289)}
		}},
		{"flags", []string{"-enter-rru", "0", "-enter-wru", "2", "-admit-wru", "2", "-lambda-ms", "20", "-key-rotation", "1s", "-program-cache-ttl", "0", "-report-minute-wru", "0", "-report-rru", "0",
			"-emf-bytes", "0", "-lambda-log-bytes", "0", "-access-log-bytes", "100"}, func(r result) usage {
			periods := int64(math.Ceil(r.DurationSeconds))
			return usage{RRU: float64(2 * r.Polls), WRU: 2*1000 + 2*1000, Instances: 20, KMS: 20*periods + periods,
				LogBytes: float64(r.Polls+1000) * 100}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := runJSON[result](t, nil, 1, append(args, tc.flags...)...)
			r := got[0]
			if want := tc.want(r); r.Admitted != 1000 || r.Cost.Usage != want {
				t.Errorf("admitted %d, usage %+v; want 1,000 and %+v", r.Admitted, r.Cost.Usage, want)
			}
		})
	}
	out, errOut, err := runCmd(t, append(args, "-price-kms-symmetric", "0", "-price-kms-keypair", "0", "-price-logs-gb", "0")...)
	if err != nil {
		t.Fatalf("%v: %s", err, errOut)
	}
	var free []result
	if err := json.Unmarshal([]byte(out), &free); err != nil || len(free) != 1 || free[0].Cost.KMS != 0 || free[0].Cost.Logs != 0 || free[0].Cost.Total <= 0 {
		t.Errorf("KMS and logs priced at 0: %v, %+v", err, free)
	}
	out, errOut, err = runCmd(t, args[:len(args)-1]...)
	if err != nil {
		t.Fatalf("%v: %s", err, errOut)
	}
	for _, want := range []string{"DynamoDB write units", "Lambda instances (peak, Little's law)", "KMS requests",
		"log bytes (EMF, Lambda, access)", "of them, the report's write units (minute tallies)", "cost: CloudWatch Logs", "cost: KMS", "cost: total", "per million admitted"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
}

// TestSimulateScheduleAbandon: the changing rate and the abandonment reach
// the simulator, the same people leave under every policy, and the table
// states both readings of "polls per user".
func TestSimulateScheduleAbandon(t *testing.T) {
	args := []string{"simulate", "-users", "2000", "-rate-schedule", "0s:40,10s:20,20s:0,30s:40", "-abandon", "0.2", "-policy", "tiers,eta"}
	type row struct {
		Policy    string  `json:"policy"`
		AdmitRate string  `json:"admitRate"`
		Abandon   float64 `json:"abandon"`
		Left      int     `json:"left"`
		Admitted  int     `json:"admitted"`
		Leaves    int64   `json:"leaves"`
		CacheTTL  int64   `json:"cacheTtlMs"`
	}
	got := runJSON[row](t, nil, 2, append(args, "-json")...)
	for _, r := range got {
		if r.AdmitRate != "0s:40,10s:20,20s:0,30s:40" || r.Abandon != 0.2 || r.Left != 400 || r.Leaves != 400 || r.Admitted != 1600 || r.CacheTTL != 1000 {
			t.Errorf("%+v", r)
		}
	}
	out, errOut, err := runCmd(t, args...)
	if err != nil {
		t.Fatalf("%v: %s", err, errOut)
	}
	for _, want := range []string{"left while waiting", "polls per user (GETs only)", "requests per user (enter + GETs + DELETE)"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
}

func TestSimulateOut(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "sim")
	out, errOut, err := runCmd(t, "simulate", "-users", "200", "-admit-rate", "0", "-timeout", "30s", "-out", dir)
	if err != nil {
		t.Fatalf("%v: %s", err, errOut)
	}
	if !strings.Contains(out, "tiers vs fixed:3s") {
		t.Errorf("no comparison table:\n%s", out)
	}
	for _, f := range []string{"results.json", "report.md"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Error(err)
		}
	}
}

// TestSimulatePartitionModel: -partition-model, -opens-at and -shuffle
// reach the service-mode simulator, and the enter path's fields are in the
// JSON; -tickets single is the Before.
func TestSimulatePartitionModel(t *testing.T) {
	got := runJSON[map[string]any](t, nil, 1, "simulate", "-users", "3000", "-arrival", "uniform:2s", "-admit-rate", "1000", "-policy", "eta",
		"-partition-model", "-instances", "20", "-opens-at", "1s", "-shuffle", "-json")
	r := got[0]
	for _, k := range []string{"entersPerSecondPeak", "throttledEnters", "programItemWritesPerSecondMax", "gaps", "maxInversionMs", "prequeue"} {
		if _, ok := r[k]; !ok {
			t.Errorf("the result lacks %q: %v", k, r)
		}
	}
	if r["admitted"] != float64(3000) || r["throttledEnters"] != float64(0) || r["instances"] != float64(20) {
		t.Errorf("result %v", r)
	}
	for _, bad := range [][]string{
		{"-shuffle"},
		{"-partition-limits", "scale=0.1"},
		{"-partition-model", "-tickets", "many"},
		{"-partition-model", "-tickets", "fixed:0,20"},
		{"-partition-model", "-tickets", "fixed:24"},
		{"-partition-model", "-instances", "0"},
	} {
		if _, _, err := runCmd(t, append([]string{"simulate", "-users", "10"}, bad...)...); err == nil {
			t.Errorf("%v: no error", bad)
		}
	}
}

// TestSimulateClockSkew: -clock-skew runs the service with a column per
// skew, each stating its skew and the drawn clocks' spread.
func TestSimulateClockSkew(t *testing.T) {
	type row struct {
		Policy        string  `json:"policy"`
		Admitted      int     `json:"admitted"`
		Instances     int     `json:"instances"`
		ClockSkewMs   float64 `json:"clockSkewMs"`
		ClockSpreadMs float64 `json:"clockSpreadMs"`
	}
	got := runJSON[row](t, nil, 2, "simulate", "-users", "1000", "-arrival", "uniform:2s", "-admit-rate", "500", "-policy", "eta",
		"-instances", "8", "-clock-skew", "0,500ms", "-json")
	if got[0].Policy != "eta, skew ±0s" || got[0].ClockSkewMs != 0 || got[0].ClockSpreadMs != 0 || got[0].Instances != 8 || got[0].Admitted != 1000 {
		t.Errorf("no skew: %+v", got[0])
	}
	if s := got[1]; s.Policy != "eta, skew ±500ms" || s.ClockSkewMs != 500 || s.ClockSpreadMs <= 0 || s.ClockSpreadMs > 1000 || s.Admitted != 1000 {
		t.Errorf("±500ms: %+v", s)
	}
	for _, bad := range []string{"-1s", "500", "0,x"} {
		if _, _, err := runCmd(t, "simulate", "-users", "10", "-clock-skew", bad); err == nil {
			t.Errorf("-clock-skew %s: no error", bad)
		}
	}
}

// TestSimulateCapacity: -max-active and its companions run a rate-only
// program and the capped one side by side on the same crowd, with the
// capacity rows in the table; bad values are usage errors.
func TestSimulateCapacity(t *testing.T) {
	args := []string{"simulate", "-users", "200", "-arrival", "uniform:5s", "-admit-rate", "20", "-instances", "2",
		"-max-active", "10", "-no-show", "0.2", "-no-show-seconds", "5", "-session", "1s-3s"}
	type row struct {
		Policy   string `json:"policy"`
		Capacity struct {
			MaxActiveUsers int64 `json:"maxActiveUsers"`
			NoShows        int64 `json:"noShows"`
			MostActive     int64 `json:"mostActive"`
			SessionsEnded  int64 `json:"sessionsEnded"`
		} `json:"capacity"`
	}
	got := runJSON[row](t, nil, 2, append(args, "-json")...)
	if got[0].Policy != "eta, rate only" || got[1].Policy != "eta, cap 10, no-show 5s" {
		t.Errorf("programs %q, %q; want the rate-only one, then the capped one", got[0].Policy, got[1].Policy)
	}
	if c, o := got[1].Capacity, got[0].Capacity; c.MaxActiveUsers != 10 || c.MostActive > 10 || c.NoShows != 40 || o.NoShows != 40 || c.SessionsEnded != 160 || o.SessionsEnded != 160 {
		t.Errorf("capped %+v, rate only %+v; want cap 10 held, 40 no-shows and 160 sessions ended in both", c, o)
	}
	// A cap alone: the rate-only side is followed too.
	out, errOut, err := runCmd(t, "simulate", "-users", "50", "-admit-rate", "20", "-instances", "1", "-max-active", "10", "-timeout", "10s", "-json")
	if err != nil {
		t.Fatalf("%v: %s", err, errOut)
	}
	var capOnly []map[string]any
	if err := json.Unmarshal([]byte(out), &capOnly); err != nil || len(capOnly) != 2 || capOnly[0]["capacity"] == nil || capOnly[1]["capacity"] == nil {
		t.Fatalf("want both programs' capacity: %v: %s", err, out)
	}
	out, errOut, err = runCmd(t, args...)
	if err != nil {
		t.Fatalf("%v: %s", err, errOut)
	}
	for _, want := range []string{"time to serve everyone who shows", "admissions wasted (net)", "most active at once (users' view)", "slot reuse delay p50"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	for _, bad := range [][]string{
		{"-max-active", "-1", "-session", "1s-2s"},
		{"-max-active", "5"}, // no -session, no -timeout
		{"-no-show", "1"},
		{"-no-show-seconds", "3"},
		{"-session", "5s"},
		{"-session", "20s-5s"},
		{"-session", "0-0"},
		{"-session", "x-5s"},
	} {
		if _, errOut, err := runCmd(t, append([]string{"simulate", "-users", "10"}, bad...)...); err == nil {
			t.Errorf("%v: no error", bad)
		} else if !strings.Contains(errOut, bad[0]) {
			t.Errorf("%v: error %q does not name %s", bad, errOut, bad[0])
		}
	}
}

// TestParseSession: MIN-MAX in durations or seconds.
func TestParseSession(t *testing.T) {
	for _, tc := range []struct {
		spec string
		want bench.Range
	}{
		{"", bench.Range{}},
		{"5s-20s", bench.Range{Min: 5 * time.Second, Max: 20 * time.Second}},
		{"5-20", bench.Range{Min: 5 * time.Second, Max: 20 * time.Second}},
		{"0-1.5", bench.Range{Max: 1500 * time.Millisecond}},
		{" 2m - 2m ", bench.Range{Min: 2 * time.Minute, Max: 2 * time.Minute}},
	} {
		got, err := parseSession(tc.spec)
		if err != nil || got != tc.want {
			t.Errorf("%q: %+v, %v; want %+v", tc.spec, got, err, tc.want)
		}
	}
}

// TestCapacityFlags reads the crowd flags of run into a crowd, and refuses
// them without -max-active or with a malformed -session.
func TestCapacityFlags(t *testing.T) {
	c := crowdFlags{maxActive: 50, noShow: 0.3, noShowSeconds: 10, session: "5s-20s"}
	got, err := c.runCrowd()
	if err != nil || got.MaxActive != 50 || got.NoShow != 0.3 || got.NoShowSeconds != 10 || got.Session.Min != 5*time.Second || got.Session.Max != 20*time.Second {
		t.Fatalf("runCrowd() = %+v, %v", got, err)
	}
	if got, err := (&crowdFlags{}).runCrowd(); got != nil || err != nil {
		t.Errorf("no flags: %+v, %v; want nil, nil", got, err)
	}
	for name, bad := range map[string]crowdFlags{
		"no cap":       {noShow: 0.3},
		"session":      {maxActive: 5, session: "5s"},
		"reversed":     {maxActive: 5, session: "20s-5s"},
		"no-show of 1": {maxActive: 5, noShow: 1},
	} {
		if _, err := bad.runCrowd(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestTradeoff(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tradeoff")
	out, errOut, err := runCmd(t, "tradeoff", "-users", "2000", "-admit-rate", "20", "-vary", "fraction=0.5,0.9", "-mark", "0.5",
		"-reference", "tiers", "-out", dir)
	if err != nil {
		t.Fatalf("%v: %s", err, errOut)
	}
	for _, want := range []string{"**fraction=0.5** (chosen)", "| fraction=0.9 |", "| tiers |"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	if md, err := os.ReadFile(filepath.Join(dir, "report.md")); err != nil || !strings.Contains(string(md), "**fraction=0.5** (chosen)") {
		t.Errorf("report.md: %v\n%s", err, md)
	}
	if _, err := os.Stat(filepath.Join(dir, "results.json")); err != nil {
		t.Error(err)
	}
	if _, errOut, err := runCmd(t, "tradeoff", "-vary", "fraction"); !errors.Is(err, errUsage) || !strings.Contains(errOut, "KEY=V1") {
		t.Errorf("bad -vary: %v, %s", err, errOut)
	}
}
