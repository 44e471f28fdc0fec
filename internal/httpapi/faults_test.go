package httpapi_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/example/waitingroom/internal/httpapi"
	"github.com/example/waitingroom/internal/memstore"
	"github.com/example/waitingroom/internal/polling"
	"github.com/example/waitingroom/internal/queue"
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

func TestHandlerStoreFault(t *testing.T) {
	var logs bytes.Buffer
	h := httpapi.New(queue.NewService(brokenStore{memstore.New()}, polling.DefaultTiers()),
		httpapi.WithIAMAdmin(), httpapi.WithLogger(slog.New(slog.NewJSONHandler(&logs, nil))))
	for _, event := range []string{"enter", "poll-waiting", "leave", "admin-get-program", "admin-put-program", "admin-admit"} {
		t.Run(event, func(t *testing.T) {
			resp, err := h.Handle(context.Background(), loadEvent(t, event))
			if err != nil {
				t.Fatal(err)
			}
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
	h := httpapi.New(queue.NewService(panickyStore{memstore.New()}, polling.DefaultTiers()),
		httpapi.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	resp, err := h.Handle(context.Background(), loadEvent(t, "poll-waiting"))
	if err != nil || resp.StatusCode != 500 {
		t.Fatalf("status %d err %v, want 500 and no error", resp.StatusCode, err)
	}
	assertJSONEqual(t, resp.Body, `{"code":"INTERNAL","message":"Internal error."}`)
}

func TestServeHTTP(t *testing.T) {
	srv := httptest.NewServer(newHandler(t, httpapi.WithAdminSecret("s3cret")))
	defer srv.Close()
	do := func(method, path, token, body string, hdr map[string]string) (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		if token != "" {
			req.Header.Set("X-Queue-Token", token)
		}
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	t.Run("Poll", func(t *testing.T) {
		resp, body := do("GET", "/api/v1/queues/programs/demo", "waitingTokenFixture001", "", nil)
		if resp.StatusCode != 200 || !strings.Contains(body, `"position":234`) || resp.Header.Get("Retry-After") != "6" {
			t.Errorf("status %d, Retry-After %q, body %s", resp.StatusCode, resp.Header.Get("Retry-After"), body)
		}
	})
	t.Run("TooLarge", func(t *testing.T) {
		big := `{"admissionRatePerSecond": 1` + strings.Repeat(" ", httpapi.MaxBodyBytes) + `}`
		resp, body := do("PUT", "/api/v1/admin/programs/demo", "", big, map[string]string{"Authorization": "Bearer s3cret"})
		if resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(body, `"code":"PAYLOAD_TOO_LARGE"`) {
			t.Errorf("status %d body %s, want 413 PAYLOAD_TOO_LARGE", resp.StatusCode, body)
		}
	})
	t.Run("EscapedProgramID", func(t *testing.T) {
		resp, body := do("GET", "/api/v1/queues/programs/de%2Fmo", "waitingTokenFixture001", "", nil)
		if resp.StatusCode != 400 || !strings.Contains(body, "INVALID_PROGRAM_ID") {
			t.Errorf("status %d body %s, want 400 INVALID_PROGRAM_ID", resp.StatusCode, body)
		}
	})
	t.Run("AdminSecret", func(t *testing.T) {
		resp, body := do("POST", "/api/v1/admin/programs/demo/admissions", "", `{"count":2}`, map[string]string{"Authorization": "Bearer s3cret"})
		if resp.StatusCode != 200 || !strings.Contains(body, `"admitted":502`) {
			t.Errorf("status %d body %s", resp.StatusCode, body)
		}
	})
}
