package main

// The report's acceptance run (docs/benchmarks.md, "The report against the audit and the
// bench"): a load
// test on dynalite against the service in process, on a discrete-event
// clock that server and people share, so that a request reads one time at
// both ends and the bench's waits are the tokens' to the millisecond. Its
// people by default (make test); another crowd:
//
//	go test ./cmd/audit -run TestReportMatchesAudit -v -args -report.users 5000

import (
	"context"
	"flag"
	"log/slog"
	"math"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/go-cmp/cmp"

	"github.com/example/waitingroom/internal/api"
	"github.com/example/waitingroom/internal/clock"
	"github.com/example/waitingroom/internal/dynamostore"
	"github.com/example/waitingroom/internal/httpapi"
	"github.com/example/waitingroom/internal/polling"
	"github.com/example/waitingroom/internal/queue"
	"github.com/example/waitingroom/internal/report"
	"github.com/example/waitingroom/internal/tools/bench"
	"github.com/example/waitingroom/internal/tools/bench/loadtest"
	"github.com/example/waitingroom/internal/tools/client"
	"github.com/example/waitingroom/internal/tools/simclock"
)

var reportUsers = flag.Int("report.users", 2000, "TestReportMatchesAudit: the people of the run")

// countingSink counts the tally's minute writes.
type countingSink struct {
	report.Sink
	writes atomic.Int64
}

func (s *countingSink) AddMinute(ctx context.Context, program, flush string, m report.Minute) error {
	s.writes.Add(1)
	return s.Sink.AddMinute(ctx, program, flush, m)
}

// serverClock is the service's view of the shared clock: its time, but its
// own waits (a conflict's backoff, an enter waiting on its key's claim) in
// real time, since the clock stands still while the person it serves waits
// on its answer.
type serverClock struct{ *simclock.Steps }

func (serverClock) Sleep(ctx context.Context, d time.Duration) error {
	return clock.Real{}.Sleep(ctx, d)
}

