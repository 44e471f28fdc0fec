package metrics_test

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/example/waitingroom/internal/metrics"
	"github.com/example/waitingroom/internal/testing/emfspec"
	"github.com/example/waitingroom/internal/testing/metricstest"
)

// published is one metric of an EMF line in a comparable form.
type published struct {
	Name   string
	Unit   string
	Dims   string // "K=V,K=V" sorted
	Values []float64
}

// parseLines checks each of out's lines against the specification and
// returns their metrics, sorted, and their timestamps.
func parseLines(t *testing.T, out []byte) (got []published, stamps []int64) {
	t.Helper()
	for line := range strings.Lines(string(out)) {
		doc, err := emfspec.Parse([]byte(strings.TrimSuffix(line, "\n")))
		if err != nil {
			t.Fatalf("not a valid EMF document: %v\n%s", err, line)
		}
		stamps = append(stamps, doc.Timestamp)
		for _, m := range doc.Metrics {
			if m.Namespace != "WaitingRoom" {
				t.Errorf("metric %s in namespace %q, want WaitingRoom", m.Name, m.Namespace)
			}
			var dims []string
			for k, v := range m.Dimensions {
				dims = append(dims, k+"="+v)
			}
			sort.Strings(dims)
			got = append(got, published{m.Name, m.Unit, strings.Join(dims, ","), m.Values})
		}
	}
	sort.Slice(got, func(i, j int) bool {
		return got[i].Name < got[j].Name || got[i].Name == got[j].Name && got[i].Dims < got[j].Dims
	})
	return got, stamps
}

// emfNow is the EMF clock of the tests: a time with milliseconds, and
// nanoseconds below them that the Timestamp drops.
var emfNow = time.Date(2026, 3, 1, 12, 34, 56, 789_654_321, time.UTC)

