package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"

	"github.com/example/waitingroom/internal/metrics"
	"github.com/example/waitingroom/internal/queue"
)

// statusOf is the one table from error kinds to HTTP statuses.
var statusOf = map[queue.Kind]int{
	queue.KindInvalid:          http.StatusBadRequest,
	queue.KindUnauthorized:     http.StatusUnauthorized,
	queue.KindForbidden:        http.StatusForbidden,
	queue.KindNotFound:         http.StatusNotFound,
	queue.KindMethodNotAllowed: http.StatusMethodNotAllowed,
	queue.KindConflict:         http.StatusConflict,
	queue.KindTooLarge:         http.StatusRequestEntityTooLarge,
	queue.KindInternal:         http.StatusInternalServerError,
	queue.KindUnavailable:      http.StatusServiceUnavailable,
}

// Errors of the HTTP layer itself.
var (
	errNoRoute     = queue.Errorf(queue.KindNotFound, queue.CodeNotFound, "No such route.")
	errTooLarge    = queue.Errorf(queue.KindTooLarge, queue.CodePayloadTooLarge, "The body must be at most %d bytes.", MaxBodyBytes)
	errUnreadable  = queue.Errorf(queue.KindInvalid, queue.CodeInvalidBody, "The request body could not be read.")
	errInternal    = queue.Errorf(queue.KindInternal, queue.CodeInternal, "Internal error.")
	errNeedsBearer = queue.Errorf(queue.KindUnauthorized, queue.CodeUnauthorized, "Admin routes need an Authorization: Bearer header.")
	errBadBearer   = queue.Errorf(queue.KindForbidden, queue.CodeForbidden, "The admin credentials are not valid.")
	errNeedsIAM    = queue.Errorf(queue.KindForbidden, queue.CodeForbidden, "Admin routes need an IAM-signed request.")
)

// errorBody is the JSON shape of every error.
type errorBody struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// internalBody answers when even an error cannot be encoded.
var internalBody, _ = json.Marshal(errorBody{errInternal.Code, errInternal.Message})

// writeError answers err as {code,message} with its kind's status. Only
// server-side failures (5xx) are logged, with their cause; clients see the
// code and a safe message.
func (a *api) writeError(w http.ResponseWriter, r *http.Request, err error) {
	var e *queue.Error
	if !errors.As(err, &e) || e.Kind == queue.KindInternal {
		e = errInternal
	}
	status, ok := statusOf[e.Kind]
	if !ok {
		status = http.StatusInternalServerError
	}
	if status >= 500 {
		a.log.LogAttrs(r.Context(), slog.LevelError, "request failed",
			slog.String("requestId", requestID(r.Context())),
			slog.String("method", r.Method),
			slog.String("route", r.Pattern),
			slog.Int("status", status),
			slog.String("code", e.Code),
			slog.String("error", fmt.Sprint(err)))
	}
	if status == http.StatusServiceUnavailable {
		retry := a.unavRetry
		if e.RetryAfter > 0 {
			retry = e.RetryAfter // the domain knows when (e.g. a pending change takes effect)
		}
		w.Header().Set("Retry-After", strconv.FormatInt(max(1, ceilSeconds(retry)), 10))
	}
	metrics.Note(r.Context()).Code = e.Code
	writeJSON(w, status, errorBody{Code: e.Code, Message: e.Message})
}

// writeClientError answers e, a client's mistake (4xx), which is not
// logged; r is nil for an event that never became a request.
func writeClientError(w http.ResponseWriter, r *http.Request, e *queue.Error) {
	if r != nil {
		metrics.Note(r.Context()).Code = e.Code
	}
	writeJSON(w, statusOf[e.Kind], errorBody{Code: e.Code, Message: e.Message})
}

// writeJSON answers status with body as JSON; body nil means no body. Every
// answer has Cache-Control: no-store.
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
