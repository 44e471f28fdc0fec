package apiclient_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/example/waitingroom/internal/api"
	"github.com/example/waitingroom/internal/bench/apiclient"
	"github.com/example/waitingroom/internal/httpapi"
	"github.com/example/waitingroom/internal/memstore"
	"github.com/example/waitingroom/internal/polling"
	"github.com/example/waitingroom/internal/queue"
)

const secret = "s3cret"

// newServer serves the real API over the in-memory store.
func newServer(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(httpapi.New(queue.NewService(memstore.New(), polling.DefaultTiers()), httpapi.BearerAuth(secret)))
	t.Cleanup(srv.Close)
	return srv
}

// TestAgainstServer plays every call against the real handler: typed
// answers on success, typed errors with the API's codes otherwise, and one
// observed exchange per call.
func TestAgainstServer(t *testing.T) {
	srv := newServer(t)
	var mu sync.Mutex
	var seen []apiclient.Exchange
	c := apiclient.New(srv.URL+"/", apiclient.WithAdminToken(secret), apiclient.WithHTTPClient(srv.Client()),
		apiclient.WithObserver(func(e apiclient.Exchange) { mu.Lock(); seen = append(seen, e); mu.Unlock() }))
	ctx := context.Background()

	p, err := c.PutProgram(ctx, "p1", apiclient.ProgramSettings{Paused: new(true), PollingPolicy: new("")})
	if err != nil || !p.Created || !p.Paused || p.ProgramID != "p1" {
		t.Fatalf("PutProgram = %+v, %v; want created, paused", p, err)
	}
	a, err := c.Enter(ctx, "p1", apiclient.NewIdempotencyKey())
	if err != nil || !a.Created || a.Status != apiclient.StatusWaiting || a.Position != 1 || a.RetryAfter() <= 0 || a.TokenID == "" {
		t.Fatalf("Enter = %+v, %v; want a new WAITING place at position 1", a, err)
	}
	b, err := c.Enter(ctx, "p1", "")
	if err != nil || b.Position != 2 {
		t.Fatalf("Enter without a key = %+v, %v; want position 2", b, err)
	}
	if _, err := c.Admit(ctx, "p1", 1); err != nil {
		t.Fatal(err)
	}
	got, err := c.Poll(ctx, "p1", a.TokenID)
	if err != nil || got.Status != apiclient.StatusAdmitted || got.AdmittedAt == "" {
		t.Fatalf("Poll after Admit = %+v, %v; want ADMITTED", got, err)
	}
	err = c.Leave(ctx, "p1", a.TokenID)
	if ae := (*apiclient.APIError)(nil); !errors.As(err, &ae) || ae.Status != http.StatusConflict || ae.Code != api.CodeAlreadyAdmitted || ae.Retryable() {
		t.Errorf("Leave when admitted = %v; want 409 %s", err, api.CodeAlreadyAdmitted)
	}
	if err := c.Leave(ctx, "p1", b.TokenID); err != nil {
		t.Errorf("Leave = %v", err)
	}
	p, err = c.GetProgram(ctx, "p1")
	if err != nil || p.Issued != 2 || p.Admitted != 1 || p.Created {
		t.Errorf("GetProgram = %+v, %v; want issued 2, admitted 1", p, err)
	}
	_, err = c.Poll(ctx, "nope", a.TokenID)
	if ae := (*apiclient.APIError)(nil); !errors.As(err, &ae) || ae.Status != http.StatusNotFound || ae.Code == "" || ae.Message == "" {
		t.Errorf("Poll of an unknown program = %#v; want 404 with code and message", err)
	}
	_, err = apiclient.New(srv.URL, apiclient.WithAdminToken("wrong")).GetProgram(ctx, "p1")
	if ae := (*apiclient.APIError)(nil); !errors.As(err, &ae) || ae.Status != http.StatusForbidden {
		t.Errorf("GetProgram with a wrong token = %v; want 403", err)
	}

	var ops []string
	for _, e := range seen {
		ops = append(ops, string(e.Op)+" "+http.StatusText(e.Status))
		if e.Latency <= 0 || e.Sent.IsZero() || e.Canceled || (e.Status < 300) != (e.Err == nil) {
			t.Errorf("exchange %+v", e)
		}
	}
	want := []string{"PUT admin Created", "POST enter Created", "POST enter Created", "POST admissions OK", "GET poll OK",
		"DELETE leave Conflict", "DELETE leave No Content", "GET admin OK", "GET poll Not Found"}
	if diff := cmp.Diff(want, ops); diff != "" {
		t.Errorf("observed exchanges (-want +got):\n%s", diff)
	}
}

