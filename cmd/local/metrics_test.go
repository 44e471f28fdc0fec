package main

import (
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/example/waitingroom/internal/tools/bench"
	"github.com/example/waitingroom/internal/tools/bench/loadtest"
	"github.com/example/waitingroom/internal/tools/client"
)

// scrapeCounters GETs base/metrics and returns family's counters by their
// labels, "name=value" pairs in the exposition's order joined by ",".
func scrapeCounters(t *testing.T, base, family string) map[string]float64 {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %d", resp.StatusCode)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("GET /metrics does not parse: %v", err)
	}
	out := map[string]float64{}
	f, ok := fams[family]
	if !ok {
		return out
	}
	if f.GetType() != dto.MetricType_COUNTER {
		t.Fatalf("%s is a %v, want a counter", family, f.GetType())
	}
	for _, m := range f.GetMetric() {
		var labels []string
		for _, l := range m.GetLabel() {
			labels = append(labels, l.GetName()+"="+l.GetValue())
		}
		out[strings.Join(labels, ",")] = m.GetCounter().GetValue()
	}
	return out
}

// requestLabels are the waitingroom_requests_total labels of the bench's
// route key ("POST enter 201", "GET admin 200", "POST admissions 200").
func requestLabels(t *testing.T, key string) string {
	t.Helper()
	i := strings.LastIndexByte(key, ' ')
	route, status := key[:i], key[i+1:]
	if _, err := strconv.Atoi(status); err != nil {
		t.Fatalf("bench route %q: no HTTP status (a transport error?)", key)
	}
	op := client.Op(route)
	method, name, _ := strings.Cut(route, " ")
	if op.Admin() {
		name = "admin"
	}
	return fmt.Sprintf("http_status=%s,method=%s,operation=%s", status, method, name)
}

// TestMetricsMatchBench is issue 11's check of GET /metrics: after a short
// bench run on the local server, the request counters are the bench's own
// counts by route and status, and the crowd's counters agree with what its
// users saw.
func TestMetricsMatchBench(t *testing.T) {
	t.Parallel()
	base := start(t, map[string]string{"ADMIN_TOKEN": "s3cret"}, "-demo-program", "")
	sc := bench.Scenario{Users: 60, Arrival: bench.Arrival{}, Rates: bench.ConstantRate(40), Abandon: 0.25, Timeout: 30 * time.Second}
	res, err := loadtest.Run(t.Context(), loadtest.Config{
		BaseURL: base, AdminToken: "s3cret", ProgramID: "metrics", Scenario: sc,
		Poll: loadtest.Poll{}, SampleEvery: 100 * time.Millisecond, Seed: 7,
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Admitted+res.Left != sc.Users || res.Errors != 0 || res.Left == 0 {
		t.Fatalf("admitted %d + left %d of %d, errors %d: the run did not finish cleanly (%v)", res.Admitted, res.Left, sc.Users, res.Errors, res.ByRoute)
	}

	scraped := scrapeCounters(t, base, "waitingroom_requests_total")
	got := maps.Clone(scraped)
	t.Logf("bench routes %v, left %d, admitted %d", res.ByRoute, res.Left, res.Admitted)
	want := map[string]float64{}
	for key, n := range res.ByRoute {
		want[requestLabels(t, key)] += float64(n)
	}
	// The run's end cancels its last counter sample: the server may have
	// answered it without the bench counting it.
	const sample = "method=GET,operation=admin"
	extra := 0.0
	for labels, n := range got {
		if strings.HasSuffix(labels, sample) {
			extra += n - want[labels]
			if n-want[labels] > 0 {
				got[labels] = want[labels]
				if want[labels] == 0 {
					delete(got, labels)
				}
			}
		}
	}
	if extra < 0 || extra > 1 {
		t.Errorf("%g admin GETs counted beyond the bench's samples, want 0 or 1", extra)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("waitingroom_requests_total against the bench's routes (-bench +server):\n%s", diff)
	}

	// A scrape is not a request of the API.
	if diff := cmp.Diff(scraped, scrapeCounters(t, base, "waitingroom_requests_total")); diff != "" {
		t.Errorf("scraping counted itself (-first +second):\n%s", diff)
	}

	program := "program_id=metrics"
	leftAfterAdmission := float64(res.ByRoute["DELETE leave 409"])
	for _, c := range []struct {
		family, labels string
		want           float64
	}{
		{"waitingroom_enters_total", program, float64(res.ByRoute["POST enter 201"])},
		{"waitingroom_leaves_total", program, float64(res.Left)},
		// A leave that finds its token admitted records the admission and
		// answers 409: the user sees ADMITTED on its next poll, uncounted.
		{"waitingroom_admissions_total", program, float64(res.Admitted) - leftAfterAdmission},
		{"waitingroom_polls_total", "status=ADMITTED", float64(res.Admitted)},
	} {
		if n := scrapeCounters(t, base, c.family)[c.labels]; n != c.want {
			t.Errorf("%s{%s} = %g, want %g (routes %v)", c.family, c.labels, n, c.want, res.ByRoute)
		}
	}
}

// scrapeSeries GETs base/metrics and returns its series, one line of the
// text exposition each (name and labels, without the value), and its size.
func scrapeSeries(t *testing.T, base string) (map[string]bool, int) {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %d %v", resp.StatusCode, err)
	}
	series := map[string]bool{}
	for line := range strings.Lines(string(b)) {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			series[line[:strings.LastIndexByte(line, ' ')]] = true
		}
	}
	return series, len(b)
}

