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

	"github.com/example/waitingroom/internal/tools/client"
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
// sent again after its Retry-After (1 s without one), capped at MaxWait
// and bounded in attempts; each attempt is observed, each retry told, and
// each wait asked of Retry.Sleep, which the test records instead of
// sleeping. A POST is repeated after BUSY or 429 only.
func TestRetry(t *testing.T) {
	for _, tc := range []struct {
		name       string
		failures   int    // answers before a success
		retryAfter string // of each failure; "" for none
		maxWait    time.Duration
		code       string
		admit      bool
		revoke     bool
		ok         bool
		sent       int
		waits      []time.Duration // asked of Sleep, and told, in order
	}{
		{"get after two 503s", 2, "1", 10 * time.Second, "STORE_UNAVAILABLE", false, false, true, 3, []time.Duration{time.Second, time.Second}},
		{"get bounded", 5, "1", 10 * time.Second, "STORE_UNAVAILABLE", false, false, false, 3, []time.Duration{time.Second, time.Second}},
		{"capped at MaxWait", 1, "60", 10 * time.Second, "STORE_UNAVAILABLE", false, false, true, 2, []time.Duration{10 * time.Second}},
		{"capped below a second", 2, "1", time.Millisecond, "STORE_UNAVAILABLE", false, false, true, 3, []time.Duration{time.Millisecond, time.Millisecond}},
		{"no Retry-After: a second", 1, "", 10 * time.Second, "STORE_UNAVAILABLE", false, false, true, 2, []time.Duration{time.Second}},
		{"Retry-After 0: a second", 1, "0", 10 * time.Second, "STORE_UNAVAILABLE", false, false, true, 2, []time.Duration{time.Second}},
		{"Retry-After 3", 1, "3", 10 * time.Second, "STORE_UNAVAILABLE", false, false, true, 2, []time.Duration{3 * time.Second}},
		{"admit after BUSY", 1, "1", 10 * time.Second, "BUSY", true, false, true, 2, []time.Duration{time.Second}},
		{"admit not after STORE_UNAVAILABLE", 1, "1", 10 * time.Second, "STORE_UNAVAILABLE", true, false, false, 1, nil},
		{"revoke (a DELETE) after a 503", 1, "1", 10 * time.Second, "STORE_UNAVAILABLE", false, true, true, 2, []time.Duration{time.Second}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var n atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if int(n.Add(1)) <= tc.failures {
					if tc.retryAfter != "" {
						w.Header().Set("Retry-After", tc.retryAfter)
					}
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
			var observed int
			var told, slept []time.Duration
			c := newClient(t, srv.URL, client.WithObserver(func(client.Exchange) { observed++ }),
				client.WithRetry(client.Retry{Attempts: 3, MaxWait: tc.maxWait,
					Notify: func(e *client.Error, wait time.Duration, attempt int) {
						told = append(told, wait)
						if e.Code != tc.code || attempt != len(told) {
							t.Errorf("Notify(%v, %s, %d): want %s, attempt %d", e, wait, attempt, tc.code, len(told))
						}
					},
					Sleep: func(ctx context.Context, d time.Duration) error {
						if len(slept) != len(told)-1 {
							t.Errorf("Sleep(%s) without a Notify first", d)
						}
						slept = append(slept, d)
						return ctx.Err()
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
			if (err == nil) != tc.ok || int(n.Load()) != tc.sent || observed != tc.sent {
				t.Errorf("err %v after %d requests, %d observed; want ok %v, %d requests", err, n.Load(), observed, tc.ok, tc.sent)
			}
			if diff := cmp.Diff(tc.waits, slept); diff != "" {
				t.Errorf("waits asked of Sleep (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.waits, told); diff != "" {
				t.Errorf("waits told (-want +got):\n%s", diff)
			}
		})
	}
}

// TestRetryGivesUpWhenTheWaitEnds: a Sleep that ends with the caller's
// context ends the call with the last answer's error, sending nothing more.
func TestRetryGivesUpWhenTheWaitEnds(t *testing.T) {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		w.Header().Set("Retry-After", "5")
		w.WriteHeader(http.StatusTooManyRequests)
		_, _ = w.Write([]byte(`{"code":"THROTTLED","message":"m"}`))
	}))
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var slept []time.Duration
	c := newClient(t, srv.URL, client.WithRetry(client.Retry{Attempts: 3, MaxWait: time.Minute,
		Sleep: func(ctx context.Context, d time.Duration) error {
			slept = append(slept, d)
			cancel() // the caller gives up during the wait
			return ctx.Err()
		}}))
	_, err := c.GetProgram(ctx, "p")
	if ae := (*client.Error)(nil); !errors.As(err, &ae) || ae.Status != http.StatusTooManyRequests || ae.RetryAfter != 5*time.Second {
		t.Errorf("err %v; want the 429 answered", err)
	}
	if n.Load() != 1 || !cmp.Equal(slept, []time.Duration{5 * time.Second}) {
		t.Errorf("%d requests, waits %v; want 1 request and one wait of 5s", n.Load(), slept)
	}
}

// TestRetryAfterDateWithoutDate: a Retry-After given as an HTTP-date in an
// answer without a Date header counts from the client's clock (WithNow).
func TestRetryAfterDateWithoutDate(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header()["Date"] = nil // net/http adds none then
		w.Header().Set("Retry-After", now.Add(7*time.Second).Format(http.TimeFormat))
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte(`{"code":"BUSY","message":"m"}`))
	}))
	defer srv.Close()
	var dates []string
	c := newClient(t, srv.URL, client.WithNow(func() time.Time { return now }), client.WithObserver(func(client.Exchange) {}),
		client.WithHTTPClient(&http.Client{Transport: roundTripper(func(r *http.Request) (*http.Response, error) {
			resp, err := http.DefaultTransport.RoundTrip(r)
			if err == nil {
				dates = append(dates, resp.Header.Get("Date"))
			}
			return resp, err
		})}))
	_, err := c.GetProgram(context.Background(), "p")
	if ae := (*client.Error)(nil); !errors.As(err, &ae) || ae.RetryAfter != 7*time.Second {
		t.Errorf("err %#v; want BUSY with RetryAfter 7s from the client's now", err)
	}
	if !cmp.Equal(dates, []string{""}) {
		t.Errorf("Date headers %q: the answer should have none", dates)
	}
}

// roundTripper is a function as an http.RoundTripper.
type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

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