// TestEMF: without an interval each request's metrics are written at
// once, with their dimensions, stamped with the sink's clock to the
// millisecond.
func TestEMF(t *testing.T) {
	latency := func(op string) published {
		return published{"Latency", "Milliseconds", "Operation=" + op, []float64{12.345}}
	}
	for _, tc := range []struct {
		name string
		req  metrics.Request
		want []published
	}{
		{"Enter", metrics.Request{Op: metrics.OpEnter, Method: "POST", Status: 201, ProgramID: "gala", TokenStatus: "WAITING",
			RetryAfter: 5300 * time.Millisecond, Waiting: 234, WaitingKnown: true},
			[]published{
				{"Enters", "Count", "ProgramId=gala", []float64{1}},
				latency("enter"),
				{"RetryAfterMs", "Milliseconds", "", []float64{5300}},
				{"Waiting", "Count", "ProgramId=gala", []float64{234}},
			}},
		{"EnterAccount", metrics.Request{Op: metrics.OpEnter, Method: "POST", Status: 201, ProgramID: "gala", TokenStatus: "WAITING", Account: true},
			[]published{{"AccountPlaces", "Count", "ProgramId=gala", []float64{1}}, {"Enters", "Count", "ProgramId=gala", []float64{1}}, latency("enter")}},
		{"EnterAccountAgain", metrics.Request{Op: metrics.OpEnter, Method: "POST", Status: 200, ProgramID: "gala", TokenStatus: "WAITING", Account: true},
			[]published{latency("enter")}},
		{"HandoffMade", metrics.Request{Op: metrics.OpHandoff, Method: "POST", Status: 201, ProgramID: "gala"},
			[]published{latency("handoff")}},
		{"Redeem", metrics.Request{Op: metrics.OpHandoff, Method: "POST", Status: 201, ProgramID: "gala", TokenStatus: "WAITING"},
			[]published{{"Handoffs", "Count", "ProgramId=gala", []float64{1}}, latency("handoff")}},
		{"RedeemAgain", metrics.Request{Op: metrics.OpHandoff, Method: "POST", Status: 200, ProgramID: "gala", TokenStatus: "WAITING"},
			[]published{latency("handoff")}},
		{"EnterAgain", metrics.Request{Op: metrics.OpEnter, Method: "POST", Status: 200, ProgramID: "gala", TokenStatus: "WAITING", RetryAfter: time.Second},
			[]published{latency("enter"), {"RetryAfterMs", "Milliseconds", "", []float64{1000}}}},
		{"PollWaiting", metrics.Request{Op: metrics.OpPoll, Method: "GET", Status: 200, ProgramID: "gala", TokenStatus: "WAITING",
			RetryAfter: 15 * time.Second, EstimatedWait: 4 * time.Minute, Waiting: 230, WaitingKnown: true},
			[]published{
				{"EstimatedWaitMs", "Milliseconds", "ProgramId=gala", []float64{240000}},
				latency("poll"),
				{"Polls", "Count", "Status=WAITING", []float64{1}},
				{"RetryAfterMs", "Milliseconds", "", []float64{15000}},
				{"Waiting", "Count", "ProgramId=gala", []float64{230}},
			}},
		{"PollAdmittedFirst", metrics.Request{Op: metrics.OpPoll, Method: "GET", Status: 200, ProgramID: "gala", TokenStatus: "ADMITTED", Admitted: true, Waiting: 0, WaitingKnown: true},
			[]published{
				{"Admissions", "Count", "ProgramId=gala", []float64{1}},
				latency("poll"),
				{"Polls", "Count", "Status=ADMITTED", []float64{1}},
				{"Waiting", "Count", "ProgramId=gala", []float64{0}},
			}},
		{"PollAdmittedAgain", metrics.Request{Op: metrics.OpPoll, Method: "GET", Status: 200, ProgramID: "gala", TokenStatus: "ADMITTED"},
			[]published{latency("poll"), {"Polls", "Count", "Status=ADMITTED", []float64{1}}}},
		{"BypassPasses", metrics.Request{Op: metrics.OpAdmin, Method: "POST", Status: 200, ProgramID: "gala", BypassPasses: 250},
			[]published{{"BypassPasses", "Count", "ProgramId=gala", []float64{250}}, latency("admin")}},
		{"BypassRefused", metrics.Request{Op: metrics.OpAdmin, Method: "POST", Status: 404, Code: "PROGRAM_NOT_FOUND", ProgramID: "x7f3e1", BypassPasses: 3},
			[]published{latency("admin"), {"Rejected", "Count", "Code=PROGRAM_NOT_FOUND", []float64{1}}}},
		{"Leave", metrics.Request{Op: metrics.OpLeave, Method: "DELETE", Status: 204, ProgramID: "gala"},
			[]published{latency("leave"), {"Leaves", "Count", "ProgramId=gala", []float64{1}}}},
		// An unknown program never becomes a dimension value: anyone can
		// send any id, and each value would be a billed metric.
		{"UnknownProgram", metrics.Request{Op: metrics.OpEnter, Method: "POST", Status: 404, Code: "PROGRAM_NOT_FOUND", ProgramID: "x7f3e1"},
			[]published{latency("enter"), {"Rejected", "Count", "Code=PROGRAM_NOT_FOUND", []float64{1}}}},
		{"Closed", metrics.Request{Op: metrics.OpEnter, Method: "POST", Status: 409, Code: "PROGRAM_CLOSED", ProgramID: "gala"},
			[]published{latency("enter"), {"Rejected", "Count", "Code=PROGRAM_CLOSED", []float64{1}}}},
		{"StoreFault", metrics.Request{Op: metrics.OpPoll, Method: "GET", Status: 503, Code: "STORE_UNAVAILABLE", ProgramID: "gala"},
			[]published{latency("poll"), {"StoreUnavailable", "Count", "", []float64{1}}}},
		// Waiting for another enter with the same key is no store fault.
		{"EnterInProgress", metrics.Request{Op: metrics.OpEnter, Method: "POST", Status: 503, Code: "ENTER_IN_PROGRESS", ProgramID: "gala"},
			[]published{latency("enter")}},
		{"NoRoute", metrics.Request{Method: "GET", Status: 404, Code: "NOT_FOUND"},
			[]published{latency("other"), {"Rejected", "Count", "Code=NOT_FOUND", []float64{1}}}},
		{"Admin", metrics.Request{Op: metrics.OpAdmin, Method: "PUT", Status: 200, ProgramID: "gala"},
			[]published{latency("admin")}},
		// Any token is a method: a made-up one is OTHER, as a dimension
		// value would be.
		{"MadeUpMethod", metrics.Request{Method: "BREW", Status: 404, Code: "NOT_FOUND"},
			[]published{latency("other"), {"Rejected", "Count", "Code=NOT_FOUND", []float64{1}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			tc.req.Duration = 12345 * time.Microsecond
			metrics.NewEMF(&buf, "WaitingRoom", metrics.WithEMFClock(func() time.Time { return emfNow })).Observe(tc.req)
			got, stamps := parseLines(t, buf.Bytes())
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("published metrics (-want +got):\n%s\nlines: %s", diff, buf.Bytes())
			}
			for _, at := range stamps {
				if at != emfNow.UnixMilli() {
					t.Errorf("Timestamp %d, want the clock's %d", at, emfNow.UnixMilli())
				}
			}
		})
	}
}

