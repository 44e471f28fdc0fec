package httpapi_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/example/waitingroom/internal/api"
	"github.com/example/waitingroom/internal/app"
	"github.com/example/waitingroom/internal/clock"
	"github.com/example/waitingroom/internal/httpapi"
	"github.com/example/waitingroom/internal/memstore"
	"github.com/example/waitingroom/internal/metrics"
	"github.com/example/waitingroom/internal/polling"
	"github.com/example/waitingroom/internal/queue"
	"github.com/example/waitingroom/internal/testing/metricstest"
	"github.com/example/waitingroom/passverify"
)

// TestHandlerBypass: the passes route answers passes that passverify
// accepts, against the JWKS route, as bypass passes of the program; the
// metrics count them; an unknown program is 404, and a cap without room
// 409 NO_ROOM with Retry-After.
func TestHandlerBypass(t *testing.T) {
	const iss = "https://queue.example.com"
	c := clock.NewFake(t0)
	keys := passIssuer(t, iss)
	svc := queue.NewService(memstore.New(), polling.DefaultTiers(), queue.WithClock(c), queue.WithPassSigner(app.Signer(keys)))
	rec := &metricstest.Recorder{}
	h := checked(t, httpapi.New(svc, httpapi.BearerAuth("s3cret"), httpapi.WithLogger(discard), httpapi.WithPasses(keys), httpapi.WithObserver(rec)))
	srv := httptest.NewServer(h)
	defer srv.Close()
	do := func(method, path, body string) *httptest.ResponseRecorder {
		t.Helper()
		r := httptest.NewRequest(method, path, strings.NewReader(body))
		r.Header.Set("Authorization", "Bearer s3cret")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	do("PUT", "/api/v1/admin/programs/gala", `{"closed":true}`)
	do("PUT", "/api/v1/admin/programs/capped", `{"maxActiveUsers":3,"paused":true}`)

	w := do("POST", "/api/v1/admin/programs/gala/passes", `{"count":3,"validSeconds":7200}`)
	var got api.BypassPasses
	if err := json.Unmarshal(w.Body.Bytes(), &got); w.Code != http.StatusOK || err != nil || len(got.Passes) != 3 {
		t.Fatalf("issue: %d %s", w.Code, w.Body)
	}
	v, err := passverify.New(passverify.Config{JWKSURL: srv.URL + api.JWKSPath, Issuer: iss, ProgramID: "gala", Now: c.Now})
	if err != nil {
		t.Fatal(err)
	}
	for i, pass := range got.Passes {
		claims, err := v.Verify(t.Context(), pass)
		if err != nil {
			t.Fatalf("pass %d: %v", i, err)
		}
		want := passverify.Claims{Issuer: iss, ProgramID: "gala", AdmittedAt: t0.Truncate(time.Second), ExpiresAt: t0.Add(2 * time.Hour).Truncate(time.Second), Bypass: true}
		if diff := cmp.Diff(want, claims, cmpopts.IgnoreFields(passverify.Claims{}, "TokenID", "JTI")); diff != "" {
			t.Errorf("pass %d (-want +got):\n%s", i, diff)
		}
	}

	if w := do("POST", "/api/v1/admin/programs/nobody/passes", `{"count":1,"validSeconds":60}`); w.Code != 404 || decodeCode(w.Body.String()) != api.CodeProgramNotFound {
		t.Errorf("unknown program: %d %s", w.Code, w.Body)
	}
	if w := do("POST", "/api/v1/admin/programs/capped/passes", `{"count":2,"validSeconds":60}`); w.Code != 200 {
		t.Errorf("2 passes under a cap of 3: %d %s", w.Code, w.Body)
	}
	if w := do("GET", "/api/v1/admin/programs/capped", ""); decode(t, w.Body.String())["bypassHeld"] != 2.0 {
		t.Errorf("the program after 2 passes: %s, want bypassHeld 2", w.Body)
	}
	if w := do("POST", "/api/v1/admin/programs/capped/passes", `{"count":2,"validSeconds":60}`); w.Code != 409 || decodeCode(w.Body.String()) != api.CodeNoRoom || w.Header().Get(api.HeaderRetryAfter) == "" {
		t.Errorf("2 more under a cap of 3: %d %s, Retry-After %q", w.Code, w.Body, w.Header().Get(api.HeaderRetryAfter))
	}
	for _, body := range []string{`{"validSeconds":60}`, `{"count":1}`, `{"count":1,"validSeconds":9223372036854775807}`, `{"count":1,"validSeconds":-9223372036854775808}`} {
		if w := do("POST", "/api/v1/admin/programs/gala/passes", body); w.Code != 400 {
			t.Errorf("%s: %d %s, want 400", body, w.Code, w.Body)
		}
	}

	var counted []metrics.Request
	for _, r := range rec.Requests() {
		if r.BypassPasses > 0 {
			counted = append(counted, r)
		}
	}
	want := []metrics.Request{{Op: metrics.OpAdmin, Method: "POST", Status: 200, ProgramID: "gala", BypassPasses: 3}, {Op: metrics.OpAdmin, Method: "POST", Status: 200, ProgramID: "capped", BypassPasses: 2}}
	if diff := cmp.Diff(want, counted, cmpopts.IgnoreFields(metrics.Request{}, "Duration")); diff != "" {
		t.Errorf("the metrics' bypass passes (-want +got):\n%s", diff)
	}
}
