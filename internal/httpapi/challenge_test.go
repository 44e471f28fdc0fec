package httpapi_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/example/waitingroom/internal/api"
	"github.com/example/waitingroom/internal/challenge"
	"github.com/example/waitingroom/internal/clock"
	"github.com/example/waitingroom/internal/httpapi"
	"github.com/example/waitingroom/internal/memstore"
	"github.com/example/waitingroom/internal/polling"
	"github.com/example/waitingroom/internal/queue"
)

// TestHandlerChallenge walks a program with a proof of work through the
// API: its challenge (never cached), an enter with the solution (201),
// the same proof again (403 CHALLENGE_FAILED), and an unknown program.
func TestHandlerChallenge(t *testing.T) {
	svc := queue.NewService(memstore.New(), polling.DefaultTiers(), queue.WithClock(clock.NewFake(t0)))
	if _, _, err := svc.PutProgram(t.Context(), "gala", api.ProgramSettings{Paused: new(true), ChallengeBits: new(int64(10))}); err != nil {
		t.Fatal(err)
	}
	h := checked(t, httpapi.NewQueue(svc, httpapi.WithLogger(discard)))
	do := func(method, path string, header map[string]string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(method, path, nil)
		for k, v := range header {
			r.Header.Set(k, v)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	w := do("GET", "/api/v1/queues/programs/gala/challenge", nil)
	got := decode(t, w.Body.String())
	c, _ := got["challenge"].(string)
	if w.Code != http.StatusOK || w.Header().Get("Cache-Control") != "no-store" || got["bits"] != 10.0 || len(c) != challenge.EncodedLen || got["expiresAt"] == nil {
		t.Fatalf("challenge: %d %v %s", w.Code, w.Header(), w.Body)
	}
	sol, _, err := challenge.Solve(t.Context(), c, 10)
	if err != nil {
		t.Fatal(err)
	}
	proof := map[string]string{api.HeaderChallenge: c, api.HeaderSolution: sol}
	if w := do("POST", "/api/v1/queues/programs/gala", proof); w.Code != http.StatusCreated {
		t.Errorf("enter with the proof: %d %s, want 201", w.Code, w.Body)
	}
	w = do("POST", "/api/v1/queues/programs/gala", proof)
	if got := decode(t, w.Body.String()); w.Code != http.StatusForbidden || got["code"] != api.CodeChallengeFailed {
		t.Errorf("the proof again: %d %s, want 403 %s", w.Code, w.Body, api.CodeChallengeFailed)
	}
	w = do("GET", "/api/v1/queues/programs/nope/challenge", nil)
	if got := decode(t, w.Body.String()); w.Code != http.StatusNotFound || got["code"] != api.CodeProgramNotFound {
		t.Errorf("challenge of an unknown program: %d %s, want 404", w.Code, w.Body)
	}
}
