package httpapi_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"

	"github.com/example/waitingroom/internal/api"
	"github.com/example/waitingroom/internal/clock"
	"github.com/example/waitingroom/internal/httpapi"
	"github.com/example/waitingroom/internal/memstore"
	"github.com/example/waitingroom/internal/polling"
	"github.com/example/waitingroom/internal/queue"
)

// heldFillStore is a memstore whose token fills wait until release is
// closed, and signal held when the first one starts waiting.
type heldFillStore struct {
	*memstore.Store
	once    sync.Once
	held    chan struct{}
	release chan struct{}
}

func (s *heldFillStore) FillToken(ctx context.Context, t queue.Token, claim string) (queue.Token, error) {
	s.once.Do(func() { close(s.held) })
	<-s.release
	return s.Store.FillToken(ctx, t, claim)
}

// TestHandlerEnterInProgress: while an enter with a key is taking its
// ticket, another enter with the key answers 503 ENTER_IN_PROGRESS with
// Retry-After and takes no ticket; once the first has answered 201, a retry
// answers its token with 200.
func TestHandlerEnterInProgress(t *testing.T) {
	store := &heldFillStore{Store: memstore.New(), held: make(chan struct{}), release: make(chan struct{})}
	// The second enter waits for the first's token on this clock, whose
	// Sleep moves it at once: its wait runs out without real time passing.
	svc := queue.NewService(store, polling.DefaultTiers(), queue.WithClock(clock.NewFake(t0)))
	if _, _, err := svc.PutProgram(context.Background(), "gala", api.ProgramSettings{Paused: new(true)}); err != nil {
		t.Fatal(err)
	}
	h := checked(t, httpapi.NewQueue(svc, httpapi.WithLogger(discard)))
	const key = "in-progress-key-3b1d-4c2e"
	enter := func() *httptest.ResponseRecorder {
		r := httptest.NewRequest("POST", "/api/v1/queues/programs/gala", nil)
		r.Header.Set(api.HeaderIdempotencyKey, key)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	body := func(w *httptest.ResponseRecorder) map[string]any {
		var m map[string]any
		_ = json.Unmarshal(w.Body.Bytes(), &m)
		return m
	}
	first := make(chan *httptest.ResponseRecorder)
	go func() { first <- enter() }()
	<-store.held

	w := enter()
	if b := body(w); w.Code != 503 || b["code"] != api.CodeEnterInProgress {
		t.Errorf("enter while another with the key takes its ticket = %d %v; want 503 %s", w.Code, b, api.CodeEnterInProgress)
	}
	if s, err := strconv.Atoi(w.Header().Get("Retry-After")); err != nil || s < 1 {
		t.Errorf("Retry-After %q, want whole seconds ≥ 1", w.Header().Get("Retry-After"))
	}
	close(store.release)
	a := <-first
	again := enter()
	if a.Code != 201 || again.Code != 200 || body(a)["tokenId"] != body(again)["tokenId"] || body(again)["ticket"] != 1.0 {
		t.Errorf("first %d %s, retry %d %s; want 201 then 200 with the same token, ticket 1", a.Code, a.Body, again.Code, again.Body)
	}
}