// TestEMFAggregates: over an interval, the sink publishes what a line per
// request would have, for every statistic the dashboard and alarms read:
// each counter's sum, each level's maximum, each distribution's values
// (so its percentiles), by dimension values and by minute; and in far
// fewer bytes.
func TestEMFAggregates(t *testing.T) {
	rng := rand.New(rand.NewPCG(32, 3))
	ops := []metrics.Op{metrics.OpEnter, metrics.OpPoll, metrics.OpLeave, metrics.OpAdmin}
	statuses := []int{200, 200, 200, 200, 200, 200, 201, 204, 404, 409, 429}
	var now time.Time
	clock := func() time.Time { return now }
	var each, agg bytes.Buffer
	perRequest := metrics.NewEMF(&each, "WaitingRoom", metrics.WithEMFClock(clock))
	aggregated := metrics.NewEMF(&agg, "WaitingRoom", metrics.WithEMFClock(clock), metrics.WithEMFInterval(10*time.Second))
	now = emfNow
	for range 5000 {
		now = now.Add(time.Duration(rng.Int64N(int64(40 * time.Millisecond))))
		r := metrics.Request{Op: ops[rng.IntN(len(ops))], Method: "GET", Status: statuses[rng.IntN(len(statuses))],
			ProgramID: []string{"gala", "expo"}[rng.IntN(2)], TokenStatus: []string{"WAITING", "ADMITTED"}[rng.IntN(2)],
			Duration: time.Duration(rng.Int64N(int64(50 * time.Millisecond))), Admitted: rng.IntN(10) == 0,
			RetryAfter: time.Duration(rng.Int64N(30)) * time.Second, EstimatedWait: time.Duration(rng.Int64N(600)) * time.Second,
			Waiting: rng.Int64N(1e6), WaitingKnown: rng.IntN(2) == 0, BypassPasses: rng.Int64N(2)}
		if rng.IntN(200) == 0 {
			r.Status = 503
		}
		if r.Status >= 400 {
			r.Code = []string{"PROGRAM_NOT_FOUND", "STORE_UNAVAILABLE", "RATE_LIMITED"}[rng.IntN(3)]
		}
		perRequest.Observe(r)
		aggregated.Observe(r)
	}
	aggregated.Flush()
	_, stamps := parseLines(t, agg.Bytes())
	for _, at := range stamps {
		if at%10_000 != 0 {
			t.Fatalf("Timestamp %d is not the start of its interval", at)
		}
	}
	if diff := cmp.Diff(byMinute(t, each.Bytes()), byMinute(t, agg.Bytes())); diff != "" {
		t.Errorf("aggregated metrics differ from a line per request (-want +got):\n%s", diff)
	}
	t.Logf("a line per request: %d bytes; aggregated: %d", each.Len(), agg.Len())
	if each.Len() < 10*agg.Len() {
		t.Errorf("aggregated lines are %d bytes, a line per request %d: want 10 times fewer", agg.Len(), each.Len())
	}
}

// byMinute is what CloudWatch reads of out's lines by metric, dimensions
// and minute: sums of counters, maxima of levels, sorted values of
// distributions.
func byMinute(t *testing.T, out []byte) map[string][]float64 {
	t.Helper()
	readings := map[string][]float64{}
	for line := range strings.Lines(string(out)) {
		got, stamps := parseLines(t, []byte(line))
		for _, p := range got {
			def, ok := metricstest.ByName(p.Name)
			if !ok {
				t.Fatalf("metric %q is not in metrics.Defs", p.Name)
			}
			k := fmt.Sprintf("%s|%s|%d", p.Name, p.Dims, stamps[0]/60_000)
			switch def.Kind {
			case metrics.Counter:
				readings[k] = []float64{sum(readings[k]) + sum(p.Values)}
			case metrics.Level:
				readings[k] = []float64{slices.Max(append(readings[k], p.Values...))}
			default:
				readings[k] = append(readings[k], p.Values...)
				slices.Sort(readings[k])
			}
		}
	}
	return readings
}

func sum(vs []float64) float64 {
	s := 0.0
	for _, v := range vs {
		s += v
	}
	return s
}

