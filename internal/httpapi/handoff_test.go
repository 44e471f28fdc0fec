package httpapi_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/example/waitingroom/internal/api"
	"github.com/example/waitingroom/internal/enqueue"
	"github.com/example/waitingroom/internal/httpapi"
	"github.com/example/waitingroom/internal/polling"
	"github.com/example/waitingroom/internal/queue"
	"github.com/example/waitingroom/internal/testing/enqueuetest"
	"github.com/example/waitingroom/internal/tools/memstore"
	"github.com/example/waitingroom/internal/tools/sampleevents"
	"github.com/example/waitingroom/internal/tools/simclock"
)

// handoffFaultStore fails handoff writes and token reads while fail is set.
type handoffFaultStore struct {
	*memstore.Store
	fail atomic.Bool
}

var errHandoffStore = errors.New("store down")

func (s *handoffFaultStore) PutHandoff(ctx context.Context, h queue.Handoff, t queue.Token, notBefore time.Time) error {
	if s.fail.Load() {
		return errHandoffStore
	}
	return s.Store.PutHandoff(ctx, h, t, notBefore)
}

func (s *handoffFaultStore) GetHandoff(ctx context.Context, hash string) (queue.Handoff, error) {
	if s.fail.Load() {
		return queue.Handoff{}, errHandoffStore
	}
	return s.Store.GetHandoff(ctx, hash)
}

func (s *handoffFaultStore) GetToken(ctx context.Context, id string) (queue.Token, error) {
	if s.fail.Load() {
		return queue.Token{}, errHandoffStore
	}
	return s.Store.GetToken(ctx, id)
}

