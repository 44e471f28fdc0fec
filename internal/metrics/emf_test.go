package metrics_test

import (
	"bufio"
	"bytes"
	"io"
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

func parseLine(t *testing.T, line []byte) (emfspec.Document, []published) {
	t.Helper()
	doc, err := emfspec.Parse(line)
	if err != nil {
		t.Fatalf("not a valid EMF document: %v\n%s", err, line)
	}
	var out []published
	for _, m := range doc.Metrics {
		if m.Namespace != "WaitingRoom" {
			t.Errorf("metric %s in namespace %q, want WaitingRoom", m.Name, m.Namespace)
		}
		var dims []string
		for k, v := range m.Dimensions {
			dims = append(dims, k+"="+v)
		}
		sort.Strings(dims)
		out = append(out, published{m.Name, m.Unit, strings.Join(dims, ","), m.Values})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return doc, out
}

// emfNow is the EMF clock of the tests: a time with milliseconds, and
// nanoseconds below them that the Timestamp drops.
var emfNow = time.Date(2026, 3, 1, 12, 34, 56, 789_654_321, time.UTC)

// TestEMF: each request is one EMF line with its metrics, dimensions and
// properties, stamped with the sink's clock to the millisecond.
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
			line := buf.Bytes()
			if bytes.Count(line, []byte("\n")) != 1 || line[len(line)-1] != '\n' {
				t.Fatalf("want exactly one line, got %q", line)
			}
			doc, got := parseLine(t, bytes.TrimSuffix(line, []byte("\n")))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("published metrics (-want +got):\n%s\nline: %s", diff, line)
			}
			if doc.Timestamp != emfNow.UnixMilli() {
				t.Errorf("Timestamp %d, want the clock's %d", doc.Timestamp, emfNow.UnixMilli())
			}
			if doc.Root["HttpStatus"] == nil || doc.Root["Method"] != metrics.MethodLabel(tc.req.Method) {
				t.Errorf("line lacks the HttpStatus and Method properties: %s", line)
			}
		})
	}
}

// TestEMFConcurrent checks that concurrent observations never interleave
// inside a line.
func TestEMFConcurrent(t *testing.T) {
	var buf bytes.Buffer
	emf := metrics.NewEMF(&buf, "WaitingRoom")
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for range 200 {
				emf.Observe(metrics.Request{Op: metrics.OpPoll, Method: "GET", Status: 200, ProgramID: "p" + string(rune('a'+i)), TokenStatus: "WAITING", RetryAfter: time.Second})
			}
		})
	}
	wg.Wait()
	sc := bufio.NewScanner(&buf)
	n := 0
	for sc.Scan() {
		if _, err := emfspec.Parse(sc.Bytes()); err != nil {
			t.Fatalf("line %d: %v", n, err)
		}
		n++
	}
	if n != 8*200 {
		t.Errorf("%d lines, want %d", n, 8*200)
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
