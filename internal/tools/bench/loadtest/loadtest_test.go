package loadtest

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/example/waitingroom/internal/api"
	"github.com/example/waitingroom/internal/app"
	"github.com/example/waitingroom/internal/clock"
	"github.com/example/waitingroom/internal/httpapi"
	"github.com/example/waitingroom/internal/polling"
	"github.com/example/waitingroom/internal/queue"
	"github.com/example/waitingroom/internal/tools/bench"
	"github.com/example/waitingroom/internal/tools/bench/simulate"
	"github.com/example/waitingroom/internal/tools/client"
	"github.com/example/waitingroom/internal/tools/localkeys"
	"github.com/example/waitingroom/internal/tools/memstore"
)

const secret = "secret"

// tickets says what a test server does with the "ticket" of token answers.
type tickets int

const (
	// asServed leaves the handler's answers as they are.
	asServed tickets = iota
	// withTicket sets every token answer's ticket from the store (and
	// fails the test if the handler sent a different one).
	withTicket
)

// serverOptions configure newServer.
type serverOptions struct {
	tickets tickets
	// policies registers tiers and eta by name (for -poll server:eta).
	policies bool
	// capacity signs admission passes and caches programs 1 s, as
	// cmd/local does, so that sessions can be ended and slots freed.
	capacity bool
	// fault, when it returns ok, answers a request in the API's place.
	fault func(r *http.Request) (status int, header http.Header, body string, ok bool)
	// clock, when not nil, is the service's clock (queue.WithClock).
	clock clock.Clock
	// after, when not nil, sees each request the API answered, with its
	// body and the answer's status, once the answer is written.
	after func(r *http.Request, body []byte, status int)
}

// testServer is the real API over the in-memory store.
type testServer struct {
	*httptest.Server
	svc *queue.Service
}

func newServer(t *testing.T, o serverOptions) *testServer {
	t.Helper()
	store := memstore.New()
	var svc *queue.Service
	var opts []queue.Option
	if o.policies {
		tiers := polling.DefaultTiers()
		opts = append(opts, queue.WithPolicies(map[string]polling.Policy{"tiers": tiers, "eta": polling.DefaultETA()}))
	}
	if o.capacity {
		opts = append(opts, queue.WithPassSigner(newSigner(t)), queue.WithProgramCache(time.Second))
	}
	if o.clock != nil {
		opts = append(opts, queue.WithClock(o.clock))
	}
	svc = queue.NewService(store, polling.DefaultTiers(), opts...)
	api := httpapi.New(svc, httpapi.BearerAuth(secret))
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if o.after != nil {
			b, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(b))
			sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
			w = sw
			defer func() { o.after(r, b, sw.status) }()
		}
		if o.fault != nil {
			if status, hdr, body, ok := o.fault(r); ok {
				for k, v := range hdr {
					w.Header()[k] = v
				}
				w.WriteHeader(status)
				_, _ = w.Write([]byte(body))
				return
			}
		}
		if o.tickets == asServed || !strings.HasPrefix(r.URL.Path, "/api/v1/queues/") {
			api.ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		api.ServeHTTP(rec, r)
		body := rec.Body.Bytes()
		var ans map[string]any
		if rec.Code < 300 && json.Unmarshal(body, &ans) == nil && ans["tokenId"] != nil {
			tok, err := store.GetToken(r.Context(), ans["tokenId"].(string))
			if err != nil {
				t.Errorf("token of an answer: %v", err)
			}
			if sent, ok := ans["ticket"].(float64); ok && int64(sent) != tok.Ticket {
				t.Errorf("the server answered ticket %v for token %s, the store holds %d", sent, tok.ID, tok.Ticket)
			}
			ans["ticket"] = tok.Ticket
			body, _ = json.Marshal(ans)
		}
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.Header().Del("Content-Length")
		w.WriteHeader(rec.Code)
		_, _ = w.Write(body)
	})
	srv := &testServer{Server: httptest.NewServer(h), svc: svc}
	t.Cleanup(srv.Close)
	return srv
}

// checkTotals asserts that the counts of r add up: the routes sum to the
// queue requests plus the admin requests, and the failed routes to the
// errors of each.
func checkTotals(t *testing.T, r bench.Result) {
	t.Helper()
	var all, queueErrs, adminErrs int64
	for key, n := range r.ByRoute {
		all += n
		f := strings.Fields(key) // METHOD route status
		failed := f[2] == "error" || f[2] >= "4" && key != "DELETE leave 409"
		admin := client.Op(f[0] + " " + f[1]).Admin()
		switch {
		case failed && admin:
			adminErrs += n
		case failed:
			queueErrs += n
		}
	}
	if all != r.Requests+r.AdminRequests || queueErrs != r.Errors || adminErrs != r.AdminErrors || r.Requests != r.Enters+r.Polls+r.Leaves+r.SessionEnds+r.Challenges {
		t.Errorf("routes sum to %d, requests %d + admin %d; failed routes %d and %d, errors %d and admin errors %d; enters %d + polls %d + leaves %d + session ends %d; routes %v",
			all, r.Requests, r.AdminRequests, queueErrs, adminErrs, r.Errors, r.AdminErrors, r.Enters, r.Polls, r.Leaves, r.SessionEnds, r.ByRoute)
	}
}

