package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"strings"
	"testing"
	"time"

	"github.com/example/waitingroom/internal/clock"
)

func runCmd(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	return runCmdOn(t, nil, args...)
}

// runCmdOn runs the command with its load tests on clk (nil: the real
// clock), within a hang guard.
func runCmdOn(t *testing.T, clk clock.Clock, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	var out, errb strings.Builder
	err = run(ctx, args, env{stdout: &out, stderr: &errb, getenv: func(string) string { return "" }, clock: clk})
	return out.String(), errb.String(), err
}

// runJSON runs the command with its load tests on clk (nil: the real
// clock) and returns its -json output, which must hold n results.
func runJSON[T any](t *testing.T, clk clock.Clock, n int, args ...string) []T {
	t.Helper()
	out, errOut, err := runCmdOn(t, clk, args...)
	if err != nil {
		t.Fatalf("%v: %s", err, errOut)
	}
	var got []T
	if err := json.Unmarshal([]byte(out), &got); err != nil || len(got) != n {
		t.Fatalf("%v: %s", err, out)
	}
	return got
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
		{"paused for, without a rate", []string{"simulate", "-admit-rate", "0", "-paused-for", "60s"}, "set -admit-rate above 0"},
		{"paused for and a schedule", []string{"simulate", "-paused-for", "60s", "-rate-schedule", "0s:5"}, "give one of them"},
		{"paused for, negative", []string{"simulate", "-paused-for", "-1s"}, "-paused-for: negative"},
		{"schedule paused forever", []string{"simulate", "-rate-schedule", "0s:5:paused"}, "set -timeout"},
		{"existing program paused for", []string{"run", "-admin-token", "x", "-program-id", "gala", "-paused-for", "10s"}, "-paused-for do not apply"},
		{"bad tiers", []string{"simulate", "-tiers", "100:1s"}, "last band"},
		{"extra argument", []string{"simulate", "now"}, "unexpected argument"},
		{"existing program and rate", []string{"run", "-admin-token", "x", "-program-id", "gala", "-admit-rate", "5", "-abandon", "0.1"}, "-admit-rate, -abandon do not apply"},
		{"existing program and policy", []string{"run", "-admin-token", "x", "-program-id", "gala", "-poll", "server:eta"}, "-poll server:eta do not apply"},
		{"existing program id invalid", []string{"run", "-admin-token", "x", "-program-id", "_gala"}, "not a valid program id"},
		{"existing program on compare", []string{"compare", "-admin-token", "x", "-program-id", "gala"}, "flag provided but not defined: -program-id"},
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
		for _, want := range []string{"-users", "-admit-rate", "-rate-schedule", "-paused-for", "-abandon", "-cache-ttl", "-seed", "-arrival", "-timeout", "-json", "-out"} {
			if !strings.Contains(errOut, want) {
				t.Errorf("%s -h lacks %s", cmd, want)
			}
		}
	}
}
