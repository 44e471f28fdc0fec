package loadtest

import (
	"context"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/example/waitingroom/internal/bench"
	"github.com/example/waitingroom/internal/httpapi"
	"github.com/example/waitingroom/internal/memstore"
	"github.com/example/waitingroom/internal/polling"
	"github.com/example/waitingroom/internal/queue"
)

const secret = "secret"

func newServer(t *testing.T) *httptest.Server {
	t.Helper()
	h := httpapi.New(queue.NewService(memstore.New(), polling.DefaultTiers()), httpapi.BearerAuth(secret))
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

// TestRunPausedQueue is the Before/After of the issue on a paused queue of
// 2,000 users: honouring retryAfterMs sends fewer polls than polling every
// 3 s (with a few hundred users it would not: positions ≤ 100 poll every
// second), and no request fails.
func TestRunPausedQueue(t *testing.T) {
	if testing.Short() {
		t.Skip("9 s of virtual users")
	}
	srv := newServer(t)
	sc := bench.Scenario{Users: 2000, Rates: bench.ConstantRate(0), Timeout: 9 * time.Second}
	modes := []Poll{{Fixed: 3 * time.Second}, {}}
	results := make([]bench.Result, len(modes))
	errs := make([]error, len(modes))
	var wg sync.WaitGroup
	for i, m := range modes {
		wg.Go(func() {
			results[i], errs[i] = Run(context.Background(), Config{
				BaseURL: srv.URL, AdminToken: secret, ProgramID: "paused-" + m.String()[:5],
				Scenario: sc, Poll: m,
			})
		})
	}
	wg.Wait()
	for i, r := range results {
		if errs[i] != nil {
			t.Fatalf("%s: %v", modes[i], errs[i])
		}
		t.Logf("%s: entered %d, polls %d, errors %d, p99 latency %.1f ms, routes %v", r.Policy, r.Entered, r.Polls, r.Errors, r.LatencyMs.P99, r.ByRoute)
		if r.Errors != 0 || r.Entered != sc.Users || r.Admitted != 0 {
			t.Errorf("%s: errors %d, entered %d, admitted %d; want 0, %d, 0", r.Policy, r.Errors, r.Entered, r.Admitted, sc.Users)
		}
	}
	before, after := results[0], results[1]
	if after.Polls >= before.Polls {
		t.Errorf("polls: server %d, fixed:3s %d; want server fewer", after.Polls, before.Polls)
	}
	// On an idle machine fixed:3s sends two polls each (3 s and 6 s), about
	// 4,000; server sends about 1,700: positions ≤ 100 eight (every
	// second), ≤ 1,000 one (5 s ± 0.3 s), the rest none. A starved CPU
	// (a -race build beside other tests) delays the enters and trims both,
	// so only the order is asserted.
	if before.Polls < int64(sc.Users) {
		t.Logf("fixed:3s sent only %d polls: the machine was too busy for the counts to mean much", before.Polls)
	}
}

// TestRunDrain admits everyone quickly and checks the notification delay
// against the seed tiers: positions ≤ 100 poll every second, so nobody
// should learn of an admission much more than a second late.
func TestRunDrain(t *testing.T) {
	srv := newServer(t)
	sc := bench.Scenario{Users: 40, Rates: bench.ConstantRate(80), Timeout: 10 * time.Second}
	r, err := Run(context.Background(), Config{BaseURL: srv.URL, AdminToken: secret, ProgramID: "drain", Scenario: sc})
	if err != nil {
		t.Fatal(err)
	}
	if r.Errors != 0 || r.Admitted != sc.Users {
		t.Fatalf("errors %d, admitted %d/%d; routes %v", r.Errors, r.Admitted, sc.Users, r.ByRoute)
	}
	// Everyone admitted within half a second of the last enter: one poll
	// each, at 1 s.
	if r.Polls != int64(sc.Users) || r.Requests != 2*int64(sc.Users) {
		t.Errorf("polls %d, requests %d; want %d, %d", r.Polls, r.Requests, sc.Users, 2*sc.Users)
	}
	if d := r.NotifyDelayMs; d.Count != sc.Users || d.Max > 1200 || d.P50 <= 0 {
		t.Errorf("notify delay %+v; want %d samples in (0, 1.2 s]", d, sc.Users)
	}
	if r.DurationSeconds < 1 || r.DurationSeconds > 3 {
		t.Errorf("duration %.2f s, want about 1 s", r.DurationSeconds)
	}
}

// TestRunPolicyAndAbandon creates the program on eta through the admin
// API (server:eta) and lets half the users leave: every user either left
// (DELETE 204) or was admitted, and nothing failed.
func TestRunPolicyAndAbandon(t *testing.T) {
	tiers, eta := polling.DefaultTiers(), polling.DefaultETA()
	svc := queue.NewService(memstore.New(), tiers, queue.WithPolicies(map[string]polling.Policy{"tiers": tiers, "eta": eta}))
	srv := httptest.NewServer(httpapi.New(svc, httpapi.BearerAuth(secret)))
	t.Cleanup(srv.Close)
	sc := bench.Scenario{Users: 40, Rates: bench.ConstantRate(20), Abandon: 0.5, Timeout: 10 * time.Second}
	r, err := Run(context.Background(), Config{BaseURL: srv.URL, AdminToken: secret, ProgramID: "eta-leave", Scenario: sc, Poll: Poll{Policy: "eta"}, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("left %d, admitted %d, routes %v", r.Left, r.Admitted, r.ByRoute)
	// An abandoner leaves before its predicted admission; on a starved CPU
	// its turn may come first (DELETE 409), and it is admitted instead.
	if r.Errors != 0 || r.Left+r.Admitted != sc.Users || r.Left < 10 || r.Left > 20 {
		t.Errorf("errors %d, left %d, admitted %d; want 0, 10–20, the rest", r.Errors, r.Left, r.Admitted)
	}
	if r.Leaves != r.ByRoute["DELETE leave 204"]+r.ByRoute["DELETE leave 409"] || r.ByRoute["DELETE leave 204"] != int64(r.Left) {
		t.Errorf("leaves %d, left %d, routes %v", r.Leaves, r.Left, r.ByRoute)
	}
	if r.Requests != r.Enters+r.Polls+r.Leaves || r.Policy != "server:eta" {
		t.Errorf("requests %d = %d + %d + %d? policy %q", r.Requests, r.Enters, r.Polls, r.Leaves, r.Policy)
	}
	c, err := svc.Program(context.Background(), "eta-leave")
	if err != nil || c.PollingPolicy != "eta" {
		t.Errorf("program policy %q, %v; want eta", c.PollingPolicy, err)
	}
}

// TestRunSchedule applies a rate schedule through the admin API: admit,
// pause, restart.
func TestRunSchedule(t *testing.T) {
	srv := newServer(t)
	sc := bench.Scenario{Users: 30, Rates: bench.Schedule{{At: 0, Rate: 40}, {At: 300 * time.Millisecond, Rate: 0}, {At: time.Second, Rate: 40}}, Timeout: 10 * time.Second}
	r, err := Run(context.Background(), Config{BaseURL: srv.URL, AdminToken: secret, ProgramID: "schedule", Scenario: sc})
	if err != nil {
		t.Fatal(err)
	}
	if r.Errors != 0 || r.Admitted != sc.Users || r.ByRoute["PUT admin 200"] != 3 || r.AdmitRate != "0s:40,300ms:0,1s:40" {
		t.Errorf("errors %d, admitted %d, rate %s, routes %v; want 0, %d, three admin changes", r.Errors, r.Admitted, r.AdmitRate, r.ByRoute, sc.Users)
	}
}

func TestParsePoll(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Poll
		err  bool
	}{
		{in: "server", want: Poll{}},
		{in: "fixed:3s", want: Poll{Fixed: 3 * time.Second}},
		{in: "fixed:250ms", want: Poll{Fixed: 250 * time.Millisecond}},
		{in: "fixed:0s", err: true},
		{in: "fixed", err: true},
		{in: "tiers", err: true},
		{in: "server:eta", want: Poll{Policy: "eta"}},
		{in: "server:tiers", want: Poll{Policy: "tiers"}},
		{in: "server:", err: true},
		{in: "server:ETA", err: true},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParsePoll(tc.in)
			if (err != nil) != tc.err || got != tc.want {
				t.Fatalf("ParsePoll(%q) = %v, %v", tc.in, got, err)
			}
			if err == nil && got.String() != tc.in {
				t.Errorf("String() = %q", got.String())
			}
		})
	}
}

