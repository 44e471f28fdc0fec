package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/example/waitingroom/internal/api"
	"github.com/example/waitingroom/internal/httpapi"
	"github.com/example/waitingroom/internal/polling"
	"github.com/example/waitingroom/internal/queue"
	"github.com/example/waitingroom/internal/tools/bench"
	"github.com/example/waitingroom/internal/tools/memstore"
	"github.com/example/waitingroom/internal/tools/simclock"
)

// fakeClock is the clock a test's server and its load test share: each
// wait of the run advances it at once, so that no run takes real time.
func fakeClock() *simclock.Fake { return simclock.NewFake(time.Now().Truncate(time.Second)) }

// serverClock is the server's view of the shared clock: the Fake's time,
// but admin budgets (clock.WithTimeout) in real time, since each person of
// the load test moves the Fake on as it waits and would end an admin
// call's budget mid-call.
type serverClock struct{ *simclock.Fake }

// WithTimeout hides the Fake's: the budget runs in real time.
func (serverClock) WithTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, d)
}

// virtualTimeout is the -timeout of runs on a fake clock, which every wait
// advances: long enough that only the scenario ends them.
const virtualTimeout = "24h"

func TestRunJSON(t *testing.T) {
	clk := fakeClock()
	srv := httptest.NewServer(httpapi.New(queue.NewService(memstore.New(), polling.DefaultTiers(), queue.WithClock(serverClock{clk})), httpapi.BearerAuth("s3cret")))
	defer srv.Close()
	got := runJSON[contract](t, clk, 1, "run", "-url", srv.URL, "-admin-token", "s3cret", "-users", "20", "-admit-rate", "100", "-timeout", virtualTimeout, "-json")
	got[0].check(t, true)
	if *got[0].Policy != "server" || *got[0].Admitted != 20 || *got[0].Errors != 0 {
		t.Errorf("policy %s, admitted %d, errors %d", *got[0].Policy, *got[0].Admitted, *got[0].Errors)
	}
}

// TestRunExistingProgram: -program-id fills a program the operator made,
// with its settings as they are: the run creates nothing and changes
// nothing, and the operator's rate admits its people.
func TestRunExistingProgram(t *testing.T) {
	clk := fakeClock()
	svc := queue.NewService(memstore.New(), polling.DefaultTiers(), queue.WithClock(serverClock{clk}))
	rate, paused := 100.0, false
	if _, _, err := svc.PutProgram(t.Context(), "gala", api.ProgramSettings{AdmissionRatePerSecond: new(api.Rate(rate)), Paused: &paused}); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(httpapi.New(svc, httpapi.BearerAuth("s3cret")))
	defer srv.Close()
	type row struct {
		ProgramID string           `json:"programId"`
		Admitted  int              `json:"admitted"`
		AdmitRate string           `json:"admitRate"`
		ByRoute   map[string]int64 `json:"byRoute"`
	}
	got := runJSON[row](t, clk, 1, "run", "-url", srv.URL, "-admin-token", "s3cret", "-program-id", "gala", "-users", "10", "-timeout", virtualTimeout, "-json")
	if r := got[0]; r.ProgramID != "gala" || r.Admitted != 10 || r.AdmitRate != "by the operator" || r.ByRoute["PUT admin 200"]+r.ByRoute["PUT admin 201"] != 0 {
		t.Errorf("%+v; want gala's 10 people admitted at its own rate, no admin change", r)
	}
	if c, err := svc.Program(t.Context(), "gala"); err != nil || c.Issued != 10 || c.Rate != 100 || c.Paused {
		t.Errorf("program after the run %+v, %v", c, err)
	}
}