// TestReportMatchesAudit: 2,000 people arrive over a minute, a fifth of
// them leave while waiting, admission pauses and resumes at another rate;
// once the program is closed and settled, its report counts the people as
// cmd/audit reads the table, exactly, and its waits are the bench's within
// 5 %. With the tokens gone (their TTL, simulated), the report is the same.
func TestReportMatchesAudit(t *testing.T) {
	ctx := t.Context()
	client, table, _ := newTable(t)
	store := dynamostore.New(client, table)
	clk := simclock.NewSteps(time.Now().Truncate(time.Second))
	clk.Party = func(ctx context.Context) bool { _, ok := loadtest.UserOf(ctx); return ok }
	clk.Batch = 500 * time.Millisecond // polls due within it run side by side: the run's real time is its round trips
	sink := &countingSink{Sink: store}
	tally := report.NewTally(sink, clk.Now, slog.New(slog.DiscardHandler), "test")
	svc := queue.NewService(store, polling.DefaultTiers(), queue.WithClock(serverClock{clk}), queue.WithProgramCache(time.Second))
	srv := httptest.NewServer(httpapi.New(svc, httpapi.BearerAuth("s3cret"), httpapi.WithObserver(tally), httpapi.WithLogger(slog.New(slog.DiscardHandler))))
	defer srv.Close()

	const program = "gala"
	sc := bench.Scenario{Users: *reportUsers, Arrival: bench.Arrival{Over: time.Minute}, Abandon: 0.2, Timeout: 24 * time.Hour,
		Rates: bench.Schedule{{At: 0, Rate: 40}, {At: 30 * time.Second, Rate: 40, Paused: true}, {At: 50 * time.Second, Rate: 80}}}
	rctx, cancel := context.WithTimeout(ctx, 5*time.Minute) // a hang guard, in real time
	defer cancel()
	run, err := loadtest.Run(rctx, loadtest.Config{BaseURL: srv.URL, AdminToken: "s3cret", ProgramID: program, Scenario: sc,
		Seed: 7, CacheTTL: time.Second, Clock: clk, Track: clk.Track})
	if err != nil {
		t.Fatal(err)
	}
	if run.Errors != 0 || run.Left == 0 || run.WaitMs == nil {
		t.Fatalf("the run: %d errors %v, %d left, waits %v", run.Errors, run.ErrorCodes, run.Left, run.WaitMs)
	}
	// Close, let the tally's last minute out, and wait out the no-shows.
	if _, _, err := svc.PutProgram(ctx, program, api.ProgramSettings{Closed: new(true)}); err != nil {
		t.Fatal(err)
	}
	if err := tally.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if err := clk.Sleep(ctx, time.Hour); err != nil { // not a user's: moves at once
		t.Fatal(err)
	}
	rep := getReport(t, srv.URL, program)
	if !rep.Final {
		t.Fatalf("the report is not final an hour after the close: %+v", rep.People)
	}

	// Counts: the table as cmd/audit reads it, and the run's own.
	items, _, err := scan(ctx, client, table)
	if err != nil {
		t.Fatal(err)
	}
	a := AuditAll(items, program)[0]
	if !a.OK() {
		t.Errorf("the audit fails: %+v", a)
	}
	p := rep.People
	got := []int64{p.Arrivals, p.Admitted, p.Ended, p.Left, p.Revoked + p.NoShows + p.Waiting}
	if diff := cmp.Diff([]int64{int64(a.Tokens), int64(a.AdmittedSeen), int64(a.Ended), int64(a.Left), int64(a.Unrecorded)}, got); diff != "" {
		t.Errorf("arrivals, admitted, ended, left, neither: report against audit (-audit +report):\n%s", diff)
	}
	if p.Arrivals != int64(sc.Users) || p.Admitted != int64(run.Admitted) || p.Left != int64(run.Left) {
		t.Errorf("people %+v; the run had %d users, %d admitted, %d left", p, sc.Users, run.Admitted, run.Left)
	}
	// Waits: the report's from the tokens, the bench's from its answers.
	w := rep.Waits
	for _, c := range []struct {
		name        string
		report, run float64
	}{{"p50", float64(w.P50Ms), run.WaitMs.P50}, {"p99", float64(w.P99Ms), run.WaitMs.P99}, {"max", float64(w.MaxMs), run.WaitMs.Max}} {
		if math.Abs(c.report-c.run) > 0.05*c.run {
			t.Errorf("wait %s: report %g ms, bench %g ms: more than 5 %% apart", c.name, c.report, c.run)
		}
	}
	if rep.Requests.Total == 0 || rep.Requests.PeakPerSecond == 0 {
		t.Errorf("requests %+v: the tally counted none", rep.Requests)
	}
	t.Logf("%d people: tally writes %d (%.4f a person), report pass read %d items (%.2f a person); waits report %+v, bench %+v",
		p.Arrivals, sink.writes.Load(), float64(sink.writes.Load())/float64(p.Arrivals), rep.ItemsRead, float64(rep.ItemsRead)/float64(p.Arrivals), w, *run.WaitMs)

	// The tokens expire: the final report stays as it was.
	deleteTokens(t, client, table, items.Tokens)
	if again := getReport(t, srv.URL, program); !cmp.Equal(rep, again) {
		t.Errorf("the report changed once the tokens were gone:\n%s", cmp.Diff(rep, again))
	}
}

// getReport reads program's report through the admin API.
func getReport(t *testing.T, url, program string) api.Report {
	t.Helper()
	c, err := client.New(url, client.WithAuth(client.BearerToken("s3cret")))
	if err != nil {
		t.Fatal(err)
	}
	r, err := c.Report(t.Context(), program)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// deleteTokens deletes the token items, as their TTL would.
func deleteTokens(t *testing.T, c *dynamodb.Client, table string, tokens []queue.Token) {
	t.Helper()
	for _, tok := range tokens {
		key := map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "TOKEN#" + tok.ID}, "sk": &types.AttributeValueMemberS{Value: "TOKEN"}}
		if _, err := c.DeleteItem(t.Context(), &dynamodb.DeleteItemInput{TableName: aws.String(table), Key: key}); err != nil {
			t.Fatal(err)
		}
	}
}