// TestRequests checks what goes on the wire: the idempotency key, the
// token and admin headers, the JSON bodies.
func TestRequests(t *testing.T) {
	type req struct{ Method, Path, Key, Token, Auth, Body string }
	var got []req
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got = append(got, req{r.Method, r.URL.EscapedPath(), r.Header.Get("Idempotency-Key"), r.Header.Get("X-Queue-Token"), r.Header.Get("Authorization"), string(b)})
		switch r.Method {
		case http.MethodDelete:
			w.WriteHeader(http.StatusNoContent)
		case http.MethodPost:
			w.WriteHeader(http.StatusCreated)
			_, _ = w.Write([]byte(`{"tokenId":"t","status":"WAITING","ticket":42,"position":3}`))
		default:
			_, _ = w.Write([]byte(`{"programId":"a b","tokenId":"t","status":"WAITING"}`))
		}
	}))
	defer srv.Close()
	c := apiclient.New(srv.URL, apiclient.WithAdminToken("tok"))
	ctx := context.Background()
	a, err := c.Enter(ctx, "a b", "key-1")
	if err != nil || a.Ticket != 42 || a.Position != 3 || !a.Created {
		t.Errorf("Enter = %+v, %v; want ticket 42", a, err)
	}
	_, _ = c.Poll(ctx, "a b", "t")
	_ = c.Leave(ctx, "a b", "t")
	_, _ = c.PutProgram(ctx, "a b", apiclient.ProgramSettings{AdmissionRatePerSecond: new(2.5)})
	_, _ = c.Admit(ctx, "a b", 7)
	want := []req{
		{"POST", "/api/v1/queues/programs/a%20b", "key-1", "", "", ""},
		{"GET", "/api/v1/queues/programs/a%20b", "", "t", "", ""},
		{"DELETE", "/api/v1/queues/programs/a%20b", "", "t", "", ""},
		{"PUT", "/api/v1/admin/programs/a%20b", "", "", "Bearer tok", `{"admissionRatePerSecond":2.5}`},
		{"POST", "/api/v1/admin/programs/a%20b/admissions", "", "", "Bearer tok", `{"count":7}`},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
}

// TestErrors decodes the error answers a client meets: the API's 503 with
// Retry-After in seconds, an HTTP-date, API Gateway's own 429 and a
// non-JSON page.
func TestErrors(t *testing.T) {
	date := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name   string
		status int
		header map[string]string
		body   string
		want   apiclient.APIError
		retry  time.Duration
	}{
		{"store fault", 503, map[string]string{"Retry-After": "2"}, `{"code":"STORE_UNAVAILABLE","message":"Retry shortly."}`,
			apiclient.APIError{Status: 503, Code: "STORE_UNAVAILABLE", Message: "Retry shortly.", RetryAfter: 2 * time.Second}, 2 * time.Second},
		{"http-date", 503, map[string]string{"Retry-After": date.Add(5 * time.Second).Format(http.TimeFormat), "Date": date.Format(http.TimeFormat)}, `{"code":"BUSY","message":"m"}`,
			apiclient.APIError{Status: 503, Code: "BUSY", Message: "m", RetryAfter: 5 * time.Second}, 5 * time.Second},
		{"api gateway throttle", 429, nil, `{"message":"Too Many Requests"}`,
			apiclient.APIError{Status: 429, Message: "Too Many Requests"}, time.Second},
		{"proxy page", 502, map[string]string{"Retry-After": "soon"}, "<html>Bad Gateway</html>\n",
			apiclient.APIError{Status: 502, Message: "<html>Bad Gateway</html>"}, time.Second},
		{"bad request", 400, map[string]string{"Retry-After": "3"}, `{"code":"INVALID_TOKEN","message":"m"}`,
			apiclient.APIError{Status: 400, Code: "INVALID_TOKEN", Message: "m", RetryAfter: 3 * time.Second}, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				for k, v := range tc.header {
					w.Header()[k] = []string{v}
				}
				w.WriteHeader(tc.status)
				_, _ = w.Write([]byte(tc.body))
			}))
			defer srv.Close()
			_, err := apiclient.New(srv.URL).Poll(context.Background(), "p", "t")
			var ae *apiclient.APIError
			if !errors.As(err, &ae) {
				t.Fatalf("err = %v, want *APIError", err)
			}
			if diff := cmp.Diff(tc.want, *ae); diff != "" {
				t.Errorf("APIError (-want +got):\n%s", diff)
			}
			d, ok := apiclient.RetryDelay(context.Background(), err, time.Second)
			if ok != (tc.retry >= 0) || ok && d != tc.retry {
				t.Errorf("RetryDelay = %s, %v; want %s", d, ok, tc.retry)
			}
		})
	}
}

