package main

import (
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"flag"
	"io"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/example/waitingroom/internal/httpapi"
	"github.com/example/waitingroom/internal/memstore"
	"github.com/example/waitingroom/internal/polling"
	"github.com/example/waitingroom/internal/queue"
)

func runCmd(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var out, errb strings.Builder
	err = run(context.Background(), args, env{stdout: &out, stderr: &errb, getenv: func(string) string { return "" }})
	return out.String(), errb.String(), err
}

// contract is the -json output contract of the issue.
type contract struct {
	Policy        *string             `json:"policy"`
	Users         *int                `json:"users"`
	Admitted      *int                `json:"admitted"`
	Requests      *int64              `json:"requests"`
	Polls         *int64              `json:"polls"`
	PollsPerUser  *float64            `json:"pollsPerUser"`
	AvgRps        *float64            `json:"avgRps"`
	PeakRps       *int64              `json:"peakRps"`
	Errors        *int64              `json:"errors"`
	LatencyMs     map[string]float64  `json:"latencyMs"`
	NotifyDelayMs map[string]*float64 `json:"notifyDelayMs"`
}

func (c contract) check(t *testing.T, wantLatency bool) {
	t.Helper()
	if c.Policy == nil || c.Users == nil || c.Admitted == nil || c.Requests == nil || c.Polls == nil ||
		c.PollsPerUser == nil || c.AvgRps == nil || c.PeakRps == nil || c.Errors == nil {
		t.Errorf("missing fields: %+v", c)
	}
	for _, k := range []string{"p50", "p95", "p99", "max"} {
		if c.NotifyDelayMs[k] == nil {
			t.Errorf("notifyDelayMs lacks %s", k)
		}
	}
	if wantLatency {
		for _, k := range []string{"p50", "p95", "p99"} {
			if _, ok := c.LatencyMs[k]; !ok {
				t.Errorf("latencyMs lacks %s", k)
			}
		}
	} else if c.LatencyMs != nil {
		t.Errorf("simulation reports latency %v", c.LatencyMs)
	}
}

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

func TestTradeoff(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tradeoff")
	out, errOut, err := runCmd(t, "tradeoff", "-users", "2000", "-admit-rate", "20", "-vary", "fraction=0.5,0.9", "-mark", "0.5",
		"-reference", "tiers", "-goal-p99", "1s", "-goal-requests", "5", "-out", dir)
	if err != nil {
		t.Fatalf("%v: %s", err, errOut)
	}
	for _, want := range []string{"**fraction=0.5** (chosen)", "| fraction=0.9 |", "| tiers |"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	svg, err := os.ReadFile(filepath.Join(dir, "tradeoff.svg"))
	if err != nil {
		t.Fatal(err)
	}
	dec := xml.NewDecoder(strings.NewReader(string(svg)))
	circles := 0
	for {
		tok, err := dec.Token()
		if err != nil {
			if !errors.Is(err, io.EOF) {
				t.Fatalf("tradeoff.svg is not well-formed XML: %v", err)
			}
			break
		}
		if se, ok := tok.(xml.StartElement); ok && se.Name.Local == "circle" {
			circles++
		}
	}
	if circles != 2 {
		t.Errorf("%d points of the curve, want 2", circles)
	}
	for _, f := range []string{"tradeoff.md", "results.json"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Error(err)
		}
	}
	if _, errOut, err := runCmd(t, "tradeoff", "-vary", "fraction"); !errors.Is(err, errUsage) || !strings.Contains(errOut, "KEY=V1") {
		t.Errorf("bad -vary: %v, %s", err, errOut)
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

func TestRunJSON(t *testing.T) {
	srv := httptest.NewServer(httpapi.New(queue.NewService(memstore.New(), polling.DefaultTiers()), httpapi.BearerAuth("s3cret")))
	defer srv.Close()
	out, errOut, err := runCmd(t, "run", "-url", srv.URL, "-admin-token", "s3cret", "-users", "20", "-admit-rate", "100", "-timeout", "10s", "-json")
	if err != nil {
		t.Fatalf("%v: %s", err, errOut)
	}
	var got []contract
	if err := json.Unmarshal([]byte(out), &got); err != nil || len(got) != 1 {
		t.Fatalf("%v: %s", err, out)
	}
	got[0].check(t, true)
	if *got[0].Policy != "server" || *got[0].Admitted != 20 || *got[0].Errors != 0 {
		t.Errorf("policy %s, admitted %d, errors %d", *got[0].Policy, *got[0].Admitted, *got[0].Errors)
	}
}

func TestUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no command", nil, "Usage: bench COMMAND"},
		{"unknown command", []string{"frobnicate"}, "unknown command"},
		{"remote url", []string{"run", "-url", "http://203.0.113.9:3000", "-admin-token", "x"}, "not a loopback address"},
		{"no admin token", []string{"run"}, "admin token is required"},
		{"run with two modes", []string{"run", "-poll", "fixed:3s,server", "-admin-token", "x"}, "run takes one mode"},
		{"bad poll", []string{"compare", "-poll", "tiers", "-admin-token", "x"}, "server:POLICY"},
		{"bad schedule", []string{"simulate", "-rate-schedule", "10s:5"}, "first change must be at 0"},
		{"schedule and rate", []string{"simulate", "-admit-rate", "5", "-rate-schedule", "0s:5"}, "give one of them"},
		{"schedule ends paused", []string{"simulate", "-rate-schedule", "0s:5,10s:0"}, "set -timeout"},
		{"bad abandon", []string{"simulate", "-abandon", "1"}, "abandon"},
		{"negative cache ttl", []string{"simulate", "-cache-ttl", "-1s"}, "cache-ttl"},
		{"bad policy", []string{"simulate", "-policy", "gamma"}, "unknown"},
		{"bad eta", []string{"simulate", "-policy", "eta", "-eta", "fraction=2"}, "fraction"},
		{"bad arrival", []string{"simulate", "-arrival", "poisson"}, "want burst or uniform"},
		{"paused forever", []string{"simulate", "-admit-rate", "0"}, "set -timeout"},
		{"bad tiers", []string{"simulate", "-tiers", "100:1s"}, "last band"},
		{"extra argument", []string{"simulate", "now"}, "unexpected argument"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, errOut, err := runCmd(t, tc.args...)
			if !errors.Is(err, errUsage) || !strings.Contains(errOut, tc.want) {
				t.Errorf("err %v, stderr %q; want usage error mentioning %q", err, errOut, tc.want)
			}
		})
	}
}

func TestHelp(t *testing.T) {
	for _, cmd := range []string{"run", "compare", "simulate", "tradeoff"} {
		_, errOut, err := runCmd(t, cmd, "-h")
		if !errors.Is(err, flag.ErrHelp) {
			t.Errorf("%s -h: %v", cmd, err)
		}
		for _, want := range []string{"-users", "-admit-rate", "-rate-schedule", "-abandon", "-cache-ttl", "-seed", "-arrival", "-timeout", "-json", "-out"} {
			if !strings.Contains(errOut, want) {
				t.Errorf("%s -h lacks %s", cmd, want)
			}
		}
	}
}