// TestRunPausedQueue is the Before/After of the issue on a paused queue of
// 2,000 users, each given 9 s of its own virtual time: polling every 3 s
// sends exactly two polls each (at 3 s and 6 s); honouring retryAfterMs
// sends eight for positions ≤ 100 (every second), one for positions ≤
// 1,000 (5 s ± 0.3 s) and none beyond (15 s): fewer a person, and no
// request fails. Every user gets in, whatever the machine.
func TestRunPausedQueue(t *testing.T) {
	t.Parallel()
	srv := newServer(t, serverOptions{})
	const window = 9 * time.Second
	sc := bench.Scenario{Users: 2000, Rates: bench.ConstantRate(0), Timeout: virtualTimeout}
	modes := []Poll{{Fixed: 3 * time.Second}, {}}
	wantPolls := []int64{2 * 2000, 100*8 + 900*1}
	results := make([]bench.Result, len(modes))
	clocks := make([]*vclock, len(modes))
	errs := make([]error, len(modes))
	var wg sync.WaitGroup
	for i, m := range modes {
		vc := newVClock()
		var mu sync.Mutex
		spent := map[int]time.Duration{}
		// A user's wait that would end at or past its 9 s ends its run.
		vc.onSleep = func(ctx context.Context, w vwait) error {
			if w.d <= 0 {
				return nil
			}
			mu.Lock()
			defer mu.Unlock()
			if spent[w.user]+w.d >= window {
				return context.DeadlineExceeded
			}
			spent[w.user] += w.d
			return nil
		}
		clocks[i] = vc
		wg.Go(func() {
			results[i], errs[i] = Run(hangGuard(t), Config{
				BaseURL: srv.URL, AdminToken: secret, ProgramID: "paused-" + m.String()[:5],
				Scenario: sc, Poll: m, Clock: vc,
			})
		})
	}
	wg.Wait()
	for i, r := range results {
		if errs[i] != nil {
			t.Fatalf("%s: %v", modes[i], errs[i])
		}
		t.Logf("%s: entered %d, polls %d, errors %d, routes %v", r.Policy, r.Entered, r.Polls, r.Errors, r.ByRoute)
		if r.Errors != 0 || r.Entered != sc.Users || r.Admitted != 0 || r.Polls != wantPolls[i] {
			t.Errorf("%s: errors %d, entered %d, admitted %d, polls %d; want 0, %d, 0, %d", r.Policy, r.Errors, r.Entered, r.Admitted, r.Polls, sc.Users, wantPolls[i])
		}
		checkTotals(t, r)
	}
	for u, ds := range clocks[0].byUser() {
		if want := []time.Duration{3 * time.Second, 3 * time.Second, 3 * time.Second}; !cmp.Equal(ds, want) {
			t.Errorf("fixed:3s user %d waited %v, want %v (the third one past the window)", u, ds, want)
			break
		}
	}
	before, after := results[0], results[1]
	if after.Polls*int64(before.Entered) >= before.Polls*int64(after.Entered) {
		t.Errorf("polls: server %d for %d people, fixed:3s %d for %d; want server fewer a person", after.Polls, after.Entered, before.Polls, before.Entered)
	}
}

// TestRunDrain admits everyone quickly and checks the notification delay
// against the seed tiers: positions ≤ 100 poll every second, so nobody
// learns of an admission more than a second late. The polls wait until
// the rate is applied, and the server's clock is then a second on.
func TestRunDrain(t *testing.T) {
	t.Parallel()
	vc := newVClock()
	after, admitting := onRateApplied(func() { vc.Advance(time.Second) })
	vc.onSleep = hold(admitting)
	srv := newServer(t, serverOptions{tickets: withTicket, clock: vc, after: after})
	sc := bench.Scenario{Users: 40, Rates: bench.ConstantRate(80), Timeout: virtualTimeout}
	r, err := Run(hangGuard(t), Config{BaseURL: srv.URL, AdminToken: secret, ProgramID: "drain", Scenario: sc, Clock: vc})
	if err != nil {
		t.Fatal(err)
	}
	if r.Errors != 0 || r.Admitted != sc.Users {
		t.Fatalf("errors %d, admitted %d/%d; routes %v", r.Errors, r.Admitted, sc.Users, r.ByRoute)
	}
	// Everyone admitted by the one poll each, at 1 s.
	if r.Polls != int64(sc.Users) || r.Requests != 2*int64(sc.Users) {
		t.Errorf("polls %d, requests %d; want %d, %d", r.Polls, r.Requests, sc.Users, 2*sc.Users)
	}
	for u, ds := range vc.byUser() {
		if !cmp.Equal(ds, []time.Duration{time.Second}) {
			t.Errorf("user %d waited %v, want the tier's 1s", u, ds)
		}
	}
	if d := r.NotifyDelayMs; d.Count != sc.Users || d.Max > 1000 || d.P50 <= 0 {
		t.Errorf("notify delay %+v; want %d samples in (0, 1 s]", d, sc.Users)
	}
	// Each wait runs from the enter, sent at the start, to the ADMITTED answer at 1 s.
	if want := (bench.Percentiles{Count: sc.Users, P50: 1000, P95: 1000, P99: 1000, Max: 1000}); r.WaitMs == nil || *r.WaitMs != want {
		t.Errorf("waits %+v, want %+v", r.WaitMs, want)
	}
	if r.DurationSeconds != 1 {
		t.Errorf("duration %g s, want 1 s", r.DurationSeconds)
	}
	if r.AdminRequests < 3 || r.AdminErrors != 0 {
		t.Errorf("admin requests %d, admin errors %d; want ≥ 3 (create, rate, samples), 0", r.AdminRequests, r.AdminErrors)
	}
	// Every ticket was issued at the same instant of the server's clock.
	if r.Gaps != 0 || r.DuplicateTickets != 0 || r.ThrottledEnters != 0 || r.MaxInversionMs != 0 || r.ProgramItemWritesPerSecondMax != nil {
		t.Errorf("gaps %d, duplicates %d, throttled %d, max inversion %g ms, program writes %v; want 0, 0, 0, 0, absent (no partition model)",
			r.Gaps, r.DuplicateTickets, r.ThrottledEnters, r.MaxInversionMs, r.ProgramItemWritesPerSecondMax)
	}
	if r.EntersPerSecondPeak != int64(sc.Users) {
		t.Errorf("enters/s peak %d, want the burst's %d in its one second", r.EntersPerSecondPeak, sc.Users)
	}
	checkTotals(t, r)
}

