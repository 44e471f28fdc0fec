package httpapi_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/example/waitingroom/internal/api"
	"github.com/example/waitingroom/internal/httpapi"
	"github.com/example/waitingroom/internal/polling"
	"github.com/example/waitingroom/internal/queue"
	"github.com/example/waitingroom/internal/tools/memstore"
	"github.com/example/waitingroom/internal/tools/sampleevents"
	"github.com/example/waitingroom/internal/tools/simclock"
	"github.com/example/waitingroom/internal/webpush"
)

// pushFaultStore fails the push writes while fail is set.
type pushFaultStore struct {
	*memstore.Store
	fail atomic.Bool
}

var errPushStore = errors.New("push store down")

func (s *pushFaultStore) Subscribe(ctx context.Context, t queue.Token, sub queue.Subscription) (queue.Token, error) {
	if s.fail.Load() {
		return queue.Token{}, errPushStore
	}
	return s.Store.Subscribe(ctx, t, sub)
}

func (s *pushFaultStore) Unsubscribe(ctx context.Context, id, endpoint string) error {
	if s.fail.Load() {
		return errPushStore
	}
	return s.Store.Unsubscribe(ctx, id, endpoint)
}

// TestPushRoutes drives PUT and DELETE …/push and an enter with a
// subscription: each answer, checked against the OpenAPI document.
func TestPushRoutes(t *testing.T) {
	store := &pushFaultStore{Store: memstore.New()}
	if err := sampleevents.Seed(t.Context(), store, t0); err != nil {
		t.Fatal(err)
	}
	svc := func(opts ...queue.Option) http.Handler {
		return checked(t, httpapi.New(queue.NewService(store, polling.DefaultTiers(), append(opts, queue.WithClock(simclock.NewFake(t0)))...),
			httpapi.BearerAuth("s3cret"), httpapi.WithLogger(discard)))
	}
	h := svc(queue.WithPush(webpush.Hosts{"push.example"}))
	path := strings.Replace(api.PushPath, "{programId}", "demo", 1)
	enter := record(h, http.MethodPost, "/api/v1/queues/programs/demo", nil, `{"push":`+pushBody(t)+`}`)
	entered := decode(t, enter.Body.String())
	if enter.Code != http.StatusCreated || entered["push"] != true {
		t.Fatalf("enter with a subscription: %d %v", enter.Code, entered)
	}
	token := func(id string) http.Header { return http.Header{api.HeaderToken: {id}} }
	plain := decode(t, record(h, http.MethodPost, "/api/v1/queues/programs/demo", nil, "").Body.String())["tokenId"].(string)
	broken := `{"endpoint":"http://push.example/s/1","keys":{"p256dh":"x","auth":"y"}}`
	for _, tt := range []struct {
		name       string
		h          http.Handler
		method, id string
		body       string
		fault      bool
		status     int
		code       string
	}{
		{"subscribe", h, http.MethodPut, plain, pushBody(t), false, 204, ""},
		{"an http endpoint", h, http.MethodPut, plain, broken, false, 400, api.CodeInvalidSubscription},
		{"not JSON", h, http.MethodPut, plain, `{`, false, 400, api.CodeInvalidJSON},
		{"an unknown token", h, http.MethodPut, "AAAAAAAAAAAAAAAAAAAAAA", pushBody(t), false, 404, api.CodeTokenNotFound},
		{"admitted", h, http.MethodPut, "admittedTokenFixture01", pushBody(t), false, 409, api.CodeNotWaiting},
		{"no push here", svc(), http.MethodPut, plain, pushBody(t), false, 404, api.CodePushUnavailable},
		{"a store fault", h, http.MethodPut, plain, pushBody(t), true, 503, api.CodeUnavailable},
		{"unsubscribe", h, http.MethodDelete, plain, "", false, 204, ""},
		{"unsubscribe again", h, http.MethodDelete, plain, "", false, 204, ""},
		{"unsubscribe without push", svc(), http.MethodDelete, plain, "", false, 404, api.CodePushUnavailable},
		{"unsubscribe in a fault", h, http.MethodDelete, plain, "", true, 503, api.CodeUnavailable},
	} {
		t.Run(tt.name, func(t *testing.T) {
			store.fail.Store(tt.fault)
			defer store.fail.Store(false)
			if status, code := sendTo(tt.h, tt.method, path, token(tt.id), tt.body); status != tt.status || code != tt.code {
				t.Errorf("%d %q, want %d %q", status, code, tt.status, tt.code)
			}
		})
	}
	poll := decode(t, record(h, http.MethodGet, "/api/v1/queues/programs/demo", token(entered["tokenId"].(string)), "").Body.String())
	if poll["push"] != true {
		t.Errorf("a subscribed token's poll: %v", poll)
	}
	if b := decode(t, record(h, http.MethodPost, "/api/v1/queues/programs/demo", nil, `{"push":`+broken+`}`).Body.String()); b["status"] != "WAITING" || b["push"] != nil {
		t.Errorf("an enter with an unusable subscription goes on unsubscribed: %v", b)
	}
	// The page of a token that waits unsubscribed comes back subscribed.
	again := record(h, http.MethodPost, "/api/v1/queues/programs/demo", token(plain), `{"push":`+pushBody(t)+`}`)
	if b := decode(t, again.Body.String()); again.Code != http.StatusOK || b["tokenId"] != plain || b["push"] != true {
		t.Errorf("an enter with the token and a subscription: %d %v, want the token, subscribed", again.Code, b)
	}
}
