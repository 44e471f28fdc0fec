package metrics_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/example/waitingroom/internal/metrics"
	"github.com/example/waitingroom/internal/testing/metricstest"
)

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
