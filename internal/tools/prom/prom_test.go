package prom_test

import (
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/example/waitingroom/internal/metrics"
	"github.com/example/waitingroom/internal/tools/prom"
)

// scrape GETs h and flattens the exposition into "name{k=v,…}" -> value;
// a histogram contributes its _count and _sum.
func scrape(t *testing.T, h http.Handler) map[string]float64 {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != 200 {
		t.Fatalf("GET /metrics: %d", rec.Code)
	}
	if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Errorf("Content-Type %q, want the text format", ct)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(rec.Body)
	if err != nil {
		t.Fatalf("exposition does not parse: %v", err)
	}
	out := map[string]float64{}
	for name, f := range fams {
		for _, m := range f.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			sort.Strings(labels)
			key := "{" + strings.Join(labels, ",") + "}"
			switch f.GetType() {
			case dto.MetricType_COUNTER:
				out[name+key] = m.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				out[name+key] = m.GetGauge().GetValue()
			case dto.MetricType_HISTOGRAM:
				out[name+"_count"+key] = float64(m.GetHistogram().GetSampleCount())
				out[name+"_sum"+key] = m.GetHistogram().GetSampleSum()
			default:
				t.Errorf("%s: unexpected type %v", name, f.GetType())
			}
		}
	}
	return out
}

func TestSink(t *testing.T) {
	s := prom.New()
	observe := func(n int, r metrics.Request) {
		r.Duration = 2 * time.Millisecond
		for range n {
			s.Observe(r)
		}
	}
	observe(3, metrics.Request{Op: metrics.OpEnter, Method: "POST", Status: 201, ProgramID: "gala", TokenStatus: "WAITING", RetryAfter: time.Second, Waiting: 7, WaitingKnown: true})
	observe(1, metrics.Request{Op: metrics.OpEnter, Method: "POST", Status: 201, ProgramID: "fair", TokenStatus: "WAITING", RetryAfter: time.Second, Waiting: 1, WaitingKnown: true})
	observe(5, metrics.Request{Op: metrics.OpPoll, Method: "GET", Status: 200, ProgramID: "gala", TokenStatus: "WAITING", RetryAfter: 2 * time.Second, EstimatedWait: time.Minute, Waiting: 5, WaitingKnown: true})
	observe(2, metrics.Request{Op: metrics.OpPoll, Method: "GET", Status: 200, ProgramID: "gala", TokenStatus: "ADMITTED", Admitted: true})
	observe(1, metrics.Request{Op: metrics.OpLeave, Method: "DELETE", Status: 204, ProgramID: "gala"})
	observe(1, metrics.Request{Op: metrics.OpEnter, Method: "POST", Status: 404, Code: "PROGRAM_NOT_FOUND", ProgramID: "nope"})
	observe(2, metrics.Request{Op: metrics.OpPoll, Method: "GET", Status: 503, Code: "STORE_UNAVAILABLE", ProgramID: "gala"})
	observe(1, metrics.Request{Op: metrics.OpAdmin, Method: "PUT", Status: 201, ProgramID: "gala"})
	// Any token is a method: those that are not standard count as OTHER.
	observe(2, metrics.Request{Op: metrics.OpOther, Method: "BREW", Status: 404, Code: "NOT_FOUND"})
	observe(1, metrics.Request{Op: metrics.OpOther, Method: "get", Status: 404, Code: "NOT_FOUND"})

	got := scrape(t, s.Handler())
	want := map[string]float64{
		"waitingroom_requests_total{http_status=201,method=POST,operation=enter}":   4,
		"waitingroom_requests_total{http_status=200,method=GET,operation=poll}":     7,
		"waitingroom_requests_total{http_status=204,method=DELETE,operation=leave}": 1,
		"waitingroom_requests_total{http_status=404,method=POST,operation=enter}":   1,
		"waitingroom_requests_total{http_status=503,method=GET,operation=poll}":     2,
		"waitingroom_requests_total{http_status=201,method=PUT,operation=admin}":    1,
		"waitingroom_requests_total{http_status=404,method=OTHER,operation=other}":  3,

		"waitingroom_request_duration_seconds_count{operation=enter}": 5,
		"waitingroom_request_duration_seconds_sum{operation=enter}":   0.010,
		"waitingroom_request_duration_seconds_count{operation=poll}":  9,
		"waitingroom_request_duration_seconds_sum{operation=poll}":    0.018,
		"waitingroom_request_duration_seconds_count{operation=leave}": 1,
		"waitingroom_request_duration_seconds_sum{operation=leave}":   0.002,
		"waitingroom_request_duration_seconds_count{operation=admin}": 1,
		"waitingroom_request_duration_seconds_sum{operation=admin}":   0.002,
		"waitingroom_request_duration_seconds_count{operation=other}": 3,
		"waitingroom_request_duration_seconds_sum{operation=other}":   0.006,

		"waitingroom_enters_total{program_id=gala}":          3,
		"waitingroom_enters_total{program_id=fair}":          1,
		"waitingroom_polls_total{status=WAITING}":            5,
		"waitingroom_polls_total{status=ADMITTED}":           2,
		"waitingroom_admissions_total{program_id=gala}":      2,
		"waitingroom_leaves_total{program_id=gala}":          1,
		"waitingroom_rejected_total{code=PROGRAM_NOT_FOUND}": 1,
		"waitingroom_rejected_total{code=NOT_FOUND}":         3,
		"waitingroom_store_unavailable_total{}":              2,

		"waitingroom_retry_after_seconds_count{}":                   9,
		"waitingroom_retry_after_seconds_sum{}":                     4*1 + 5*2,
		"waitingroom_estimated_wait_seconds_count{program_id=gala}": 5,
		"waitingroom_estimated_wait_seconds_sum{program_id=gala}":   5 * 60,
		"waitingroom_waiting{program_id=gala}":                      5,
		"waitingroom_waiting{program_id=fair}":                      1,
	}
	if diff := cmp.Diff(want, got, cmpopts.EquateApprox(0, 1e-9)); diff != "" {
		t.Errorf("exposition (-want +got):\n%s", diff)
	}
}

// TestSinkNames checks that every metric of the table is exported under
// its Prometheus name once observed.
func TestSinkNames(t *testing.T) {
	s := prom.New()
	s.Observe(metrics.Request{Op: metrics.OpPoll, Method: "GET", Status: 200, ProgramID: "g", TokenStatus: "ADMITTED", Admitted: true,
		RetryAfter: time.Second, EstimatedWait: time.Second, Waiting: 1, WaitingKnown: true})
	s.Observe(metrics.Request{Op: metrics.OpEnter, Method: "POST", Status: 201, ProgramID: "g", Account: true})
	s.Observe(metrics.Request{Op: metrics.OpHandoff, Method: "POST", Status: 201, ProgramID: "g", TokenStatus: "WAITING"})
	s.Observe(metrics.Request{Op: metrics.OpLeave, Method: "DELETE", Status: 204, ProgramID: "g"})
	s.Observe(metrics.Request{Op: metrics.OpAdmin, Method: "POST", Status: 200, ProgramID: "g", BypassPasses: 3})
	s.Observe(metrics.Request{Op: metrics.OpPoll, Method: "GET", Status: 400, Code: "INVALID_TOKEN"})
	s.Observe(metrics.Request{Op: metrics.OpPoll, Method: "GET", Status: 503, Code: "BUSY"})
	fams, err := s.Gatherer().Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, f := range fams {
		got[f.GetName()] = true
	}
	for _, d := range metrics.Defs {
		if !got[d.Prom] {
			t.Errorf("%s (%s) not exported", d.Prom, d.Name)
		}
	}
}
