package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/example/waitingroom/internal/clock"
	"github.com/example/waitingroom/internal/httpapi"
	"github.com/example/waitingroom/internal/memstore"
	"github.com/example/waitingroom/internal/polling"
	"github.com/example/waitingroom/internal/queue"
	"github.com/example/waitingroom/internal/testing/fixtures"
)

// t0 is the seed time of the fixtures and the fixed clock of these tests.
var t0 = time.Date(2026, 5, 19, 10, 0, 0, 123e6, time.UTC)

const seed = 42

// newHandler returns a handler over the fixtures, with a fixed clock and a
// seeded jitter source, admin routes behind IAM as on AWS.
func newHandler(t testing.TB, opts ...httpapi.Option) *httpapi.Handler {
	t.Helper()
	store := memstore.New()
	if err := fixtures.Seed(context.Background(), store, t0); err != nil {
		t.Fatal(err)
	}
	svc := queue.NewService(store, polling.DefaultTiers(),
		queue.WithClock(clock.NewFake(t0)),
		queue.WithRand(rand.New(rand.NewPCG(seed, seed))))
	opts = append([]httpapi.Option{httpapi.WithIAMAdmin(), httpapi.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))}, opts...)
	return httpapi.New(svc, opts...)
}

func loadEvent(t testing.TB, name string) events.APIGatewayV2HTTPRequest {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "events", name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var req events.APIGatewayV2HTTPRequest
	if err := json.Unmarshal(b, &req); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return req
}

// firstRetryMs is what the seeded jitter source gives for the first waiting
// answer of a test at position.
func firstRetryMs(position int64) string {
	d := polling.DefaultTiers().RetryAfter(polling.Situation{Position: position, RatePerSecond: 10}, rand.New(rand.NewPCG(seed, seed)))
	return strconv.FormatInt(d.Milliseconds(), 10)
}

