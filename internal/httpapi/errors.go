package httpapi

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strconv"

	"github.com/aws/aws-lambda-go/events"

	"github.com/example/waitingroom/internal/queue"
)

// apiError is an HTTP-level error: a status, a code and a safe message.
type apiError struct {
	status  int
	code    string
	message string
}

func (e *apiError) Error() string { return e.code + ": " + e.message }

// statusOf is the one table from domain error kinds to HTTP statuses.
var statusOf = map[queue.Kind]int{
	queue.KindInvalid:     http.StatusBadRequest,
	queue.KindNotFound:    http.StatusNotFound,
	queue.KindConflict:    http.StatusConflict,
	queue.KindUnavailable: http.StatusServiceUnavailable,
	queue.KindInternal:    http.StatusInternalServerError,
}

// errorBody is the JSON shape of every error.
type errorBody struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// errorResponse answers err. Only store faults and internal errors are
// logged (with their cause); clients see the code and a safe message.
func (h *Handler) errorResponse(ctx context.Context, req events.APIGatewayV2HTTPRequest, err error) events.APIGatewayV2HTTPResponse {
	var (
		ae *apiError
		de *queue.Error
	)
	switch {
	case errors.As(err, &ae):
	case errors.As(err, &de):
		ae = &apiError{statusOf[de.Kind], de.Code, de.Message}
		if de.Kind == queue.KindInternal {
			ae.message = "Internal error."
		}
	default:
		ae = &apiError{http.StatusInternalServerError, queue.CodeInternal, "Internal error."}
	}
	if ae.status >= 500 {
		h.log.LogAttrs(ctx, slog.LevelError, "request failed",
			slog.String("requestId", req.RequestContext.RequestID),
			slog.String("method", req.RequestContext.HTTP.Method),
			slog.String("route", req.RouteKey),
			slog.Int("status", ae.status),
			slog.String("code", ae.code),
			slog.String("error", err.Error()))
	}
	resp := response(ae.status, errorBody{Code: ae.code, Message: ae.message})
	if ae.status == http.StatusServiceUnavailable {
		resp.Headers["Retry-After"] = strconv.FormatInt(ceilSeconds(h.unavRetry), 10)
	}
	return resp
}