func TestRetryDelay(t *testing.T) {
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	transport := errors.New("connection reset by peer")
	for _, tc := range []struct {
		name  string
		ctx   context.Context
		err   error
		want  time.Duration
		retry bool
	}{
		{"no error", context.Background(), nil, 0, false},
		{"transport error", context.Background(), transport, time.Second, true},
		{"run over", canceled, transport, 0, false},
		{"503 without Retry-After", context.Background(), &apiclient.APIError{Status: 503}, time.Second, true},
		{"429 with Retry-After", context.Background(), &apiclient.APIError{Status: 429, RetryAfter: 7 * time.Second}, 7 * time.Second, true},
		{"404", context.Background(), &apiclient.APIError{Status: 404}, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, ok := apiclient.RetryDelay(tc.ctx, tc.err, time.Second)
			if d != tc.want || ok != tc.retry {
				t.Errorf("RetryDelay = %s, %v; want %s, %v", d, ok, tc.want, tc.retry)
			}
		})
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		value, date string
		want        time.Duration
		ok          bool
	}{
		{"", "", 0, false},
		{"0", "", 0, true},
		{"120", "", 2 * time.Minute, true},
		{" 3 ", "", 3 * time.Second, true},
		{"-1", "", 0, false},
		{"1.5", "", 0, false},
		{"99999999999999999", "", 24 * time.Hour, true},
		{now.Add(90 * time.Second).Format(http.TimeFormat), "", 90 * time.Second, true},
		{now.Add(90 * time.Second).Format(time.RFC850), "", 90 * time.Second, true},
		{now.Add(90 * time.Second).Format(http.TimeFormat), now.Add(80 * time.Second).Format(http.TimeFormat), 10 * time.Second, true},
		{now.Add(-time.Minute).Format(http.TimeFormat), "", 0, true},
		{"Tomorrow", "", 0, false},
	} {
		h := http.Header{}
		if tc.value != "" {
			h.Set("Retry-After", tc.value)
		}
		if tc.date != "" {
			h.Set("Date", tc.date)
		}
		d, ok := apiclient.ParseRetryAfter(h, now)
		if d != tc.want || ok != tc.ok {
			t.Errorf("ParseRetryAfter(%q, Date %q) = %s, %v; want %s, %v", tc.value, tc.date, d, ok, tc.want, tc.ok)
		}
	}
}

func TestNewIdempotencyKey(t *testing.T) {
	seen := map[string]bool{}
	for range 1000 {
		k := apiclient.NewIdempotencyKey()
		if len(k) != 26 || seen[k] {
			t.Fatalf("key %q: want 26 characters, never repeated", k)
		}
		seen[k] = true
	}
}

// TestCanceled: a request ended by the caller's context is observed as
// Canceled, and not worth retrying.
func TestCanceled(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }))
	defer srv.Close()
	var ex apiclient.Exchange
	c := apiclient.New(srv.URL, apiclient.WithObserver(func(e apiclient.Exchange) { ex = e }))
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := c.Poll(ctx, "p", "t")
	if err == nil || !ex.Canceled || ex.Status != 0 || ex.Op != apiclient.OpPoll {
		t.Errorf("err %v, exchange %+v; want a canceled poll", err, ex)
	}
	if _, ok := apiclient.RetryDelay(ctx, err, time.Second); ok {
		t.Error("RetryDelay says retry after the caller's context ended")
	}
}
