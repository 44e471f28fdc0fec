package main

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/example/waitingroom/internal/httpapi"
	"github.com/example/waitingroom/internal/polling"
	"github.com/example/waitingroom/internal/queue"
	"github.com/example/waitingroom/internal/report"
	"github.com/example/waitingroom/internal/tools/memstore"
)

// headline starts the text of a program's report (report.WriteTable).
const headline = "Waiting room report: "

// TestRunReport: a run ends with its program's report, as the server kept
// it when it answered, under the table: its people are the run's users
// (the in-process server has no tally: no requests); -out writes it as
// report.html too, and says so; -json leaves stdout a JSON array.
func TestRunReport(t *testing.T) {
	clk := fakeClock()
	store := memstore.New()
	srv := httptest.NewServer(httpapi.New(queue.NewService(store, polling.DefaultTiers(), queue.WithClock(serverClock{clk})), httpapi.BearerAuth("s3cret")))
	defer srv.Close()
	dir := t.TempDir()
	args := []string{"run", "-url", srv.URL, "-admin-token", "s3cret", "-users", "20", "-admit-rate", "100", "-timeout", virtualTimeout}
	out, errOut, err := runCmdOn(t, clk, append(args, "-out", dir)...)
	if err != nil || errOut != "" {
		t.Fatalf("%v: %s", err, errOut)
	}
	table, rest, ok := strings.Cut(out, "\n"+headline)
	if !ok {
		t.Fatalf("no report under the table:\n%s", out)
	}
	if !strings.Contains(table, "| wait (enter to ADMITTED) p50 |") {
		t.Errorf("no wait in the table:\n%s", table)
	}
	id, _, _ := strings.Cut(rest, ",")
	kept, err := store.GetReport(t.Context(), id)
	if err != nil {
		t.Fatalf("the report of %q: %v\n%s", id, err, out)
	}
	var want strings.Builder
	if err := report.WriteTable(&want, kept); err != nil {
		t.Fatal(err)
	}
	wrote := "\nwrote " + dir + "/{results.json,report.md," + ReportHTML + "}\n"
	if got := headline + rest; got != want.String()+wrote {
		t.Errorf("the run's output ends with\n%s\nwant the report of %s, then the files\n%s%s", got, id, want.String(), wrote)
	}
	if p := kept.People; p.Arrivals != 20 || p.Admitted != 20 || kept.Requests.Total != 0 {
		t.Errorf("people %+v, requests %+v; want the run's 20 users arrived and admitted, no tally", p, kept.Requests)
	}
	for _, section := range []*regexp.Regexp{arrivals, regexp.MustCompile(`\n\nWaits of the admitted\n`), regexp.MustCompile(`\n\nRequests\n`)} {
		if !section.MatchString(rest) {
			t.Errorf("the report lacks %s:\n%s", section, rest)
		}
	}
	var html strings.Builder
	if err := report.WriteHTML(&html, kept); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, ReportHTML)); err != nil || string(b) != html.String() {
		t.Errorf("%s: %v; want the report's page (%d bytes, got %d)", ReportHTML, err, html.Len(), len(b))
	}

	// -json: the array alone, the report only into -out.
	dir = t.TempDir()
	out, errOut, err = runCmdOn(t, clk, append(args, "-json", "-out", dir)...)
	if err != nil || errOut != "" || !strings.HasPrefix(out, "[") || !strings.HasSuffix(out, "]\n") || strings.Contains(out, headline) {
		t.Errorf("-json: %v, stderr %q, stdout\n%s", err, errOut, out)
	}
	if _, err := os.Stat(filepath.Join(dir, ReportHTML)); err != nil {
		t.Errorf("-json -out: %v", err)
	}
}

// arrivals is the report's line of the run's 20 people, in its first section.
var arrivals = regexp.MustCompile(`\n\nPeople\n +arrivals +20\n`)

// TestRunReportUnanswered: a server without reports costs the run one line
// on stderr (here a 404), and no report in its output or its files.
func TestRunReportUnanswered(t *testing.T) {
	clk := fakeClock()
	api := httpapi.New(queue.NewService(memstore.New(), polling.DefaultTiers(), queue.WithClock(serverClock{clk})), httpapi.BearerAuth("s3cret"))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/report") { // a server of before the reports
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"code":"NOT_FOUND","message":"No such route."}`))
			return
		}
		api.ServeHTTP(w, r)
	}))
	defer srv.Close()
	dir := t.TempDir()
	out, errOut, err := runCmdOn(t, clk, "run", "-url", srv.URL, "-admin-token", "s3cret", "-users", "5", "-admit-rate", "100", "-timeout", virtualTimeout, "-out", dir)
	if err != nil {
		t.Fatalf("%v: %s", err, errOut)
	}
	if !strings.HasPrefix(errOut, "report: ") || strings.Count(errOut, "\n") != 1 || strings.Contains(out, headline) {
		t.Errorf("stderr %q, stdout\n%s\nwant one line report: <error>, and no report", errOut, out)
	}
	if !strings.HasSuffix(out, "\nwrote "+dir+"/{results.json,report.md}\n") {
		t.Errorf("stdout ends\n%s\nwant the two files written", out)
	}
	if _, err := os.Stat(filepath.Join(dir, ReportHTML)); err == nil {
		t.Errorf("%s written without a report", ReportHTML)
	}
}