// TestEMFWritesWhenDue: an aggregating sink holds an interval's metrics
// until a later interval starts, a 5xx is answered, or Flush; and splits a
// distribution over lines of at most 100 values.
func TestEMFWritesWhenDue(t *testing.T) {
	now := emfNow.Truncate(time.Minute)
	var buf bytes.Buffer
	emf := metrics.NewEMF(&buf, "WaitingRoom", metrics.WithEMFClock(func() time.Time { return now }), metrics.WithEMFInterval(10*time.Second))
	poll := metrics.Request{Op: metrics.OpPoll, Method: "GET", Status: 200, ProgramID: "gala", TokenStatus: "WAITING", Duration: time.Millisecond}
	for range 250 {
		emf.Observe(poll)
	}
	if buf.Len() != 0 {
		t.Fatalf("wrote within the interval: %s", buf.Bytes())
	}
	now = now.Add(9999 * time.Millisecond)
	emf.Observe(poll)
	if buf.Len() != 0 {
		t.Fatalf("wrote within the interval: %s", buf.Bytes())
	}
	now = now.Add(time.Millisecond)
	emf.Observe(poll) // the next interval: the first is written
	got, _ := parseLines(t, buf.Bytes())
	want := []published{
		{"Latency", "Milliseconds", "Operation=poll", slices.Repeat([]float64{1}, 100)},
		{"Latency", "Milliseconds", "Operation=poll", slices.Repeat([]float64{1}, 100)},
		{"Latency", "Milliseconds", "Operation=poll", slices.Repeat([]float64{1}, 51)},
		{"Polls", "Count", "Status=WAITING", []float64{251}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the first interval (-want +got):\n%s", diff)
	}
	buf.Reset()
	emf.Observe(metrics.Request{Op: metrics.OpPoll, Method: "GET", Status: 503, Code: "STORE_UNAVAILABLE"})
	got, _ = parseLines(t, buf.Bytes())
	want = []published{
		{"Latency", "Milliseconds", "Operation=poll", []float64{1, 0}},
		{"Polls", "Count", "Status=WAITING", []float64{1}},
		{"StoreUnavailable", "Count", "", []float64{1}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("a 503 writes at once (-want +got):\n%s", diff)
	}
	buf.Reset()
	emf.Observe(poll)
	emf.Flush()
	if got, _ := parseLines(t, buf.Bytes()); len(got) != 2 {
		t.Errorf("Flush wrote %v, want the Latency and Polls held", got)
	}
}

// TestEMFConcurrent checks that concurrent observations never interleave
// inside a line, and none is lost.
func TestEMFConcurrent(t *testing.T) {
	var buf bytes.Buffer
	emf := metrics.NewEMF(&buf, "WaitingRoom", metrics.WithEMFInterval(time.Millisecond))
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for range 200 {
				emf.Observe(metrics.Request{Op: metrics.OpPoll, Method: "GET", Status: 200, ProgramID: "p" + string(rune('a'+i)), TokenStatus: "WAITING", RetryAfter: time.Second})
			}
		})
	}
	wg.Wait()
	emf.Flush()
	got, _ := parseLines(t, buf.Bytes())
	polls := 0.0
	for _, p := range got {
		if p.Name == "Polls" {
			polls += sum(p.Values)
		}
	}
	if polls != 8*200 {
		t.Errorf("%v polls published, want %d", polls, 8*200)
	}
}

func TestDefs(t *testing.T) {
	names := map[string]bool{}
	proms := map[string]bool{}
	for _, d := range metrics.Defs {
		if d.Prom == "" || proms[d.Prom] {
			t.Errorf("%q: Prometheus name empty or repeated", d.Prom)
		}
		proms[d.Prom] = true
		if d.Name != "" {
			if names[d.Name] {
				t.Errorf("CloudWatch name %q repeated", d.Name)
			}
			names[d.Name] = true
		}
		if !slices.Contains(emfspec.Units, string(d.Unit)) {
			t.Errorf("%s: unit %q is not a CloudWatch unit", d.Name, d.Unit)
		}
		if d.Kind == metrics.Counter && (d.Unit != metrics.Count || !strings.HasSuffix(d.Prom, "_total")) {
			t.Errorf("%s: a counter counts (unit Count) and its Prometheus name ends in _total", d.Prom)
		}
		if d.Unit == metrics.Milliseconds && !strings.HasSuffix(d.Prom, "_seconds") {
			t.Errorf("%s: milliseconds are exported to Prometheus as seconds", d.Prom)
		}
		if len(d.Dimensions) > emfspec.MaxDimensionsPerSet {
			t.Errorf("%s: %d dimensions", d.Name, len(d.Dimensions))
		}
		if _, ok := metricstest.ByName(d.Name); d.Name != "" && !ok {
			t.Errorf("ByName(%q) finds nothing", d.Name)
		}
	}
	if _, ok := metricstest.ByName(""); ok {
		t.Error(`ByName("") found a Prometheus-only metric`)
	}
}

