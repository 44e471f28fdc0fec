package httpapi_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/example/waitingroom/internal/api"
	"github.com/example/waitingroom/internal/clock"
	"github.com/example/waitingroom/internal/httpapi"
	"github.com/example/waitingroom/internal/memstore"
	"github.com/example/waitingroom/internal/polling"
	"github.com/example/waitingroom/internal/queue"
)

// settingsAPI is the API over an empty store with a fake clock and a
// program cache, each answer held to docs/openapi.yaml.
func settingsAPI(t *testing.T) (http.Handler, *clock.Fake) {
	t.Helper()
	c := clock.NewFake(t0)
	svc := queue.NewService(memstore.New(), polling.DefaultTiers(), queue.WithClock(c), queue.WithProgramCache(time.Second))
	return checked(t, httpapi.New(svc, httpapi.BearerAuth("s3cret"), httpapi.WithLogger(discard))), c
}

// call sends one request to h and decodes its JSON answer into out.
func call(t *testing.T, h http.Handler, method, path string, hdr http.Header, body string, out any) int {
	t.Helper()
	r := httptest.NewRequest(method, path, strings.NewReader(body))
	for k, vs := range hdr {
		r.Header[k] = vs
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if out != nil && w.Body.Len() > 0 {
		if err := json.Unmarshal(w.Body.Bytes(), out); err != nil {
			t.Fatalf("%s %s: %v in %s", method, path, err, w.Body)
		}
	}
	return w.Code
}

var bearer = http.Header{"Authorization": {"Bearer s3cret"}}

// TestClosesAtOnTheWire: closesAt is set by a PUT and shown in the admin
// answer and in a WAITING token's; from that instant an enter answers 409
// PROGRAM_CLOSED saying when, while a poll goes on.
func TestClosesAtOnTheWire(t *testing.T) {
	h, c := settingsAPI(t)
	closes := t0.Add(time.Hour).Truncate(time.Second)
	var p api.Program
	if status := call(t, h, "PUT", "/api/v1/admin/programs/sale", bearer, `{"paused":true,"closesAt":"`+closes.In(time.FixedZone("KST", 9*3600)).Format(time.RFC3339)+`"}`, &p); status != 201 || !p.ClosesAt.Equal(closes) {
		t.Fatalf("PUT closesAt: %d %+v, want 201 closing at %v", status, p, closes)
	}
	var tok api.Token
	if status := call(t, h, "POST", "/api/v1/queues/programs/sale", nil, "", &tok); status != 201 || !tok.ClosesAt.Equal(closes) {
		t.Fatalf("enter: %d %+v, want closesAt %v", status, tok, closes)
	}
	c.Advance(time.Hour)
	var e api.Error
	if status := call(t, h, "POST", "/api/v1/queues/programs/sale", nil, "", &e); status != 409 || e.Code != api.CodeProgramClosed || !strings.Contains(e.Message, closes.Format(time.RFC3339)) {
		t.Errorf("enter at the close: %d %+v, want 409 PROGRAM_CLOSED at %s", status, e, closes.Format(time.RFC3339))
	}
	var polled api.Token
	if status := call(t, h, "GET", "/api/v1/queues/programs/sale", http.Header{api.HeaderToken: {tok.TokenID}}, "", &polled); status != 200 || polled.Status != api.StatusWaiting || polled.Position != 1 || !polled.ClosesAt.Equal(closes) {
		t.Errorf("poll after the close: %d %+v, want WAITING at 1 with closesAt", status, polled)
	}
	if status := call(t, h, "PUT", "/api/v1/admin/programs/sale", bearer, `{"closesAt":""}`, &e); status != 409 || e.Code != api.CodeInvalidSettings {
		t.Errorf("clear a close that has passed: %d %+v, want 409 INVALID_SETTINGS", status, e)
	}
}
