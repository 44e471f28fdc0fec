package client_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/example/waitingroom/internal/client"
)

// TestErrors decodes the error answers a client meets: the API's errors
// with Retry-After in seconds or as an HTTP-date, API Gateway's own 429, a
// non-JSON page and an empty body.
func TestErrors(t *testing.T) {
	date := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	long := strings.Repeat("x", 300)
	for _, tc := range []struct {
		name   string
		status int
		header map[string]string
		body   string
		want   client.Error
		text   string        // want.Error()
		retry  time.Duration // RetryDelay's, -1 for none
	}{
		{"store fault", 503, map[string]string{"Retry-After": "2"}, `{"code":"STORE_UNAVAILABLE","message":"The queue is briefly unavailable; retry shortly."}`,
			client.Error{Status: 503, Code: "STORE_UNAVAILABLE", Message: "The queue is briefly unavailable; retry shortly.", RetryAfter: 2 * time.Second},
			"STORE_UNAVAILABLE: The queue is briefly unavailable; retry shortly.", 2 * time.Second},
		{"http-date", 503, map[string]string{"Retry-After": date.Add(5 * time.Second).Format(http.TimeFormat), "Date": date.Format(http.TimeFormat)}, `{"code":"BUSY","message":"m"}`,
			client.Error{Status: 503, Code: "BUSY", Message: "m", RetryAfter: 5 * time.Second}, "BUSY: m", 5 * time.Second},
		{"api gateway throttle", 429, nil, `{"message":"Too Many Requests"}`,
			client.Error{Status: 429, Message: "Too Many Requests"}, "Too Many Requests (HTTP 429)", time.Second},
		{"proxy page", 502, map[string]string{"Retry-After": "soon"}, "<html>Bad Gateway</html>\n",
			client.Error{Status: 502, Message: "<html>Bad Gateway</html>"}, "<html>Bad Gateway</html> (HTTP 502)", time.Second},
		{"long page", 502, nil, long, client.Error{Status: 502, Message: long[:200] + "…"}, long[:200] + "… (HTTP 502)", time.Second},
		{"empty body", 502, nil, "", client.Error{Status: 502, Message: "Bad Gateway"}, "Bad Gateway (HTTP 502)", time.Second},
		{"bad request", 400, map[string]string{"Retry-After": "3"}, `{"code":"INVALID_TOKEN","message":"m"}`,
			client.Error{Status: 400, Code: "INVALID_TOKEN", Message: "m", RetryAfter: 3 * time.Second}, "INVALID_TOKEN: m", -1},
		{"not found", 404, nil, `{"code":"PROGRAM_NOT_FOUND","message":"No such program."}`,
			client.Error{Status: 404, Code: "PROGRAM_NOT_FOUND", Message: "No such program."}, "PROGRAM_NOT_FOUND: No such program.", -1},
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
			c := newClient(t, srv.URL, client.WithAuth(client.BearerToken("s")))
			for _, call := range []func() error{
				func() error { _, err := c.Poll(context.Background(), "p", "t"); return err },
				func() error { _, err := c.GetProgram(context.Background(), "p"); return err },
			} {
				err := call()
				var ae *client.Error
				if !errors.As(err, &ae) {
					t.Fatalf("err = %v, want *Error", err)
				}
				if diff := cmp.Diff(tc.want, *ae); diff != "" {
					t.Errorf("Error (-want +got):\n%s", diff)
				}
				if ae.Error() != tc.text {
					t.Errorf("Error() = %q, want %q", ae.Error(), tc.text)
				}
				d, ok := client.RetryDelay(context.Background(), err, time.Second)
				if ok != (tc.retry >= 0) || ok && d != tc.retry {
					t.Errorf("RetryDelay = %s, %v; want %s", d, ok, tc.retry)
				}
			}
		})
	}
}

// TestRetry: with a Retry, a request the server could not serve now is
// sent again after its Retry-After, bounded; each attempt is observed and
// each retry told. A POST is repeated after BUSY or 429 only.
func TestRetry(t *testing.T) {
	for _, tc := range []struct {
		name     string
		failures int // answers before a success
		code     string
		admit    bool
		revoke   bool
		ok       bool
		sent     int
	}{
		{"get after two 503s", 2, "STORE_UNAVAILABLE", false, false, true, 3},
		{"get bounded", 5, "STORE_UNAVAILABLE", false, false, false, 3},
		{"admit after BUSY", 1, "BUSY", true, false, true, 2},
		{"admit not after STORE_UNAVAILABLE", 1, "STORE_UNAVAILABLE", true, false, false, 1},
		{"revoke (a DELETE) after a 503", 1, "STORE_UNAVAILABLE", false, true, true, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var n atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if int(n.Add(1)) <= tc.failures {
					w.Header().Set("Retry-After", "1")
					w.WriteHeader(http.StatusServiceUnavailable)
					_, _ = w.Write([]byte(`{"code":"` + tc.code + `","message":"m"}`))
					return
				}
				if r.Method == http.MethodDelete {
					w.WriteHeader(http.StatusNoContent)
					return
				}
				_, _ = w.Write([]byte(`{"programId":"p"}`))
			}))
			defer srv.Close()
			var observed, told int
			c := newClient(t, srv.URL, client.WithObserver(func(client.Exchange) { observed++ }),
				client.WithRetry(client.Retry{Attempts: 3, MaxWait: time.Millisecond, Notify: func(e *client.Error, wait time.Duration, attempt int) {
					told++
					if e.Code != tc.code || wait != time.Millisecond || attempt != told {
						t.Errorf("Notify(%v, %s, %d): want %s, the cap 1ms, attempt %d", e, wait, attempt, tc.code, told)
					}
				}}))
			var err error
			switch {
			case tc.admit:
				_, err = c.Admit(context.Background(), "p", 1)
			case tc.revoke:
				err = c.RevokeToken(context.Background(), "p", "AAAAAAAAAAAAAAAAAAAAAA")
			default:
				_, err = c.GetProgram(context.Background(), "p")
			}
			if (err == nil) != tc.ok || int(n.Load()) != tc.sent || observed != tc.sent || told != tc.sent-1 {
				t.Errorf("err %v after %d requests, %d observed, %d retries told; want ok %v, %d requests", err, n.Load(), observed, told, tc.ok, tc.sent)
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
		{"503 without Retry-After", context.Background(), &client.Error{Status: 503}, time.Second, true},
		{"429 with Retry-After", context.Background(), &client.Error{Status: 429, RetryAfter: 7 * time.Second}, 7 * time.Second, true},
		{"404", context.Background(), &client.Error{Status: 404}, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, ok := client.RetryDelay(tc.ctx, tc.err, time.Second)
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
		d, ok := client.ParseRetryAfter(h, now)
		if d != tc.want || ok != tc.ok {
			t.Errorf("ParseRetryAfter(%q, Date %q) = %s, %v; want %s, %v", tc.value, tc.date, d, ok, tc.want, tc.ok)
		}
	}
}
