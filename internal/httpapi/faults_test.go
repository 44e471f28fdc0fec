package httpapi_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/example/waitingroom/internal/httpapi"
	"github.com/example/waitingroom/internal/memstore"
	"github.com/example/waitingroom/internal/polling"
	"github.com/example/waitingroom/internal/queue"
	"github.com/example/waitingroom/internal/testing/fixtures"
)

// brokenStore fails every call with an error whose text must never reach a
// client.
type brokenStore struct{ queue.Store }

var errSecret = errors.New("dial tcp 10.0.0.12:443: arn:aws:dynamodb:eu-west-1:123456789012:table/secret")

func (brokenStore) GetToken(context.Context, string) (queue.Token, error) {
	return queue.Token{}, errSecret
}
func (brokenStore) IssueTicket(context.Context, string, time.Time) (queue.Program, error) {
	return queue.Program{}, errSecret
}
func (brokenStore) GetProgram(context.Context, string) (queue.Program, error) {
	return queue.Program{}, errSecret
}
func (brokenStore) ListPrograms(context.Context, string, int) ([]string, bool, error) {
	return nil, false, errSecret
}

func TestHandlerStoreFault(t *testing.T) {
	var logs bytes.Buffer
	h := checkedLambda(t, httpapi.Lambda(httpapi.New(queue.NewService(brokenStore{memstore.New()}, polling.DefaultTiers()),
		httpapi.IAMAuth(), httpapi.WithLogger(slog.New(slog.NewJSONHandler(&logs, nil))))))
	for _, event := range []string{"enter", "challenge", "poll-waiting", "leave", "session-end", "admin-session-release", "admin-get-program", "admin-put-program", "admin-admit",
		"admin-list-programs", "admin-delete-program", "admin-history", "admin-token-get", "admin-token-revoke", "admin-passes"} {
		t.Run(event, func(t *testing.T) {
			resp := invoke(t, h, fixtures.Event(t, event))
			if resp.StatusCode != http.StatusServiceUnavailable {
				t.Errorf("status = %d, want 503", resp.StatusCode)
			}
			if resp.Headers["Retry-After"] == "" {
				t.Error("no Retry-After on a 503")
			}
			if strings.Contains(resp.Body, "10.0.0.12") || strings.Contains(resp.Body, "arn:") {
				t.Errorf("body leaks internals: %s", resp.Body)
			}
			assertJSONEqual(t, resp.Body, `{"code":"STORE_UNAVAILABLE","message":"The queue is briefly unavailable; retry shortly."}`)
		})
	}
	if !strings.Contains(logs.String(), "10.0.0.12") || !strings.Contains(logs.String(), `"requestId":"JKJaXmPLvHcESHA="`) {
		t.Errorf("store faults must be logged with their cause and request id; logs: %s", logs.String())
	}
}

// panickyStore panics, as a bug would.
type panickyStore struct{ queue.Store }

func (panickyStore) GetToken(context.Context, string) (queue.Token, error) { panic("boom") }

func TestHandlerRecoversPanic(t *testing.T) {
	var logs bytes.Buffer
	h := checkedLambda(t, httpapi.Lambda(httpapi.NewQueue(queue.NewService(panickyStore{memstore.New()}, polling.DefaultTiers()),
		httpapi.WithLogger(slog.New(slog.NewJSONHandler(&logs, nil))))))
	resp := invoke(t, h, fixtures.Event(t, "poll-waiting"))
	if resp.StatusCode != 500 {
		t.Fatalf("status %d, want 500", resp.StatusCode)
	}
	assertJSONEqual(t, resp.Body, `{"code":"INTERNAL","message":"Internal error."}`)
	if !strings.Contains(logs.String(), "boom") || !strings.Contains(logs.String(), `"requestId":"JKJaXmPLvHcESHA="`) {
		t.Errorf("a panic must be logged with the request id; logs: %s", logs.String())
	}
}