func TestCheckLoopback(t *testing.T) {
	for _, tc := range []struct {
		url string
		ok  bool
	}{
		{"http://127.0.0.1:3000", true},
		{"http://127.8.9.10", true},
		{"http://localhost:3000/", true},
		{"http://[::1]:3000", true},
		{"https://example.com", false},
		{"http://10.0.0.1:3000", false},
		{"http://192.168.1.2", false},
		{"ftp://127.0.0.1", false},
		{"127.0.0.1:3000", false},
	} {
		t.Run(tc.url, func(t *testing.T) {
			if err := CheckLoopback(tc.url); (err == nil) != tc.ok {
				t.Errorf("CheckLoopback(%q) = %v", tc.url, err)
			}
		})
	}
}

func TestAdmittedAt(t *testing.T) {
	// Counter at 10/s from 0, sampled every 100 ms at +50 ms: floor values.
	var samples []sample
	for i := range 20 {
		at := time.Duration(i)*100*time.Millisecond + 50*time.Millisecond
		samples = append(samples, sample{at: at, admitted: int64(at / (100 * time.Millisecond))})
	}
	for _, tc := range []struct {
		ticket int64
		want   time.Duration
	}{
		// Ticket k is admitted at k×100 ms; the estimate is within 50 ms.
		{ticket: 1, want: 100 * time.Millisecond},
		{ticket: 5, want: 500 * time.Millisecond},
		{ticket: 19, want: 1900 * time.Millisecond},
		{ticket: 21, want: 2100 * time.Millisecond}, // extrapolated
	} {
		got := admittedAt(samples, tc.ticket)
		if d := got - tc.want; d < -50*time.Millisecond || d > 50*time.Millisecond {
			t.Errorf("admittedAt(%d) = %s, want %s ± 50ms", tc.ticket, got, tc.want)
		}
	}
	if got := admittedAt(samples[5:], 1); got != -1 {
		t.Errorf("before the first sample: %s, want -1", got)
	}
	if got := servingAt(samples, 1234*time.Millisecond, 0, false); got < 11 || got > 12 {
		t.Errorf("servingAt(1.234 s) = %d, want 11 or 12", got)
	}
	if got := servingAt(samples, 1234*time.Millisecond, 7, true); got != 7 {
		t.Errorf("servingAt while paused = %d, want 7", got)
	}
}
