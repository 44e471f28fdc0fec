package client

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/example/waitingroom/internal/api"
)

// Error is an answer other than the one expected: the API's
// {"code","message"}, or API Gateway's own {"message"} (Code is then
// empty), or, failing both, the start of the body or the status text.
type Error struct {
	Status  int
	Code    string
	Message string
	// RetryAfter is the answer's Retry-After delay (seconds or an
	// HTTP-date); 0 when absent.
	RetryAfter time.Duration
}

func (e *Error) Error() string {
	if e.Code == "" {
		return fmt.Sprintf("%s (HTTP %d)", e.Message, e.Status)
	}
	return e.Code + ": " + e.Message
}

// Retryable reports whether the same request may succeed later: 429 and
// 5xx. Any other 4xx is the caller's mistake.
func (e *Error) Retryable() bool {
	return e.Status == http.StatusTooManyRequests || e.Status >= 500
}

// maxMessageBytes bounds the start of a body that is not the API's JSON,
// kept as an Error's Message.
const maxMessageBytes = 200

// answerError reads an answer other than the one expected, received at
// now.
func answerError(resp *http.Response, raw []byte, now time.Time) *Error {
	e := &Error{Status: resp.StatusCode}
	e.RetryAfter, _ = ParseRetryAfter(resp.Header, now)
	var body struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	}
	if json.Unmarshal(raw, &body) == nil && (body.Code != "" || body.Message != "") {
		e.Code, e.Message = body.Code, body.Message
		return e
	}
	msg := strings.TrimSpace(string(raw))
	if len(msg) > maxMessageBytes {
		msg = strings.ToValidUTF8(msg[:maxMessageBytes], "") + "…"
	}
	if msg == "" {
		msg = http.StatusText(resp.StatusCode)
	}
	e.Message = msg
	return e
}

// maxRetryAfterSeconds caps a Retry-After (a day) so that it fits a
// time.Duration.
const maxRetryAfterSeconds = 24 * 60 * 60

// ParseRetryAfter reads h's Retry-After: delay-seconds, or an HTTP-date
// taken relative to the answer's Date header (now when it has none). ok is
// false when the header is absent or malformed; a date in the past is 0,
// and any delay is capped at a day.
func ParseRetryAfter(h http.Header, now time.Time) (d time.Duration, ok bool) {
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0, false
	}
	if s, err := strconv.ParseInt(v, 10, 64); err == nil {
		if s < 0 {
			return 0, false
		}
		return time.Duration(min(s, maxRetryAfterSeconds)) * time.Second, true
	}
	at, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	if date, err := http.ParseTime(h.Get("Date")); err == nil {
		now = date
	}
	return min(max(at.Sub(now), 0), maxRetryAfterSeconds*time.Second), true
}

// RetryDelay reports whether a call that failed with err is worth sending
// again, and after how long: an *Error's Retry-After (fallback when it has
// none) if it is Retryable, fallback after a transport error, never once
// ctx has ended or for any other answer.
func RetryDelay(ctx context.Context, err error, fallback time.Duration) (time.Duration, bool) {
	if err == nil || ctx.Err() != nil {
		return 0, false
	}
	var e *Error
	if !errors.As(err, &e) {
		return fallback, true
	}
	if !e.Retryable() {
		return 0, false
	}
	return cmp.Or(e.RetryAfter, fallback), true
}

// Retry is how a Client repeats a request the server could not serve now
// (429, or 503 for a request safe to repeat: see safeToRepeat): up to
// Attempts in all, each after the answer's Retry-After (1 s without one,
// or for 0), at most MaxWait. Notify, if set, hears of each retry before
// its wait. The zero Retry sends each request once.
type Retry struct {
	Attempts int
	MaxWait  time.Duration
	Notify   func(err *Error, wait time.Duration, attempt int)
	// Sleep waits before each retry: for d, or until ctx ends (then it
	// returns ctx's error and the call gives up). Nil is the real clock's;
	// tests record the waits asked for instead.
	Sleep func(ctx context.Context, d time.Duration) error
}

// after reports whether to send again a request of method that failed with
// err at attempt, and after how long; it tells Notify.
func (r Retry) after(method string, err error, attempt int) (time.Duration, bool) {
	var e *Error
	if !errors.As(err, &e) || attempt >= r.Attempts || !safeToRepeat(method, e) {
		return 0, false
	}
	wait := min(cmp.Or(e.RetryAfter, time.Second), r.MaxWait)
	if r.Notify != nil {
		r.Notify(e, wait, attempt)
	}
	return wait, true
}

// safeToRepeat reports whether a request answered e may be sent again:
// always after a 429 or a 503 BUSY, which made no change; after another
// 503 only for a GET, PUT or DELETE, which come to the same when made
// twice (a DELETE repeated after it took effect may answer 404).
func safeToRepeat(method string, e *Error) bool {
	switch {
	case e.Status == http.StatusTooManyRequests, e.Status == http.StatusServiceUnavailable && e.Code == api.CodeBusy:
		return true
	case e.Status == http.StatusServiceUnavailable:
		return method == http.MethodGet || method == http.MethodPut || method == http.MethodDelete
	}
	return false
}
