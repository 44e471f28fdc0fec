package httpapi_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/example/waitingroom/internal/api"
	"github.com/example/waitingroom/internal/httpapi"
	"github.com/example/waitingroom/internal/polling"
	"github.com/example/waitingroom/internal/queue"
	"github.com/example/waitingroom/internal/tools/memstore"
	"github.com/example/waitingroom/internal/tools/simclock"
	"github.com/example/waitingroom/passverify"
)

// TestJWKSFailOpen: a program's failOpenUntil, set through the admin API,
// is in the JWKS's failOpen member, and a site's passverify Gate of that
// program, and of no other, lets people in without a pass.
func TestJWKSFailOpen(t *testing.T) {
	svc := queue.NewService(memstore.New(), polling.DefaultTiers(), queue.WithClock(simclock.NewFake(t0)), queue.WithLogger(discard))
	const iss = "https://queue.example.com"
	h := checked(t, httpapi.New(svc, httpapi.BearerAuth("s3cret"), httpapi.WithLogger(discard), httpapi.WithPasses(passIssuer(t, iss))))
	// The JWKS lists the programs again at most every 30 s: set them first.
	for _, put := range []struct{ id, body string }{
		{"gala", `{"failOpenUntil":"2099-01-01T09:00:00+09:00"}`},
		{"expo", `{"paused":true}`},
	} {
		if w := record(h, http.MethodPut, "/api/v1/admin/programs/"+put.id, bearer, put.body); w.Code != http.StatusCreated {
			t.Fatalf("PUT %s %s: %d %s", put.id, put.body, w.Code, w.Body)
		}
	}
	w := record(h, http.MethodGet, api.JWKSPath, nil, "")
	var keys map[string]any
	if err := json.Unmarshal([]byte(testJWKS), &keys); err != nil {
		t.Fatal(err)
	}
	keys["failOpen"] = map[string]any{"gala": "2099-01-01T00:00:00Z"}
	want, _ := json.Marshal(keys)
	if w.Code != http.StatusOK {
		t.Fatalf("JWKS: %d %s", w.Code, w.Body)
	}
	assertJSONEqual(t, w.Body.String(), string(want))

	srv := httptest.NewServer(h)
	defer srv.Close()
	gate := func(program string) *passverify.Gate {
		v, err := passverify.New(passverify.Config{JWKSURL: srv.URL + api.JWKSPath, Issuer: iss, ProgramID: program, HTTPClient: srv.Client()})
		if err != nil {
			t.Fatal(err)
		}
		g, err := passverify.NewGate(v, passverify.GateConfig{WaitingRoomURL: iss + "/waiting-room/" + program, CookieSecrets: [][]byte{make([]byte, 32)}})
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	site := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		until, ok := passverify.FailOpenFromContext(r.Context())
		fmt.Fprintf(w, "open %v until %s", ok, until.Format(time.RFC3339))
	})
	type visit struct {
		Status   int
		Location string
		Body     string
	}
	for _, tt := range []struct {
		program string
		want    visit
	}{
		{"gala", visit{Status: http.StatusOK, Body: "open true until 2099-01-01T00:00:00Z"}},
		{"expo", visit{Status: http.StatusSeeOther, Location: iss + "/waiting-room/expo"}},
	} {
		rec := httptest.NewRecorder()
		gate(tt.program).Wrap(site).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "https://shop.example.com/", nil))
		got := visit{Status: rec.Code, Location: rec.Header().Get("Location")}
		if rec.Code == http.StatusOK {
			got.Body = rec.Body.String()
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("a visitor without a pass to %s (-want +got):\n%s", tt.program, diff)
		}
	}
}

// TestJWKSFailOpenListFails: when the programs cannot be listed, the JWKS
// is the keys alone, and the failure is logged.
func TestJWKSFailOpenListFails(t *testing.T) {
	var logs bytes.Buffer
	h := checked(t, httpapi.NewQueue(queue.NewService(brokenStore{memstore.New()}, polling.DefaultTiers()),
		httpapi.WithLogger(slog.New(slog.NewJSONHandler(&logs, nil))), httpapi.WithPasses(passIssuer(t, ""))))
	w := record(h, http.MethodGet, api.JWKSPath, nil, "")
	if w.Code != http.StatusOK || w.Body.String() != testJWKS {
		t.Errorf("JWKS: %d %s, want 200 %s", w.Code, w.Body, testJWKS)
	}
	if !strings.Contains(logs.String(), `"msg":"JWKS break-glasses"`) || !strings.Contains(logs.String(), "list programs") {
		t.Errorf("logs %s, want the failed listing", logs.String())
	}
}