// hold returns an onSleep that holds every positive wait until ready is
// closed, without moving the clock.
func hold(ready <-chan struct{}) func(context.Context, vwait) error {
	return func(ctx context.Context, w vwait) error {
		if w.d <= 0 {
			return nil
		}
		select {
		case <-ready:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// TestRunPolicyAndAbandon creates the program on eta through the admin
// API (server:eta) and lets half the users leave: the queue stays paused
// until every abandoner has left (the rate change waits for their DELETEs),
// so that exactly the users the seed draws leave (204, never 409), and
// the others are admitted; nothing fails.
func TestRunPolicyAndAbandon(t *testing.T) {
	t.Parallel()
	sc := bench.Scenario{Users: 40, Rates: bench.Schedule{{At: 0, Rate: 0}, {At: time.Minute, Rate: 20}}, Abandon: 0.5, Timeout: virtualTimeout}
	const seed = 3
	leavers := 0
	for _, f := range sc.Leaving(seed) {
		if f >= 0 {
			leavers++
		}
	}
	if leavers < 10 || leavers > 30 {
		t.Fatalf("seed %d draws %d leavers of %d", seed, leavers, sc.Users)
	}
	vc := newVClock()
	after, allLeft := onNth(http.MethodDelete, http.StatusNoContent, leavers, nil)
	// The users' waits pass at once; the rate change waits for the leaves.
	vc.onSleep = func(ctx context.Context, w vwait) error {
		if w.user < 0 {
			select {
			case <-allLeft:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return vc.Fake.Sleep(ctx, w.d)
	}
	srv := newServer(t, serverOptions{policies: true, tickets: withTicket, clock: vc, after: after})
	r, err := Run(hangGuard(t), Config{BaseURL: srv.URL, AdminToken: secret, ProgramID: "eta-leave", Scenario: sc, Poll: Poll{Policy: "eta"}, Seed: seed, Clock: vc})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("left %d, admitted %d, routes %v", r.Left, r.Admitted, r.ByRoute)
	if r.Errors != 0 || r.Left != leavers || r.Admitted != sc.Users-leavers {
		t.Errorf("errors %d, left %d, admitted %d; want 0, %d, %d", r.Errors, r.Left, r.Admitted, leavers, sc.Users-leavers)
	}
	if r.Leaves != r.ByRoute["DELETE leave 204"] || r.ByRoute["DELETE leave 204"] != int64(r.Left) || r.ByRoute["DELETE leave 409"] != 0 {
		t.Errorf("leaves %d, left %d, routes %v", r.Leaves, r.Left, r.ByRoute)
	}
	if r.Policy != "server:eta" {
		t.Errorf("policy %q", r.Policy)
	}
	checkTotals(t, r)
	c, err := srv.svc.Program(context.Background(), "eta-leave")
	if err != nil || c.Policy != "eta" {
		t.Errorf("program policy %q, %v; want eta", c.Policy, err)
	}
}

// putRecorder returns a serverOptions.after hook that records the bodies
// of the admin PUTs answered, and closes the returned channel once the
// n-th PUT setting a rate unpaused is answered.
func putRecorder(n int, hold <-chan struct{}) (after func(*http.Request, []byte, int), puts func() []string, done <-chan struct{}) {
	var mu sync.Mutex
	var bodies []string
	rates := 0
	ch := make(chan struct{})
	after = func(r *http.Request, body []byte, status int) {
		if r.Method != http.MethodPut {
			return
		}
		mu.Lock()
		bodies = append(bodies, string(body))
		last := false
		if status == http.StatusOK && containsRate(body) {
			if rates++; rates == n {
				close(ch)
				last = true
			}
		}
		mu.Unlock()
		if last && hold != nil {
			select { // the answer waits (the handler has not returned)
			case <-hold:
			case <-r.Context().Done():
			}
		}
	}
	puts = func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(bodies)
	}
	return after, puts, ch
}

// runScheduled runs sc on a virtual clock whose users wait until the
// admin API has answered the schedule's first opens PUTs that let people
// in; with holdLast, the answer to the opens-th waits until every user is
// done (the run ends with that change in flight). It returns the result,
// the PUT bodies and the clock.
func runScheduled(t *testing.T, program string, sc bench.Scenario, opens int, holdLast bool) (bench.Result, func() []string, *vclock) {
	t.Helper()
	vc := newVClock()
	var hold chan struct{}
	var track func(int)
	if holdLast {
		hold = make(chan struct{})
		var mu sync.Mutex
		live := 0
		track = func(delta int) {
			mu.Lock()
			defer mu.Unlock()
			if live += delta; live == 0 {
				close(hold)
			}
		}
	}
	after, puts, opened := putRecorder(opens, hold)
	users := vc.after(opened)
	vc.onSleep = func(ctx context.Context, w vwait) error {
		if w.user < 0 {
			return vc.Fake.Sleep(ctx, w.d)
		}
		return users(ctx, w)
	}
	srv := newServer(t, serverOptions{clock: vc, after: after})
	r, err := Run(hangGuard(t), Config{BaseURL: srv.URL, AdminToken: secret, ProgramID: program, Scenario: sc, Clock: vc, Track: track})
	if err != nil {
		t.Fatal(err)
	}
	return r, puts, vc
}

// TestRunSchedule applies a rate schedule through the admin API: admit,
// pause at 300 ms, restart at 1 s, each change after its requested wait
// on the run's clock; the users' polls wait for the restart, and the
// restart's answer arrives only once every user is done: the run counts
// it all the same.
func TestRunSchedule(t *testing.T) {
	t.Parallel()
	sc := bench.Scenario{Users: 30, Rates: bench.Schedule{{At: 0, Rate: 40}, {At: 300 * time.Millisecond, Rate: 0}, {At: time.Second, Rate: 40}}, Timeout: virtualTimeout}
	r, puts, vc := runScheduled(t, "schedule", sc, 2, true)
	if r.Errors != 0 || r.Admitted != sc.Users || r.ByRoute["PUT admin 200"] != 3 || r.AdmitRate != "0s:40,300ms:0,1s:40" {
		t.Errorf("errors %d, admitted %d, rate %s, routes %v; want 0, %d, three admin changes", r.Errors, r.Admitted, r.AdmitRate, r.ByRoute, sc.Users)
	}
	wantPuts := []string{`{"paused":true}`, `{"admissionRatePerSecond":40,"paused":false}`, `{"paused":true}`, `{"admissionRatePerSecond":40,"paused":false}`}
	if d := cmp.Diff(wantPuts, puts()); d != "" {
		t.Errorf("admin PUTs (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]time.Duration{300 * time.Millisecond, 700 * time.Millisecond}, vc.of(-1)); d != "" {
		t.Errorf("the schedule's waits (-want +got):\n%s", d)
	}
	checkTotals(t, r)
}

// TestRunPausedFor: a program made paused gets its rate while paused,
// then a resume after the pause's 300 ms, as an operator prepares an
// on-sale.
func TestRunPausedFor(t *testing.T) {
	t.Parallel()
	sc := bench.Scenario{Users: 20, Rates: bench.PausedFor(40, 300*time.Millisecond), Timeout: virtualTimeout}
	r, puts, vc := runScheduled(t, "presale", sc, 1, false)
	want := []string{`{"paused":true}`, `{"admissionRatePerSecond":40,"paused":true}`, `{"admissionRatePerSecond":40,"paused":false}`}
	if d := cmp.Diff(want, puts()); d != "" || r.Errors != 0 || r.Admitted != sc.Users || r.AdmitRate != "0s:40:paused,300ms:40" {
		t.Errorf("errors %d, admitted %d, rate %s; admin PUTs (-want +got):\n%s", r.Errors, r.Admitted, r.AdmitRate, d)
	}
	if d := cmp.Diff([]time.Duration{300 * time.Millisecond}, vc.of(-1)); d != "" {
		t.Errorf("the schedule's waits (-want +got):\n%s", d)
	}
	checkTotals(t, r)
}

// TestRunExisting fills a program the operator made and runs: the run
// changes none of its settings (no PUT) and its people are admitted by the
// operator's admissions alone, made once the 20th enter is answered; the
// polls wait for it.
func TestRunExisting(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sc := bench.Scenario{Users: 20, Rates: bench.ConstantRate(50), Timeout: virtualTimeout}
	var srv *testServer
	after, admitted := onNth(http.MethodPost, http.StatusCreated, sc.Users, func() {
		if _, err := srv.svc.Admit(ctx, "gala", int64(sc.Users)); err != nil {
			t.Error(err)
		}
	})
	srv = newServer(t, serverOptions{tickets: withTicket, after: after})
	rate, paused := 0.0, false
	if _, _, err := srv.svc.PutProgram(ctx, "gala", api.ProgramSettings{AdmissionRatePerSecond: new(api.Rate(rate)), Paused: &paused}); err != nil {
		t.Fatal(err)
	}
	vc := newVClock()
	vc.onSleep = vc.after(admitted)
	r, err := Run(hangGuard(t), Config{BaseURL: srv.URL, AdminToken: secret, ProgramID: "gala", Existing: true, Scenario: sc, Clock: vc})
	if err != nil {
		t.Fatal(err)
	}
	if r.Errors != 0 || r.Admitted != sc.Users || r.Polls != int64(sc.Users) || r.ByRoute["PUT admin 200"]+r.ByRoute["PUT admin 201"] != 0 || r.ByRoute["GET admin 200"] == 0 || r.AdmitRate != "by the operator" {
		t.Errorf("errors %d, admitted %d/%d, polls %d, admission %q, routes %v; want no PUT, one poll each and the operator's admission", r.Errors, r.Admitted, sc.Users, r.Polls, r.AdmitRate, r.ByRoute)
	}
	if c, err := srv.svc.Program(ctx, "gala"); err != nil || c.Rate != 0 || c.Paused {
		t.Errorf("program after the run: %+v, %v; want its settings untouched", c, err)
	}
	checkTotals(t, r)

	for _, cfg := range []Config{
		{ProgramID: "nope", Existing: true},
		{ProgramID: "gala", Existing: true, Poll: Poll{Policy: "eta"}},
	} {
		cfg.BaseURL, cfg.AdminToken, cfg.Scenario = srv.URL, secret, bench.Scenario{Users: 1, Rates: bench.ConstantRate(1), Timeout: 2 * time.Second}
		cfg.Clock = newVClock()
		if _, err := Run(hangGuard(t), cfg); err == nil {
			t.Errorf("%+v: no error", cfg)
		}
	}
}

func TestParsePoll(t *testing.T) {
	t.Parallel()
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
		{in: "admission", want: Poll{AtAdmission: true}},
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
	t.Parallel()
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
	t.Parallel()
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
}

// apiError writes an answer in the API's error shape.
func apiError(status int, code string, header http.Header) (int, http.Header, string, bool) {
	if header == nil {
		header = http.Header{}
	}
	header.Set("Content-Type", "application/json")
	return status, header, `{"code":"` + code + `","message":"Injected by the test."}`, true
}

// TestRunRetries fails each user's first enter with 503 (Retry-After in
// seconds for some, as an HTTP-date against the answer's Date for the
// others) and its first poll with API Gateway's 429: every enter is sent
// again with the same Idempotency-Key after exactly the 2 s Retry-After
// asks, every poll after its 1 s, and everyone is admitted. The polls
// wait until the rate is applied.
func TestRunRetries(t *testing.T) {
	t.Parallel()
	type attempt struct{ failed bool }
	vc := newVClock()
	var mu sync.Mutex
	enters := map[string][]attempt{} // by Idempotency-Key
	polls := map[string][]attempt{}  // by token
	after, admitting := onRateApplied(nil)
	srv := newServer(t, serverOptions{clock: vc, after: after, fault: func(r *http.Request) (int, http.Header, string, bool) {
		if !strings.HasPrefix(r.URL.Path, "/api/v1/queues/") {
			return 0, nil, "", false
		}
		mu.Lock()
		defer mu.Unlock()
		switch r.Method {
		case http.MethodPost:
			key := r.Header.Get("Idempotency-Key")
			first := len(enters[key]) == 0
			enters[key] = append(enters[key], attempt{first})
			if !first {
				return 0, nil, "", false
			}
			if len(enters)%2 == 0 {
				return apiError(http.StatusServiceUnavailable, "STORE_UNAVAILABLE", http.Header{"Retry-After": {"2"}})
			}
			// A Date far from the bench's clock: the delay is taken from it.
			date := time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)
			return apiError(http.StatusServiceUnavailable, "STORE_UNAVAILABLE", http.Header{
				"Retry-After": {date.Add(2 * time.Second).Format(http.TimeFormat)}, "Date": {date.Format(http.TimeFormat)}})
		case http.MethodGet:
			tok := r.Header.Get("X-Queue-Token")
			first := len(polls[tok]) == 0
			polls[tok] = append(polls[tok], attempt{first})
			if first {
				return http.StatusTooManyRequests, http.Header{"Retry-After": {"1"}}, `{"message":"Too Many Requests"}`, true
			}
		}
		return 0, nil, "", false
	}})
	// A user's first wait is its enter's retry (the burst's admission
	// starts once everyone is in); the others wait for the rate.
	var waitMu sync.Mutex
	waited := map[int]bool{}
	polling := vc.after(admitting)
	vc.onSleep = func(ctx context.Context, w vwait) error {
		if w.d <= 0 {
			return nil
		}
		waitMu.Lock()
		first := w.user >= 0 && !waited[w.user]
		waited[w.user] = true
		waitMu.Unlock()
		if first {
			return vc.Fake.Sleep(ctx, w.d)
		}
		return polling(ctx, w)
	}
	sc := bench.Scenario{Users: 30, Rates: bench.ConstantRate(60), Timeout: virtualTimeout}
	r, err := Run(hangGuard(t), Config{BaseURL: srv.URL, AdminToken: secret, ProgramID: "retries", Scenario: sc, Clock: vc})
	if err != nil {
		t.Fatal(err)
	}
	if r.Admitted != sc.Users || r.ByRoute["POST enter 503"] != int64(sc.Users) || r.ByRoute["GET poll 429"] != int64(sc.Users) || r.Errors != 2*int64(sc.Users) {
		t.Errorf("admitted %d, errors %d, routes %v; want %d admitted, one 503 enter and one 429 poll each", r.Admitted, r.Errors, r.ByRoute, sc.Users)
	}
	// The 429 carries no code.
	if want := map[string]int64{"STORE_UNAVAILABLE": int64(sc.Users)}; !cmp.Equal(r.ErrorCodes, want) {
		t.Errorf("error codes %v, want %v", r.ErrorCodes, want)
	}
	checkTotals(t, r)
	// Each user: the enter's Retry-After, the tier's interval, the poll's
	// Retry-After; then admitted.
	want := []time.Duration{2 * time.Second, time.Second, time.Second}
	byUser := vc.byUser()
	if len(byUser) != sc.Users {
		t.Errorf("%d users waited, want %d", len(byUser), sc.Users)
	}
	for u, ds := range byUser {
		if !cmp.Equal(ds, want) {
			t.Errorf("user %d waited %v, want %v", u, ds, want)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(enters) != sc.Users {
		t.Errorf("%d idempotency keys for %d users", len(enters), sc.Users)
	}
	for key, as := range enters {
		if len(key) < 16 || len(as) != 2 || !as[0].failed || as[1].failed {
			t.Errorf("key %q: enters %v; want a retry with the same key after the 503", key, as)
		}
	}
	for tok, as := range polls {
		if len(as) != 2 || !as[0].failed {
			t.Errorf("token %s: polls %v; want one retry after the 429", tok, as)
		}
	}
}

// TestRunRetryAfterBeyondDeadline: a Retry-After that ends past the run's
// deadline is not waited for; the users give up at once, without a wait.
func TestRunRetryAfterBeyondDeadline(t *testing.T) {
	t.Parallel()
	srv := newServer(t, serverOptions{fault: func(r *http.Request) (int, http.Header, string, bool) {
		if r.Method != http.MethodPost || !strings.HasPrefix(r.URL.Path, "/api/v1/queues/") {
			return 0, nil, "", false
		}
		return apiError(http.StatusServiceUnavailable, "STORE_UNAVAILABLE", http.Header{"Retry-After": {"3600"}})
	}})
	sc := bench.Scenario{Users: 10, Rates: bench.ConstantRate(10), Timeout: 30 * time.Second}
	vc := newVClock()
	r, err := Run(hangGuard(t), Config{BaseURL: srv.URL, AdminToken: secret, ProgramID: "deadline", Scenario: sc, Clock: vc})
	if err != nil {
		t.Fatal(err)
	}
	if r.Entered != 0 || r.Errors != int64(sc.Users) || r.Enters != int64(sc.Users) {
		t.Errorf("entered %d, errors %d, enters %d; want each user to give up after its one 503", r.Entered, r.Errors, r.Enters)
	}
	if ws := vc.byUser(); len(ws) != 0 {
		t.Errorf("users waited %v; want no wait for a Retry-After past the deadline", ws)
	}
	checkTotals(t, r)
}

// TestRunAdminErrors fails every other counter sample and the first try of
// the rate change (503 BUSY with Retry-After): the change is sent again
// after the 1 s asked, everyone is admitted, and the admin failures are
// counted apart from the queue requests' errors.
func TestRunAdminErrors(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var gets, puts, injected int
	vc := newVClock()
	vc.samples = 5 // six counter samples: every other fails
	after, admitting := onRateApplied(nil)
	polling := vc.after(admitting)
	vc.onSleep = func(ctx context.Context, w vwait) error {
		if w.user < 0 {
			return vc.Fake.Sleep(ctx, w.d)
		}
		return polling(ctx, w)
	}
	srv := newServer(t, serverOptions{clock: vc, after: after, fault: func(r *http.Request) (int, http.Header, string, bool) {
		if !strings.HasPrefix(r.URL.Path, "/api/v1/admin/") {
			return 0, nil, "", false
		}
		mu.Lock()
		defer mu.Unlock()
		switch r.Method {
		case http.MethodGet:
			gets++
			if gets%2 == 0 {
				injected++
				return apiError(http.StatusServiceUnavailable, "STORE_UNAVAILABLE", http.Header{"Retry-After": {"1"}})
			}
		case http.MethodPut:
			puts++
			if puts == 2 {
				injected++
				return apiError(http.StatusServiceUnavailable, "BUSY", http.Header{"Retry-After": {"1"}})
			}
		}
		return 0, nil, "", false
	}})
	sc := bench.Scenario{Users: 20, Rates: bench.ConstantRate(50), Timeout: virtualTimeout}
	r, err := Run(hangGuard(t), Config{BaseURL: srv.URL, AdminToken: secret, ProgramID: "admin-errors", Scenario: sc, Clock: vc})
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if r.Admitted != sc.Users || r.Errors != 0 || r.AdminErrors != int64(injected) || r.ByRoute["PUT admin 503"] != 1 || r.ByRoute["PUT admin 200"] != 1 {
		t.Errorf("admitted %d, errors %d, admin errors %d (injected %d), routes %v", r.Admitted, r.Errors, r.AdminErrors, injected, r.ByRoute)
	}
	if r.AdminRequests != int64(gets+puts) {
		t.Errorf("admin requests %d, the server saw %d", r.AdminRequests, gets+puts)
	}
	if d := cmp.Diff([]time.Duration{time.Second}, vc.of(-1)); d != "" {
		t.Errorf("the runner's waits (-want +got):\n%s", d)
	}
	checkTotals(t, r)
}

// TestRunTicket: users who arrive while admission runs get their ticket
// from the enter answer, and every admitted user has a notification
// delay. (That the delay is timed on the right base is TestResultTicket's.)
func TestRunTicket(t *testing.T) {
	t.Parallel()
	vc := newVClock()
	srv := newServer(t, serverOptions{tickets: withTicket, clock: vc})
	sc := bench.Scenario{Users: 30, Arrival: bench.Arrival{Over: 1500 * time.Millisecond}, Rates: bench.ConstantRate(40), Timeout: virtualTimeout}
	r, err := Run(hangGuard(t), Config{BaseURL: srv.URL, AdminToken: secret, ProgramID: "ticket", Scenario: sc, Clock: vc})
	if err != nil {
		t.Fatal(err)
	}
	if r.Admitted != sc.Users || r.NotifyDelayMs.Count != sc.Users || r.Errors != 0 {
		t.Errorf("admitted %d, notify delay %+v, errors %d", r.Admitted, r.NotifyDelayMs, r.Errors)
	}
	checkTotals(t, r)
}

// TestResultTicket: the notify delay is timed from the ticket the enter
// answered, clamped to the last WAITING answer.
func TestResultTicket(t *testing.T) {
	t.Parallel()
	// The counter at 10/s from 0, sampled every 100 ms at +50 ms.
	var samples []sample
	for i := range 40 {
		at := time.Duration(i)*100*time.Millisecond + 50*time.Millisecond
		samples = append(samples, sample{at: at, admitted: int64(at / (100 * time.Millisecond))})
	}
	r := &runner{cfg: Config{Scenario: bench.Scenario{Users: 2, Arrival: bench.Arrival{Over: 3 * time.Second}, Rates: bench.ConstantRate(10), Timeout: 10 * time.Second}}, samples: samples}
	// Both entered at 1.2 s, were told WAITING at 1.9 s and ADMITTED at
	// 2.05 s. The first holds ticket 20, admitted at 2.0 s: 50 ms; the
	// second ticket 15, admitted at 1.5 s, clamped to the last WAITING,
	// 1.9 s: 150 ms.
	u := user{entered: true, admitted: true, ticket: 20, enterAt: 1200 * time.Millisecond, lastWaiting: 1900 * time.Millisecond, seenAt: 2050 * time.Millisecond}
	early := u
	early.ticket = 15
	res := r.result([]user{u, early}, 3*time.Second)
	if res.NotifyDelayMs.Count != 2 {
		t.Fatalf("delays %+v", res.NotifyDelayMs)
	}
	if lo, hi := res.NotifyDelayMs.P50, res.NotifyDelayMs.Max; lo < 0 || lo > 60 || hi != 150 {
		t.Errorf("delays %.1f and %.1f ms; want about 50 (ticket 20) and 150 (ticket 15, clamped)", lo, hi)
	}
}

// TestRunSolvesChallenges: on a program that asks for a proof of work, a
// run solves one per user before its enter, counts them and their time,
// and every user gets in without a refused enter.
func TestRunSolvesChallenges(t *testing.T) {
	t.Parallel()
	vc := newVClock()
	srv := newServer(t, serverOptions{clock: vc})
	ctx := hangGuard(t)
	if _, _, err := srv.svc.PutProgram(ctx, "guarded", api.ProgramSettings{AdmissionRatePerSecond: new(api.Rate(100)), ChallengeBits: new(int64(8))}); err != nil {
		t.Fatal(err)
	}
	sc := bench.Scenario{Users: 10, Rates: bench.ConstantRate(100), Timeout: virtualTimeout}
	r, err := Run(ctx, Config{BaseURL: srv.URL, AdminToken: secret, ProgramID: "guarded", Existing: true, Scenario: sc, Clock: vc})
	if err != nil {
		t.Fatal(err)
	}
	if r.Errors != 0 || r.Admitted != sc.Users || r.ChallengeSolves != int64(sc.Users) || r.Challenges != int64(sc.Users) || r.ChallengeSolveMs <= 0 {
		t.Errorf("errors %d, admitted %d/%d, challenges %d, solves %d in %g ms; want every user in with one proof each, no error",
			r.Errors, r.Admitted, sc.Users, r.Challenges, r.ChallengeSolves, r.ChallengeSolveMs)
	}
	checkTotals(t, r)
}

// newSigner signs passes with a fresh local key, as cmd/local does.
func newSigner(t *testing.T) queue.PassSigner {
	t.Helper()
	key, err := localkeys.Generate()
	if err != nil {
		t.Fatal(err)
	}
	iss, err := localkeys.FixedIssuer("http://127.0.0.1", key)
	if err != nil {
		t.Fatal(err)
	}
	return app.Signer(iss)
}

// TestRunCapacity plays issue 19's crowd on a small cap: every user either
// comes (and the site ends their session) or stops polling before their
// admission; never more than the cap active at once, by the users' count
// or the server's; every freed slot reused while people wait; and the
// counters agree with the crowd.
func TestRunCapacity(t *testing.T) {
	t.Parallel()
	vc := newVClock()
	srv := newServer(t, serverOptions{capacity: true, tickets: withTicket, clock: vc})
	capy := &bench.Crowd{MaxActive: 6, NoShowSeconds: 5, NoShow: 0.3, Session: bench.Range{Min: time.Second, Max: 2 * time.Second}}
	sc := bench.Scenario{Users: 20, Arrival: bench.Arrival{Over: 2 * time.Second}, Rates: bench.ConstantRate(10), Timeout: virtualTimeout}
	// The users and the counter sampling (every 100 ms) play on a clock
	// that moves only when all of them wait.
	track := newDriver(vc, sc.Users, 1)
	r, err := Run(hangGuard(t), Config{BaseURL: srv.URL, AdminToken: secret, ProgramID: "capped", Scenario: sc, Seed: 5, Crowd: capy, Clock: vc, Track: track})
	if err != nil {
		t.Fatal(err)
	}
	k := r.Capacity
	if k == nil {
		t.Fatal("no capacity result")
	}
	t.Logf("capacity %+v; routes %v", *k, r.ByRoute)
	if r.Errors != 0 || r.AdminErrors != 0 || r.Entered != sc.Users {
		t.Fatalf("errors %d, admin errors %d, entered %d/%d; routes %v", r.Errors, r.AdminErrors, r.Entered, sc.Users, r.ByRoute)
	}
	// Every user served: came and ended their session, or never came.
	if k.Showed+k.NoShows != int64(sc.Users) || k.SessionsEnded != k.Showed || k.NoShows != 6-k.NoShowsSeen || k.Expired != 0 || k.MissingPasses != 0 || k.EndErrors != 0 {
		t.Errorf("showed %d, no-shows %d (seen anyway %d), ended %d, expired %d, missing passes %d, end errors %d; want %d in all, 6 no-shows, every session ended",
			k.Showed, k.NoShows, k.NoShowsSeen, k.SessionsEnded, k.Expired, k.MissingPasses, k.EndErrors, sc.Users)
	}
	if k.MostActive > capy.MaxActive || k.PeakActiveCounter > capy.MaxActive {
		t.Errorf("peak active: users' view %d, counter %d; the cap is %d", k.MostActive, k.PeakActiveCounter, capy.MaxActive)
	}
	if k.MostActive < 2 {
		t.Errorf("peak active %d: the cap was never approached", k.MostActive)
	}
	// A slot freed is refilled a fold and a change delay (2 s) later, on
	// the run's clock.
	if k.NotReused != 0 || k.SlotReuseMs == nil || k.SlotReuseMs.Count == 0 || k.SlotReuseMs.Max > 10_000 {
		t.Errorf("reuse %+v, not reused %d; want every slot reused within 10 s", k.SlotReuseMs, k.NotReused)
	}
	if k.ServerEnded > k.SessionsEnded || k.ServerNoShows > k.NoShows {
		t.Errorf("the server counted %d ended sessions and %d no-shows, the users %d and %d", k.ServerEnded, k.ServerNoShows, k.SessionsEnded, k.NoShows)
	}
	if k.Ratio < 1 || k.BoundMs <= 0 {
		t.Errorf("duration %.0f ms against the bound %.0f ms: ratio %.2f, want ≥ 1", k.DurationMs, k.BoundMs, k.Ratio)
	}
	checkTotals(t, r)
}

// TestRunAtAdmission: in the admission mode each user of a burst polls
// once its ticket is due, not while the queue is paused, so that its polls
// are first sightings; every first ADMITTED answer's pass reaches OnPass,
// once a user, and the seen series counts them.
func TestRunAtAdmission(t *testing.T) {
	t.Parallel()
	vc := newVClock()
	after, admitting := onRateApplied(nil)
	// The clock moves once the rate is applied and every user has asked
	// for its first wait (so that each asked from the start of admission).
	var mu0 sync.Mutex
	asked := 0
	allAsked := make(chan struct{})
	polling := vc.after(admitting)
	vc.onSleep = func(ctx context.Context, w vwait) error {
		if w.d <= 0 {
			return nil
		}
		mu0.Lock()
		if asked++; asked == 200 {
			close(allAsked)
		}
		mu0.Unlock()
		select {
		case <-allAsked:
		case <-ctx.Done():
			return ctx.Err()
		}
		return polling(ctx, w)
	}
	srv := newServer(t, serverOptions{tickets: withTicket, capacity: true, clock: vc, after: after})
	sc := bench.Scenario{Users: 200, Rates: bench.ConstantRate(400), Timeout: virtualTimeout}
	var mu sync.Mutex
	passes := map[string]int{}
	r, err := Run(hangGuard(t), Config{BaseURL: srv.URL, AdminToken: secret, ProgramID: "due", Scenario: sc, Clock: vc,
		Poll: Poll{AtAdmission: true}, CacheTTL: 2 * time.Second, OnPass: func(p string) {
			mu.Lock()
			defer mu.Unlock()
			passes[p]++
		}})
	if err != nil {
		t.Fatal(err)
	}
	if r.Errors != 0 || r.Admitted != sc.Users || r.Passes != int64(sc.Users) || len(passes) != sc.Users {
		t.Fatalf("errors %d, admitted %d, passes %d (%d distinct to OnPass); want 0, %d, %d, %d; routes %v",
			r.Errors, r.Admitted, r.Passes, len(passes), sc.Users, sc.Users, sc.Users, r.ByRoute)
	}
	var seen int64
	for _, n := range r.SeenSeries {
		seen += n
	}
	if seen != int64(sc.Users) || r.SeenPerSecondPeak < 1 || r.ErrorCodes != nil {
		t.Errorf("seen series %v (peak %d), error codes %v; want the %d admitted, no error", r.SeenSeries, r.SeenPerSecondPeak, r.ErrorCodes, sc.Users)
	}
	// One poll each, when it is due: its ticket's predicted admission plus
	// DueMargin, from the start of admission; nobody polls the paused
	// queue on the tiers' schedule.
	if r.Polls != int64(sc.Users) {
		t.Errorf("%d polls for %d users, want one each", r.Polls, sc.Users)
	}
	plan := simulate.AdmissionTimes(sc, 2*time.Second, true)
	var want, got []time.Duration
	for k := 1; k <= sc.Users; k++ {
		want = append(want, plan[k]+DueMargin)
	}
	for _, ds := range vc.byUser() {
		got = append(got, ds...)
	}
	slices.Sort(want)
	slices.Sort(got)
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("the users' waits (-want +got):\n%s", d)
	}
	checkTotals(t, r)
}