func TestHandlerEvents(t *testing.T) {
	waitingMs := firstRetryMs(234)
	tests := []struct {
		event      string
		wantStatus int
		wantBody   string            // exact JSON; "" for none
		wantHeader map[string]string // headers that must be present with these values
	}{
		{"poll-waiting", 200,
			`{"tokenId":"waitingTokenFixture001","status":"WAITING","issuedAt":"2026-05-19T09:30:00.123Z","position":234,"retryAfterMs":` + waitingMs + `,"estimatedWaitMs":23400}`,
			map[string]string{"Retry-After": "6", "Cache-Control": "no-store", "Content-Type": "application/json; charset=utf-8"}},
		{"poll-admitted", 200,
			`{"tokenId":"admittedTokenFixture01","status":"ADMITTED","issuedAt":"2026-05-19T09:20:00.123Z","admittedAt":"2026-05-19T09:59:00.123Z","expiresAt":"2026-05-19T10:09:00.123Z"}`,
			map[string]string{"Cache-Control": "no-store"}},
		{"enter-existing-token", 200,
			`{"tokenId":"waitingTokenFixture001","status":"WAITING","issuedAt":"2026-05-19T09:30:00.123Z","position":234,"retryAfterMs":` + waitingMs + `,"estimatedWaitMs":23400}`,
			map[string]string{"Retry-After": "6"}},
		{"leave", 204, "", map[string]string{"Cache-Control": "no-store"}},
		{"error-missing-token", 400, `{"code":"MISSING_TOKEN","message":"The X-Queue-Token header is required."}`, nil},
		{"error-malformed-token", 400, `{"code":"INVALID_TOKEN","message":"The queue token is malformed."}`, nil},
		{"error-unknown-token", 404, `{"code":"TOKEN_NOT_FOUND","message":"No such token in this program's queue."}`, nil},
		{"error-foreign-token", 404, `{"code":"TOKEN_NOT_FOUND","message":"No such token in this program's queue."}`, nil},
		{"error-invalid-program-id", 400, `{"code":"INVALID_PROGRAM_ID","message":"The program id must be 1 to 64 letters, digits, '-' or '_', starting with a letter or digit."}`, nil},
		{"error-unknown-program", 404, `{"code":"PROGRAM_NOT_FOUND","message":"No such program."}`, nil},
		{"error-program-closed", 409, `{"code":"PROGRAM_CLOSED","message":"The program's queue is closed to new entries."}`, nil},
		{"error-leave-admitted", 409, `{"code":"ALREADY_ADMITTED","message":"The token has already been admitted; it can no longer leave the queue."}`, nil},
		{"error-method-not-allowed", 405, `{"code":"METHOD_NOT_ALLOWED","message":"Allowed methods: DELETE, GET, POST."}`, map[string]string{"Allow": "DELETE, GET, POST"}},
		{"error-unknown-route", 404, `{"code":"NOT_FOUND","message":"No such route."}`, nil},
		{"admin-get-program", 200,
			`{"programId":"demo","issued":1000,"admitted":500,"waiting":500,"admissionRatePerSecond":10,"paused":false,"closed":false,"admissionWindowSeconds":600,"createdAt":"2026-05-19T09:00:00.123Z"}`, nil},
		{"admin-put-program", 200,
			`{"programId":"demo","issued":1000,"admitted":500,"waiting":500,"admissionRatePerSecond":10,"paused":false,"closed":false,"admissionWindowSeconds":600,"createdAt":"2026-05-19T09:00:00.123Z"}`, nil},
		{"admin-create-program", 201,
			`{"programId":"spring-gala","issued":0,"admitted":0,"waiting":0,"admissionRatePerSecond":2.5,"paused":true,"closed":false,"admissionWindowSeconds":900,"createdAt":"2026-05-19T10:00:00.123Z"}`, nil},
		{"admin-admit", 200,
			`{"programId":"demo","issued":1000,"admitted":505,"waiting":495,"admissionRatePerSecond":10,"paused":false,"closed":false,"admissionWindowSeconds":600,"createdAt":"2026-05-19T09:00:00.123Z"}`, nil},
		{"admin-error-unsigned", 403, `{"code":"FORBIDDEN","message":"Admin routes need an IAM-signed request."}`, nil},
		{"admin-error-bad-json", 400, `{"code":"INVALID_JSON","message":"The body is truncated JSON."}`, nil},
		{"admin-error-wrong-type", 400, `{"code":"INVALID_JSON","message":"Field \"admissionRatePerSecond\" must be a number."}`, nil},
		{"admin-error-unknown-field", 400, `{"code":"INVALID_JSON","message":"Unknown field \"rate\"."}`, nil},
		{"admin-error-negative-rate", 400, `{"code":"INVALID_SETTINGS","message":"admissionRatePerSecond must be 0 (manual admission only) or between 0.001 and 100000."}`, nil},
		{"admin-error-negative-count", 400, `{"code":"INVALID_COUNT","message":"count must be a whole number between 1 and 1000000."}`, nil},
		{"admin-error-absurd-count", 400, `{"code":"INVALID_COUNT","message":"count must be a whole number between 1 and 1000000."}`, nil},
		{"admin-error-unknown-program", 404, `{"code":"PROGRAM_NOT_FOUND","message":"No such program."}`, nil},
		{"admin-error-method-not-allowed", 405, `{"code":"METHOD_NOT_ALLOWED","message":"Allowed methods: GET, PUT."}`, map[string]string{"Allow": "GET, PUT"}},
	}
	for _, tt := range tests {
		t.Run(tt.event, func(t *testing.T) {
			h := newHandler(t)
			resp, err := h.Handle(context.Background(), loadEvent(t, tt.event))
			if err != nil {
				t.Fatalf("Handle returned error %v; it must answer every failure over HTTP", err)
			}
			if got, want := resp.StatusCode, tt.wantStatus; got != want {
				t.Errorf("status = %d, want %d (body %s)", got, want, resp.Body)
			}
			assertJSONEqual(t, resp.Body, tt.wantBody)
			for k, want := range tt.wantHeader {
				if got := resp.Headers[k]; got != want {
					t.Errorf("header %s = %q, want %q", k, got, want)
				}
			}
			if resp.Headers["Cache-Control"] != "no-store" {
				t.Errorf("Cache-Control = %q, want no-store on every answer", resp.Headers["Cache-Control"])
			}
			if _, ok := resp.Headers["Retry-After"]; ok != strings.Contains(tt.wantBody, `"WAITING"`) {
				t.Errorf("Retry-After present = %v, want it exactly on WAITING answers", ok)
			}
		})
	}
}

// assertJSONEqual compares two JSON texts as values and, since key order
// does not matter but key presence does, as sets of keys too.
func assertJSONEqual(t *testing.T, got, want string) {
	t.Helper()
	if want == "" {
		if got != "" {
			t.Errorf("body = %s, want none", got)
		}
		return
	}
	var g, w any
	if err := json.Unmarshal([]byte(got), &g); err != nil {
		t.Fatalf("body is not JSON: %v: %s", err, got)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("bad want: %v", err)
	}
	if fmt.Sprint(g) != fmt.Sprint(w) {
		t.Errorf("body =\n  %s\nwant\n  %s", got, want)
	}
}