// TestRunCountsAdminApart: with every counter sample failing, the table
// shows no error among the requests and the admin failures on their own
// rows, and the routes add up to both counts.
func TestRunCountsAdminApart(t *testing.T) {
	clk := fakeClock()
	api := httpapi.New(queue.NewService(memstore.New(), polling.DefaultTiers(), queue.WithClock(serverClock{clk})), httpapi.BearerAuth("s3cret"))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/api/v1/admin/") {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(`{"code":"STORE_UNAVAILABLE","message":"Injected."}`))
			return
		}
		api.ServeHTTP(w, r)
	}))
	defer srv.Close()
	args := []string{"run", "-url", srv.URL, "-admin-token", "s3cret", "-users", "10", "-admit-rate", "100", "-timeout", virtualTimeout}
	type row struct {
		Requests      int64            `json:"requests"`
		Errors        int64            `json:"errors"`
		AdminRequests int64            `json:"adminRequests"`
		AdminErrors   int64            `json:"adminErrors"`
		ByRoute       map[string]int64 `json:"byRoute"`
	}
	got := runJSON[row](t, clk, 1, append(args, "-json")...)
	r := got[0]
	var sum int64
	for _, n := range r.ByRoute {
		sum += n
	}
	if r.Errors != 0 || r.AdminErrors == 0 || r.AdminErrors != r.ByRoute["GET admin 503"] || sum != r.Requests+r.AdminRequests {
		t.Errorf("errors %d, admin errors %d, requests %d + admin %d, routes %v (sum %d)", r.Errors, r.AdminErrors, r.Requests, r.AdminRequests, r.ByRoute, sum)
	}

	out, errOut, err := runCmdOn(t, clk, args...)
	if err != nil {
		t.Fatalf("%v: %s", err, errOut)
	}
	rows := map[string][]string{}
	for line := range strings.Lines(out) {
		if cells := strings.Split(strings.Trim(line, "| \n"), " | "); len(cells) > 1 {
			rows[cells[0]] = cells[1:]
		}
	}
	if e := rows["errors (of the requests)"]; len(e) != 1 || e[0] != "0" {
		t.Errorf("errors row %q, want 0:\n%s", e, out)
	}
	if a := rows["admin errors"]; len(a) != 1 || a[0] == "0" {
		t.Errorf("admin errors row %q, want the failed samples:\n%s", a, out)
	}
	if _, ok := rows["admin requests (the bench's own)"]; !ok {
		t.Errorf("no admin requests row:\n%s", out)
	}
}

// TestNotes: under the table, the errors and the gaps are explained where
// they are not zero, a line each, the errors with their codes (summed over
// the results, in code order), as a rehearsal that closes its program
// while the crowd still arrives and enters once with curl prints them.
func TestNotes(t *testing.T) {
	const (
		errorsLine = "errors: requests that failed: transport errors, 5xx, 429 and answers the bench does not expect (409 PROGRAM_CLOSED: enters after the program closed)"
		gapsLine   = "gaps: tickets of the program that no user of the bench holds: taken by others during the run (a curl, a browser) or by enters whose answer was lost"
	)
	tests := []struct {
		name    string
		results []bench.Result
		want    []string
	}{
		{"none", []bench.Result{{Users: 10}}, nil},
		{"the rehearsal", []bench.Result{{Errors: 1216, Gaps: 1, ErrorCodes: map[string]int64{"PROGRAM_CLOSED": 1216}}},
			[]string{"\n" + errorsLine + "; by code: PROGRAM_CLOSED 1,216", gapsLine}},
		{"errors without a code", []bench.Result{{Errors: 3}}, []string{"\n" + errorsLine}},
		{"gaps alone", []bench.Result{{Gaps: 2}}, []string{"\n" + gapsLine}},
		{"codes summed over the results", []bench.Result{
			{Errors: 2, ErrorCodes: map[string]int64{"QUEUE_FULL": 1, "BUSY": 1}},
			{Errors: 1, ErrorCodes: map[string]int64{"BUSY": 1}},
		}, []string{"\n" + errorsLine + "; by code: BUSY 2, QUEUE_FULL 1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := notes(tt.results)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("notes (-want +got):\n%s", diff)
			}
			for _, line := range got {
				if strings.Count(strings.TrimPrefix(line, "\n"), "\n") != 0 {
					t.Errorf("note %q is more than one line", line)
				}
			}
		})
	}
}