// TestMetricsLabelsClosed is issue 16's check that no label value comes
// from the client: once every kind of request has been seen, more of them
// with made-up methods, made-up paths and unknown program ids add no series
// to GET /metrics.
func TestMetricsLabelsClosed(t *testing.T) {
	t.Parallel()
	const secret = "s3cret"
	base := start(t, map[string]string{"ADMIN_TOKEN": secret})
	send := func(i int) {
		t.Helper()
		method := fmt.Sprintf("MADEUP%d", i)
		nope := fmt.Sprintf("nope-%d", i)
		for _, r := range []struct{ method, path, auth string }{
			{method, "/api/v1/queues/programs/demo", ""},
			{method, "/api/v1/admin/programs/demo", secret},
			{method, "/waiting-room/demo", ""},
			{method, "/made/up/" + nope, ""},
			{"GET", "/made/up/" + nope, ""},
			{"GET", "/api/v1/queues/" + nope, ""},
			{"POST", "/api/v1/queues/programs/" + nope, ""},
			{"GET", "/api/v1/queues/programs/" + nope, ""},
			{"DELETE", "/api/v1/queues/programs/" + nope, ""},
			{"GET", "/api/v1/admin/programs/" + nope, secret},
			{"POST", "/api/v1/admin/programs/" + nope + "/admissions", secret},
			{"GET", "/waiting-room/" + nope, ""},
			{"POST", "/waiting-room/" + nope + "/enter", ""},
			{"GET", "/waiting-room/assets/" + nope, ""},
		} {
			req, err := http.NewRequest(r.method, base+r.path, nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("X-Queue-Token", "AAAAAAAAAAAAAAAAAAAAAA")
			if r.auth != "" {
				req.Header.Set("Authorization", "Bearer "+r.auth)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}
	send(0)
	before, size := scrapeSeries(t, base)
	const rounds = 200
	for i := 1; i <= rounds; i++ {
		send(i)
	}
	after, sizeAfter := scrapeSeries(t, base)
	var added []string
	for s := range after {
		if !before[s] {
			added = append(added, s)
		}
	}
	if len(added) > 0 {
		slices.Sort(added)
		t.Errorf("%d more rounds of made-up requests added %d series (%d → %d, %d → %d bytes), e.g.:\n%s",
			rounds, len(added), len(before), len(after), size, sizeAfter, strings.Join(added[:min(len(added), 10)], "\n"))
	}
}