// TestHandlerEnter walks a token through entering, a refresh, polling and
// leaving, asserting what the client sees at each step.
func TestHandlerEnter(t *testing.T) {
	h := newHandler(t)
	ctx := context.Background()
	resp, _ := h.Handle(ctx, loadEvent(t, "enter"))
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("enter status = %d, body %s", resp.StatusCode, resp.Body)
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(resp.Body), &got); err != nil {
		t.Fatal(err)
	}
	id, _ := got["tokenId"].(string)
	if !queue.ValidTokenID(id) {
		t.Fatalf("tokenId %q is not a well-formed token id", id)
	}
	// Ticket 1001 behind a serving counter of 500: position 501.
	if got["status"] != "WAITING" || got["position"] != float64(501) || got["issuedAt"] != "2026-05-19T10:00:00.123Z" {
		t.Errorf("enter body = %s", resp.Body)
	}
	if ms, _ := got["retryAfterMs"].(float64); ms < 4700 || ms > 5300 {
		t.Errorf("retryAfterMs = %v, want 5000±300 at position 501", ms)
	}

	// A refresh with the token keeps the place: 200, same token, same position.
	again := loadEvent(t, "enter")
	again.Headers["x-queue-token"] = id
	resp, _ = h.Handle(ctx, again)
	var refreshed map[string]any
	_ = json.Unmarshal([]byte(resp.Body), &refreshed)
	if resp.StatusCode != http.StatusOK || refreshed["tokenId"] != id || refreshed["position"] != float64(501) {
		t.Errorf("refresh: status %d body %s, want 200 with the same token at 501", resp.StatusCode, resp.Body)
	}

	// Leaving, then polling: LEFT with leftAt, no position and no retry keys.
	leave := loadEvent(t, "leave")
	leave.Headers["x-queue-token"] = id
	if resp, _ = h.Handle(ctx, leave); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("leave status = %d body %s", resp.StatusCode, resp.Body)
	}
	if resp, _ = h.Handle(ctx, leave); resp.StatusCode != http.StatusNoContent {
		t.Errorf("second leave status = %d, want 204 (idempotent)", resp.StatusCode)
	}
	poll := loadEvent(t, "poll-waiting")
	poll.Headers["x-queue-token"] = id
	resp, _ = h.Handle(ctx, poll)
	assertJSONEqual(t, resp.Body, `{"tokenId":"`+id+`","status":"LEFT","issuedAt":"2026-05-19T10:00:00.123Z","leftAt":"2026-05-19T10:00:00.123Z"}`)

	// A left token entering again gets a new place (201), not its old one.
	again.Headers["x-queue-token"] = id
	resp, _ = h.Handle(ctx, again)
	var fresh map[string]any
	_ = json.Unmarshal([]byte(resp.Body), &fresh)
	if resp.StatusCode != http.StatusCreated || fresh["tokenId"] == id || fresh["position"] != float64(502) {
		t.Errorf("re-enter after leaving: status %d body %s, want 201 with a new token at 502", resp.StatusCode, resp.Body)
	}
}

func TestHandlerAdminSecret(t *testing.T) {
	h := newHandler(t, httpapi.WithAdminSecret("s3cret"))
	tests := []struct {
		name, auth string
		want       int
		wantCode   string
	}{
		{"OK", "Bearer s3cret", 200, ""},
		{"OKSchemeCase", "bearer s3cret", 200, ""},
		{"Missing", "", 401, "UNAUTHORIZED"},
		{"Wrong", "Bearer s3cret2", 403, "FORBIDDEN"},
		{"Prefix", "Bearer s3cre", 403, "FORBIDDEN"},
		{"WrongScheme", "Basic s3cret", 403, "FORBIDDEN"},
		{"NoScheme", "s3cret", 403, "FORBIDDEN"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := loadEvent(t, "admin-error-unsigned") // no IAM context: the secret decides
			if tt.auth != "" {
				req.Headers["authorization"] = tt.auth
			}
			resp, _ := h.Handle(context.Background(), req)
			if resp.StatusCode != tt.want {
				t.Fatalf("status = %d, want %d (%s)", resp.StatusCode, tt.want, resp.Body)
			}
			if tt.wantCode != "" && !strings.Contains(resp.Body, `"code":"`+tt.wantCode+`"`) {
				t.Errorf("body = %s, want code %s", resp.Body, tt.wantCode)
			}
		})
	}
}

func TestHandlerWithoutAdmin(t *testing.T) {
	store := memstore.New()
	h := httpapi.New(queue.NewService(store, polling.DefaultTiers()))
	resp, _ := h.Handle(context.Background(), loadEvent(t, "admin-get-program"))
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("admin route on the public function: status %d, want 404", resp.StatusCode)
	}
}

func TestHandlerAdminOnly(t *testing.T) {
	h := newHandler(t, httpapi.AdminOnly())
	resp, _ := h.Handle(context.Background(), loadEvent(t, "poll-waiting"))
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("queue route on the admin function: status %d, want 404", resp.StatusCode)
	}
}

// withSecret serves the admin routes to the bearer secret as well as IAM.
func withSecret(secret string) httpapi.Option { return httpapi.WithAdminSecret(secret) }