// TestMethodLabel: the Method dimension is one of a closed set, whatever
// the client sent (methods are case-sensitive tokens).
func TestMethodLabel(t *testing.T) {
	for in, want := range map[string]string{
		"GET": "GET", "HEAD": "HEAD", "POST": "POST", "PUT": "PUT", "PATCH": "PATCH", "DELETE": "DELETE",
		"OPTIONS": "OPTIONS", "CONNECT": "CONNECT", "TRACE": "TRACE",
		"get": "OTHER", "BREW": "OTHER", "PROPFIND": "OTHER", "": "OTHER", "GET ": "OTHER",
	} {
		if got := metrics.MethodLabel(in); got != want {
			t.Errorf("MethodLabel(%q) = %q, want %q", in, got, want)
		}
		if got := metrics.DimensionValue(metrics.DimMethod, metrics.Request{Method: in}); got != want {
			t.Errorf("DimensionValue(Method, %q) = %q, want %q", in, got, want)
		}
	}
}

func TestValidNamespace(t *testing.T) {
	for ns, ok := range map[string]bool{
		"WaitingRoom": true, "WaitingRoom/prod-eu": true, "Team #1: queue_x.y": true,
		"": false, "AWS/Lambda": false, " x": false, "naïve": false, "a\tb": false, strings.Repeat("n", 256): false,
	} {
		if err := metrics.ValidNamespace(ns); (err == nil) != ok {
			t.Errorf("ValidNamespace(%q) = %v, want ok %v", ns, err, ok)
		}
	}
}

func TestMiddleware(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/v1/queues/programs/{programId}", func(w http.ResponseWriter, r *http.Request) {
		n := metrics.Note(r.Context())
		n.TokenStatus, n.RetryAfter, n.Waiting, n.WaitingKnown = "WAITING", 5*time.Second, 42, true
		_, _ = io.WriteString(w, `{}`) // status by the first Write
	})
	mux.HandleFunc("POST /api/v1/queues/programs/{programId}", func(w http.ResponseWriter, r *http.Request) {
		metrics.Note(r.Context()).Code = "PROGRAM_CLOSED"
		w.WriteHeader(http.StatusConflict)
		w.WriteHeader(http.StatusOK) // ignored, as net/http ignores it
	})
	op := func(r *http.Request) metrics.Op {
		switch r.Pattern {
		case "GET /api/v1/queues/programs/{programId}":
			return metrics.OpPoll
		case "POST /api/v1/queues/programs/{programId}":
			return metrics.OpEnter
		}
		return metrics.OpOther
	}
	rec := &metricstest.Recorder{}
	srv := httptest.NewServer(metrics.Middleware(rec, op)(mux))
	defer srv.Close()
	for _, req := range []struct{ method, path string }{
		{"GET", "/api/v1/queues/programs/gala"},
		{"POST", "/api/v1/queues/programs/gala"},
		{"GET", "/nowhere"},
	} {
		r, _ := http.NewRequest(req.method, srv.URL+req.path, strings.NewReader(""))
		resp, err := http.DefaultClient.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	want := []metrics.Request{
		{Op: metrics.OpPoll, Method: "GET", Status: 200, ProgramID: "gala", TokenStatus: "WAITING", RetryAfter: 5 * time.Second, Waiting: 42, WaitingKnown: true},
		{Op: metrics.OpEnter, Method: "POST", Status: 409, Code: "PROGRAM_CLOSED", ProgramID: "gala"},
		{Op: metrics.OpOther, Method: "GET", Status: 404},
	}
	if diff := cmp.Diff(want, rec.Requests(), cmpopts.IgnoreFields(metrics.Request{}, "Duration")); diff != "" {
		t.Errorf("observed (-want +got):\n%s", diff)
	}
	for _, r := range rec.Requests() {
		if r.Duration <= 0 {
			t.Errorf("%s %d: no duration", r.Method, r.Status)
		}
	}
}

func TestNoteOutsideMiddleware(t *testing.T) {
	r := httptest.NewRequest("GET", "/", nil)
	metrics.Note(r.Context()).Code = "X" // must not panic
}
