package main

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/example/waitingroom/internal/tools/bench/simulate"
)

func TestSimulateJSON(t *testing.T) {
	out, errOut, err := runCmd(t, "simulate", "-users", "1000", "-admit-rate", "10", "-policy", "fixed:3s,tiers", "-seed", "3", "-json")
	if err != nil {
		t.Fatalf("%v: %s", err, errOut)
	}
	var got []contract
	if err := json.Unmarshal([]byte(out), &got); err != nil || len(got) != 2 {
		t.Fatalf("%v: %s", err, out)
	}
	for _, c := range got {
		c.check(t, false)
	}
	if *got[0].Policy != "fixed:3s" || *got[1].Policy != "tiers" || *got[0].Polls != 17170 {
		t.Errorf("policies %s, %s; fixed polls %d, want 17,170", *got[0].Policy, *got[1].Policy, *got[0].Polls)
	}
}

// TestSimulateCost: the bill's units follow the run and the usage flags
// (writes per enter and per admission, KMS Before = admissions plus one
// GetPublicKey per instance), its prices follow the price flags, and the
// table has every line.
func TestSimulateCost(t *testing.T) {
	type usage struct {
		RRU       float64 `json:"dynamoRRU"`
		WRU       float64 `json:"dynamoWRU"`
		Instances int64   `json:"lambdaInstances"`
		KMSBefore int64   `json:"kmsBefore"`
		KMSAfter  int64   `json:"kmsAfter"`
		LogBytes  float64 `json:"logBytes"`
	}
	type result struct {
		Admitted        int     `json:"admitted"`
		Polls           int64   `json:"polls"`
		DurationSeconds float64 `json:"durationSeconds"`
		Cost            struct {
			Usage     usage   `json:"usage"`
			KMSBefore float64 `json:"kmsBefore"`
			Logs      float64 `json:"logs"`
			Total     float64 `json:"totalBefore"`
		} `json:"costUSD"`
	}
	args := []string{"simulate", "-users", "1000", "-admit-rate", "10", "-policy", "eta", "-seed", "3", "-json"}
	for _, tc := range []struct {
		name  string
		flags []string
		want  func(r result) usage
	}{
		{"defaults", nil, func(r result) usage {
			return usage{RRU: float64(2*r.Polls + 1000), WRU: 3*1000 + 1000, Instances: 10, KMSBefore: 1000 + 10, KMSAfter: 10 + 1,
				LogBytes: float64(r.Polls+1000) * (713 + 375 + 553)}
		}},
		{"flags", []string{"-enter-rru", "0", "-enter-wru", "2", "-admit-wru", "2", "-lambda-ms", "20", "-key-rotation", "1s",
			"-emf-bytes", "0", "-lambda-log-bytes", "0", "-access-log-bytes", "100"}, func(r result) usage {
			periods := int64(math.Ceil(r.DurationSeconds))
			return usage{RRU: float64(2 * r.Polls), WRU: 2*1000 + 2*1000, Instances: 20, KMSBefore: 1000 + 20, KMSAfter: 20*periods + periods,
				LogBytes: float64(r.Polls+1000) * 100}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, errOut, err := runCmd(t, append(args, tc.flags...)...)
			if err != nil {
				t.Fatalf("%v: %s", err, errOut)
			}
			var got []result
			if err := json.Unmarshal([]byte(out), &got); err != nil || len(got) != 1 {
				t.Fatalf("%v: %s", err, out)
			}
			r := got[0]
			if want := tc.want(r); r.Admitted != 1000 || r.Cost.Usage != want {
				t.Errorf("admitted %d, usage %+v; want 1,000 and %+v", r.Admitted, r.Cost.Usage, want)
			}
		})
	}
	out, errOut, err := runCmd(t, append(args, "-price-kms-asymmetric", "0", "-price-logs-gb", "0")...)
	if err != nil {
		t.Fatalf("%v: %s", err, errOut)
	}
	var free []result
	if err := json.Unmarshal([]byte(out), &free); err != nil || len(free) != 1 || free[0].Cost.KMSBefore != 0 || free[0].Cost.Logs != 0 || free[0].Cost.Total <= 0 {
		t.Errorf("KMS and logs priced at 0: %v, %+v", err, free)
	}
	out, errOut, err = runCmd(t, args[:len(args)-1]...)
	if err != nil {
		t.Fatalf("%v: %s", err, errOut)
	}
	for _, want := range []string{"DynamoDB write units", "Lambda instances (peak, Little's law)", "KMS requests, Before (Sign per admission)",
		"KMS requests, After (key per rotation)", "log bytes (EMF, Lambda, access)", "cost: CloudWatch Logs", "cost: total, After", "per million admitted, Before"} {
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
	out, errOut, err := runCmd(t, append(args, "-json")...)
	if err != nil {
		t.Fatalf("%v: %s", err, errOut)
	}
	var got []struct {
		Policy    string  `json:"policy"`
		AdmitRate string  `json:"admitRate"`
		Abandon   float64 `json:"abandon"`
		Left      int     `json:"left"`
		Admitted  int     `json:"admitted"`
		Leaves    int64   `json:"leaves"`
		CacheTTL  int64   `json:"cacheTtlMs"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil || len(got) != 2 {
		t.Fatalf("%v: %s", err, out)
	}
	for _, r := range got {
		if r.AdmitRate != "0s:40,10s:20,20s:0,30s:40" || r.Abandon != 0.2 || r.Left != 400 || r.Leaves != 400 || r.Admitted != 1600 || r.CacheTTL != 1000 {
			t.Errorf("%+v", r)
		}
	}
	out, errOut, err = runCmd(t, args...)
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
	for _, f := range []string{"results.json", "report.md", "rps.svg"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Error(err)
		}
	}
}

// TestSimulatePartitionModel: -partition-model, -opens-at and -shuffle
// reach the service-mode simulator, and the enter path's fields are in the
// JSON; -tickets single is the Before.
func TestSimulatePartitionModel(t *testing.T) {
	out, errOut, err := runCmd(t, "simulate", "-users", "3000", "-arrival", "uniform:2s", "-admit-rate", "1000", "-policy", "eta",
		"-partition-model", "-instances", "20", "-opens-at", "1s", "-shuffle", "-json")
	if err != nil {
		t.Fatalf("%v: %s", err, errOut)
	}
	var got []map[string]any
	if err := json.Unmarshal([]byte(out), &got); err != nil || len(got) != 1 {
		t.Fatalf("%v: %s", err, out)
	}
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
	out, errOut, err := runCmd(t, "simulate", "-users", "1000", "-arrival", "uniform:2s", "-admit-rate", "500", "-policy", "eta",
		"-instances", "8", "-clock-skew", "0,500ms", "-json")
	if err != nil {
		t.Fatalf("%v: %s", err, errOut)
	}
	var got []struct {
		Policy        string  `json:"policy"`
		Admitted      int     `json:"admitted"`
		Instances     int     `json:"instances"`
		ClockSkewMs   float64 `json:"clockSkewMs"`
		ClockSpreadMs float64 `json:"clockSpreadMs"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil || len(got) != 2 {
		t.Fatalf("%v: %s", err, out)
	}
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
	out, errOut, err := runCmd(t, append(args, "-json")...)
	if err != nil {
		t.Fatalf("%v: %s", err, errOut)
	}
	var got []struct {
		Policy   string `json:"policy"`
		Capacity struct {
			MaxActiveUsers int64 `json:"maxActiveUsers"`
			NoShows        int64 `json:"noShows"`
			MostActive     int64 `json:"mostActive"`
			SessionsEnded  int64 `json:"sessionsEnded"`
		} `json:"capacity"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil || len(got) != 2 {
		t.Fatalf("%v: %s", err, out)
	}
	if got[0].Policy != "eta, rate only" || got[1].Policy != "eta, cap 10, no-show 5s" {
		t.Errorf("programs %q, %q; want the rate-only one, then the capped one", got[0].Policy, got[1].Policy)
	}
	if c, o := got[1].Capacity, got[0].Capacity; c.MaxActiveUsers != 10 || c.MostActive > 10 || c.NoShows != 40 || o.NoShows != 40 || c.SessionsEnded != 160 || o.SessionsEnded != 160 {
		t.Errorf("capped %+v, rate only %+v; want cap 10 held, 40 no-shows and 160 sessions ended in both", c, o)
	}
	// A cap alone: the rate-only side is followed too.
	out, errOut, err = runCmd(t, "simulate", "-users", "50", "-admit-rate", "20", "-instances", "1", "-max-active", "10", "-timeout", "10s", "-json")
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
		want simulate.Range
	}{
		{"", simulate.Range{}},
		{"5s-20s", simulate.Range{Min: 5 * time.Second, Max: 20 * time.Second}},
		{"5-20", simulate.Range{Min: 5 * time.Second, Max: 20 * time.Second}},
		{"0-1.5", simulate.Range{Max: 1500 * time.Millisecond}},
		{" 2m - 2m ", simulate.Range{Min: 2 * time.Minute, Max: 2 * time.Minute}},
	} {
		got, err := parseSession(tc.spec)
		if err != nil || got != tc.want {
			t.Errorf("%q: %+v, %v; want %+v", tc.spec, got, err, tc.want)
		}
	}
}
