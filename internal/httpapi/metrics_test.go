package httpapi_test

import (
	"encoding/json"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/example/waitingroom/internal/api"
	"github.com/example/waitingroom/internal/clock"
	"github.com/example/waitingroom/internal/httpapi"
	"github.com/example/waitingroom/internal/memstore"
	"github.com/example/waitingroom/internal/metrics"
	"github.com/example/waitingroom/internal/polling"
	"github.com/example/waitingroom/internal/queue"
	"github.com/example/waitingroom/internal/testing/metricstest"
)

// TestObserver walks a program through the handler and checks what each
// answer told the metrics: its route's op, status and code, the token's
// status and delays, the first sighting of an admission, the queue length
// where the answer knows it.
func TestObserver(t *testing.T) {
	c := clock.NewFake(t0)
	svc := queue.NewService(memstore.New(), polling.DefaultTiers(), queue.WithClock(c), queue.WithRand(rand.New(rand.NewPCG(seed, seed))))
	rec := &metricstest.Recorder{}
	h := checked(t, httpapi.New(svc, httpapi.BearerAuth("s3cret"), httpapi.WithLogger(discard), httpapi.WithObserver(rec)))
	do := func(method, path, token, auth, body string) map[string]any {
		t.Helper()
		req := httptest.NewRequest(method, path, strings.NewReader(body))
		if token != "" {
			req.Header.Set(api.HeaderToken, token)
		}
		if auth != "" {
			req.Header.Set("Authorization", "Bearer "+auth)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		var m map[string]any
		_ = json.Unmarshal(w.Body.Bytes(), &m)
		return m
	}
	const queuePath, adminPath = "/api/v1/queues/programs/gala", "/api/v1/admin/programs/gala"
	ms := func(m map[string]any, key string) time.Duration {
		f, _ := m[key].(float64)
		return time.Duration(f) * time.Millisecond
	}

	do("PUT", adminPath, "", "s3cret", `{"admissionRatePerSecond": 1, "paused": true}`)
	do("PUT", adminPath, "", "", `{"paused": false}`)
	first := do("POST", queuePath, "", "", "")
	second := do("POST", queuePath, "", "", "")
	poll := do("GET", queuePath, first["tokenId"].(string), "", "")
	do("GET", "/nowhere", "", "", "")
	do("PATCH", queuePath, "", "", "")
	do("POST", adminPath+"/admissions", "", "s3cret", `{"count": 1}`)
	c.Advance(time.Second)
	do("GET", queuePath, first["tokenId"].(string), "", "")
	do("GET", queuePath, first["tokenId"].(string), "", "")
	do("DELETE", queuePath, first["tokenId"].(string), "", "")
	do("POST", "/api/v1/queues/programs/nope", "", "", "")

	if poll["status"] != "WAITING" || ms(poll, "retryAfterMs") <= 0 {
		t.Fatalf("poll answered %v", poll)
	}
	want := []metrics.Request{
		{Op: metrics.OpAdmin, Method: "PUT", Status: 201, ProgramID: "gala", WaitingKnown: true},
		{Op: metrics.OpAdmin, Method: "PUT", Status: 401, Code: "UNAUTHORIZED", ProgramID: "gala"},
		{Op: metrics.OpEnter, Method: "POST", Status: 201, ProgramID: "gala", TokenStatus: "WAITING", RetryAfter: ms(first, "retryAfterMs"), Waiting: 1, WaitingKnown: true},
		{Op: metrics.OpEnter, Method: "POST", Status: 201, ProgramID: "gala", TokenStatus: "WAITING", RetryAfter: ms(second, "retryAfterMs"), Waiting: 2, WaitingKnown: true},
		{Op: metrics.OpPoll, Method: "GET", Status: 200, ProgramID: "gala", TokenStatus: "WAITING", RetryAfter: ms(poll, "retryAfterMs")},
		{Op: metrics.OpOther, Method: "GET", Status: 404, Code: "NOT_FOUND"},
		{Op: metrics.OpOther, Method: "PATCH", Status: 405, Code: "METHOD_NOT_ALLOWED", ProgramID: "gala"},
		{Op: metrics.OpAdmin, Method: "POST", Status: 200, ProgramID: "gala", Waiting: 1, WaitingKnown: true},
		{Op: metrics.OpPoll, Method: "GET", Status: 200, ProgramID: "gala", TokenStatus: "ADMITTED", Admitted: true},
		{Op: metrics.OpPoll, Method: "GET", Status: 200, ProgramID: "gala", TokenStatus: "ADMITTED"},
		{Op: metrics.OpLeave, Method: "DELETE", Status: 204, ProgramID: "gala"},
		{Op: metrics.OpEnter, Method: "POST", Status: 404, Code: "PROGRAM_NOT_FOUND", ProgramID: "nope"},
	}
	if diff := cmp.Diff(want, rec.Requests(), cmpopts.IgnoreFields(metrics.Request{}, "Duration")); diff != "" {
		t.Errorf("observed (-want +got):\n%s", diff)
	}
}

// TestObserverEstimatedWait: a WAITING answer on a program that admits
// tells the metrics the estimated wait it told the person.
func TestObserverEstimatedWait(t *testing.T) {
	rec := &metricstest.Recorder{}
	h := checked(t, httpapi.NewQueue(newService(t), httpapi.WithLogger(discard), httpapi.WithObserver(rec)))
	req := httptest.NewRequest("GET", "/api/v1/queues/programs/demo", nil)
	req.Header.Set(api.HeaderToken, "waitingTokenFixture001")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	var body struct{ EstimatedWaitMs, RetryAfterMs int64 }
	if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil || w.Code != http.StatusOK || body.EstimatedWaitMs <= 0 {
		t.Fatalf("%d %s: want a WAITING answer with an estimated wait", w.Code, w.Body)
	}
	if len(rec.Requests()) != 1 {
		t.Fatalf("observed %d requests, want 1", len(rec.Requests()))
	}
	got := rec.Requests()[0]
	if got.EstimatedWait != time.Duration(body.EstimatedWaitMs)*time.Millisecond || got.RetryAfter != time.Duration(body.RetryAfterMs)*time.Millisecond {
		t.Errorf("observed wait %s, retry %s; answered %d ms, %d ms", got.EstimatedWait, got.RetryAfter, body.EstimatedWaitMs, body.RetryAfterMs)
	}
}
