package httpapi

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	wire "github.com/example/waitingroom/internal/api"
	"github.com/example/waitingroom/internal/metrics"
	"github.com/example/waitingroom/internal/queue"
)

// statusOf is the one table from the domain's error kinds to HTTP statuses.
var statusOf = map[queue.Kind]int{
	queue.KindInvalid:     http.StatusBadRequest,
	queue.KindNotFound:    http.StatusNotFound,
	queue.KindConflict:    http.StatusConflict,
	queue.KindInternal:    http.StatusInternalServerError,
	queue.KindUnavailable: http.StatusServiceUnavailable,
	queue.KindForbidden:   http.StatusForbidden,
	queue.KindTooSoon:     http.StatusTooManyRequests,
}

// httpError is an error of the HTTP layer itself, answered with its own status.
type httpError struct {
	status int
	body   wire.Error
}

func (e *httpError) Error() string { return e.body.Code + ": " + e.body.Message }

// httpErrorf returns an httpError of the given status and code.
func httpErrorf(status int, code, format string, args ...any) *httpError {
	return &httpError{status, wire.Error{Code: code, Message: fmt.Sprintf(format, args...)}}
}

// Errors of the HTTP layer itself.
var (
	errNoRoute     = httpErrorf(http.StatusNotFound, wire.CodeNotFound, "No such route.")
	errTooLarge    = httpErrorf(http.StatusRequestEntityTooLarge, wire.CodePayloadTooLarge, "The body must be at most %d bytes.", MaxBodyBytes)
	errHeadersBig  = httpErrorf(http.StatusRequestHeaderFieldsTooLarge, wire.CodeHeadersTooLarge, "The request line and headers must be at most %d bytes.", MaxHeaderBytes)
	errUnreadable  = httpErrorf(http.StatusBadRequest, wire.CodeInvalidBody, "The request body could not be read.")
	errInternal    = httpErrorf(http.StatusInternalServerError, wire.CodeInternal, "Internal error.")
	errNeedsBearer = httpErrorf(http.StatusUnauthorized, wire.CodeUnauthorized, "Admin routes need an Authorization: Bearer header.")
	errBadBearer   = httpErrorf(http.StatusForbidden, wire.CodeForbidden, "The admin credentials are not valid.")
	errNeedsIAM    = httpErrorf(http.StatusForbidden, wire.CodeForbidden, "Admin routes need an IAM-signed request.")
)

// headerMessages word the domain's errors about a request header, naming it.
var headerMessages = map[string]string{
	wire.CodeMissingToken: "The " + wire.HeaderToken + " header is required.",
	wire.CodeInvalidIdempotencyKey: fmt.Sprintf("The %s must be %d to %d letters, digits, '-', '_', '.' or ':' (a random UUID fits).",
		wire.HeaderIdempotencyKey, queue.MinIdempotencyKeyLen, queue.MaxIdempotencyKeyLen),
	wire.CodeEnterInProgress: "An enter with this " + wire.HeaderIdempotencyKey + " is in progress; retry shortly with the same key.",
}

// internalBody answers when even an error cannot be encoded.
var internalBody, _ = json.Marshal(errInternal.body)

// answerOf is err as the client sees it: its status, body and retry delay
// (0 for none). Anything but an *httpError or a *queue.Error is internal.
func answerOf(err error) (int, wire.Error, time.Duration) {
	if he, ok := errors.AsType[*httpError](err); ok {
		return he.status, he.body, 0
	}
	e, ok := errors.AsType[*queue.Error](err)
	if !ok || e.Kind == queue.KindInternal {
		return errInternal.status, errInternal.body, 0
	}
	status := cmp.Or(statusOf[e.Kind], http.StatusInternalServerError)
	return status, wire.Error{Code: e.Code, Message: cmp.Or(headerMessages[e.Code], e.Message)}, e.RetryAfter
}

// writeError answers err as {code,message} with its status, and a 503 (or
// a refusal with a retry delay) with Retry-After; it logs 5xx answers.
func (a *api) writeError(w http.ResponseWriter, r *http.Request, err error) {
	status, body, retry := answerOf(err)
	if status >= 500 {
		a.log.LogAttrs(r.Context(), slog.LevelError, "request failed", slog.String("requestId", requestID(r.Context())),
			slog.String("method", r.Method), slog.String("route", r.Pattern), slog.Int("status", status),
			slog.String("code", body.Code), slog.String("error", fmt.Sprint(err)))
	}
	if status == http.StatusServiceUnavailable && retry <= 0 {
		retry = a.unavRetry
	}
	if retry > 0 {
		w.Header().Set(wire.HeaderRetryAfter, strconv.FormatInt(max(1, ceilSeconds(retry)), 10))
	}
	metrics.Note(r.Context()).Code = body.Code
	writeJSON(w, status, body)
}

// answer writes body (nil: none) with status, or returns err when not nil.
func answer(w http.ResponseWriter, status int, body any, err error) error {
	if err == nil {
		writeJSON(w, status, body)
	}
	return err
}

// writeClientError answers e, a client's mistake, unlogged; r is nil for an event.
func writeClientError(w http.ResponseWriter, r *http.Request, e *httpError) {
	if r != nil {
		metrics.Note(r.Context()).Code = e.body.Code
	}
	writeJSON(w, e.status, e.body)
}

// writeJSON answers status with body (nil: none) as JSON, and Cache-Control: no-store.
func writeJSON(w http.ResponseWriter, status int, body any) {
	h := w.Header()
	h.Set("Cache-Control", "no-store")
	if body == nil {
		w.WriteHeader(status)
		return
	}
	b, err := json.Marshal(body)
	if err != nil { // only our own plain structs get here
		b, status = internalBody, http.StatusInternalServerError
	}
	h.Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n')) // one answer a line, as a shell expects
}
