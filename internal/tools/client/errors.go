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

// Error is an answer other than the one expected: the API's {"code","message"},
// API Gateway's {"message"}, or the start of the body or the status text.
type Error struct {
	Status     int
	Code       string
	Message    string
	RetryAfter time.Duration // 0 when absent
}

func (e *Error) Error() string {
	if e.Code == "" {
		return fmt.Sprintf("%s (HTTP %d)", e.Message, e.Status)
	}
	return e.Code + ": " + e.Message
}

// Retryable reports whether the same request may succeed later: 429 and 5xx.
func (e *Error) Retryable() bool {
	return e.Status == http.StatusTooManyRequests || e.Status >= 500
}

// maxMessageBytes bounds the start of a body kept as an Error's Message.
const maxMessageBytes = 200

// answerError reads an answer other than the one expected, received at now.
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
	e.Message = cmp.Or(msg, http.StatusText(resp.StatusCode))
	return e
}

const maxRetryAfterSeconds = 24 * 60 * 60

// ParseRetryAfter reads h's Retry-After: seconds, or an HTTP-date relative
// to the Date header (else now); ok is false when absent or malformed.
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
// again, and after how long: Retry-After, or else fallback.
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
// (safeToRepeat): up to Attempts in all, each after the answer's Retry-After
// (1 s without one), at most MaxWait. The zero Retry sends each request once.
type Retry struct {
	Attempts int
	MaxWait  time.Duration
	Notify   func(err *Error, wait time.Duration, attempt int) // hears of each retry
	// Sleep waits for d before each retry, or until ctx ends (nil: the real clock's).
	Sleep func(ctx context.Context, d time.Duration) error
}

// after reports whether to send again a request of method that failed with err at attempt, and after how long.
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
// after a 429 or a 503 BUSY, or another 503 to an idempotent method.
func safeToRepeat(method string, e *Error) bool {
	switch {
	case e.Status == http.StatusTooManyRequests, e.Status == http.StatusServiceUnavailable && e.Code == api.CodeBusy:
		return true
	case e.Status == http.StatusServiceUnavailable:
		return method == http.MethodGet || method == http.MethodPut || method == http.MethodDelete
	}
	return false
}