// TestHandoffRoutes moves a place to another device and drives every
// answer of the handoff, redeem and account routes and of an enter with an
// enqueue token, each checked against the OpenAPI document.
func TestHandoffRoutes(t *testing.T) {
	store := &handoffFaultStore{Store: memstore.New()}
	if err := sampleevents.Seed(t.Context(), store, t0); err != nil {
		t.Fatal(err)
	}
	site := enqueuetest.New(t)
	clk := simclock.NewFake(t0)
	h := checked(t, httpapi.New(queue.NewService(store, polling.DefaultTiers(), queue.WithClock(clk), queue.WithEnqueue(enqueue.NewVerifier(site.Client, nil))),
		httpapi.BearerAuth("s3cret"), httpapi.WithLogger(discard)))
	admin := http.Header{"Authorization": {"Bearer s3cret"}}
	if w := record(h, http.MethodPut, "/api/v1/admin/programs/shop", admin, `{"paused":true,"enqueueJwksUrl":"`+site.JWKSURL+`","enqueueIssuer":"`+enqueuetest.Issuer+`","requireEnqueueToken":true}`); w.Code != 201 {
		t.Fatalf("create shop: %d %s", w.Code, w.Body)
	}
	enter := func(program string, hdr http.Header) map[string]any {
		t.Helper()
		w := record(h, http.MethodPost, "/api/v1/queues/programs/"+program, hdr, "")
		if w.Code != 201 && w.Code != 200 {
			t.Fatalf("enter %s: %d %s", program, w.Code, w.Body)
		}
		return decode(t, w.Body.String())
	}
	old := enter("demo", nil)["tokenId"].(string)
	acct := enter("shop", http.Header{api.HeaderEnqueueToken: {site.Token(t, "shop", "alice")}})
	const page = `{"page":"https://queue.example.com/waiting-room/demo"}`
	handoff := func(id, body string) *httptest.ResponseRecorder {
		return record(h, http.MethodPost, "/api/v1/queues/programs/demo/handoff", http.Header{api.HeaderToken: {id}}, body)
	}
	made := handoff(old, page)
	var code string
	if made.Code != 201 {
		t.Fatalf("make handoff: %d %s", made.Code, made.Body)
	} else {
		m := decode(t, made.Body.String())
		code = m["code"].(string)
		if m["url"] != "https://queue.example.com/waiting-room/demo#handoff="+code || !strings.HasPrefix(m["qrSvg"].(string), "<svg") || made.Header().Get("Cache-Control") != "no-store" {
			t.Errorf("handoff = %v, Cache-Control %q", m, made.Header().Get("Cache-Control"))
		}
	}
	redeem := func(code, key string) *httptest.ResponseRecorder {
		return record(h, http.MethodPost, "/api/v1/queues/programs/demo/handoff/redeem", http.Header{api.HeaderIdempotencyKey: {key}}, `{"code":"`+code+`"}`)
	}
	typed := strings.ToLower(code[:4] + "-" + code[4:8] + " " + code[8:])
	moved := redeem(typed, "device-two-key-0001")
	if moved.Code != 201 {
		t.Fatalf("redeem: %d %s", moved.Code, moved.Body)
	}
	newID := decode(t, moved.Body.String())["tokenId"].(string)
	if again := redeem(code, "device-two-key-0001"); again.Code != 200 || decode(t, again.Body.String())["tokenId"] != newID {
		t.Errorf("redeem retried: %d %s, want 200 with %s", again.Code, again.Body, newID)
	}
	if got := decode(t, record(h, http.MethodGet, "/api/v1/queues/programs/demo", http.Header{api.HeaderToken: {old}}, "").Body.String()); got["status"] != "MOVED" || got["movedAt"] == nil || got["position"] != nil {
		t.Errorf("the old token reads %v, want MOVED without a position", got)
	}
	fresh := enter("demo", nil)["tokenId"].(string)
	for _, tt := range []struct {
		name   string
		w      *httptest.ResponseRecorder
		status int
		code   string
	}{
		{"another device", redeem(code, "device-three-key-001"), 409, api.CodeHandoffUsed},
		{"a malformed code", redeem("K7QM", "device-three-key-001"), 400, api.CodeInvalidHandoffCode},
		{"an unknown code", redeem("K7QM3XWD9P2HRT5A", "device-three-key-001"), 404, api.CodeHandoffNotFound},
		{"a moved token", handoff(old, page), 409, api.CodeNotWaiting},
		{"an unknown token", handoff("AAAAAAAAAAAAAAAAAAAAAA", page), 404, api.CodeTokenNotFound},
		{"another site's page", handoff(fresh, `{"page":"https://evil.example.com/x"}`), 400, api.CodeInvalidPage},
		{"a page of another origin than the request's", record(h, http.MethodPost, "/api/v1/queues/programs/demo/handoff",
			http.Header{api.HeaderToken: {fresh}, "Origin": {"https://evil.example.com"}}, page), 400, api.CodeInvalidPage},
		{"an account's place", record(h, http.MethodPost, "/api/v1/queues/programs/shop/handoff", http.Header{api.HeaderToken: {acct["tokenId"].(string)}}, `{"page":"https://queue.example.com/waiting-room/shop"}`), 409, api.CodeHandoffRefused},
		{"no enqueue token", record(h, http.MethodPost, "/api/v1/queues/programs/shop", nil, ""), 403, api.CodeEnqueueTokenRequired},
		{"another program's", record(h, http.MethodPost, "/api/v1/queues/programs/shop", http.Header{api.HeaderEnqueueToken: {site.Token(t, "demo", "alice")}}, ""), 403, api.CodeInvalidEnqueueToken},
		{"a code made", handoff(fresh, page), 201, ""},
		{"a code too soon", handoff(fresh, page), 429, api.CodeHandoffTooSoon},
	} {
		if code := decodeCode(tt.w.Body.String()); tt.w.Code != tt.status || tt.status >= 400 && code != tt.code {
			t.Errorf("%s: %d %s, want %d %s", tt.name, tt.w.Code, tt.w.Body, tt.status, tt.code)
		}
	}
	lookup := record(h, http.MethodGet, "/api/v1/admin/programs/shop/accounts/alice", admin, "")
	if got := decode(t, lookup.Body.String()); lookup.Code != 200 || got["account"] != "alice" || got["tokenId"] != acct["tokenId"] {
		t.Errorf("account lookup: %d %v", lookup.Code, got)
	}
	clk.Advance(time.Minute)
	store.fail.Store(true)
	for _, w := range []*httptest.ResponseRecorder{
		handoff(fresh, page),
		redeem(code, "device-four-key-0001"),
		record(h, http.MethodGet, "/api/v1/admin/programs/shop/accounts/alice", admin, ""),
	} {
		if w.Code != 503 || decodeCode(w.Body.String()) != api.CodeUnavailable || w.Header().Get("Retry-After") == "" {
			t.Errorf("store down: %d %s, want 503 with Retry-After", w.Code, w.Body)
		}
	}
}
