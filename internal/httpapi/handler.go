// Package httpapi maps API Gateway HTTP API (payload format 2.0) requests
// onto the queue service and its answers and errors back onto HTTP. The
// Lambda functions call Handler.Handle; the local server serves the very same
// method through Handler.ServeHTTP.
package httpapi

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/example/waitingroom/internal/queue"
)

// HeaderToken carries the queue token on requests.
const HeaderToken = "X-Queue-Token"

// MaxBodyBytes bounds request bodies; larger ones get 413.
const MaxBodyBytes = 16 << 10

// Handler answers the waiting room's HTTP API.
type Handler struct {
	svc       *queue.Service
	log       *slog.Logger
	public    bool
	admin     adminAuth
	unavRetry time.Duration
}

// adminAuth checks an admin request; nil error means allowed.
type adminAuth func(events.APIGatewayV2HTTPRequest) *apiError

// Option configures a Handler.
type Option func(*Handler)

// WithLogger sets the structured logger (default slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(h *Handler) { h.log = l } }

// WithAdminSecret serves the admin routes to requests bearing
// "Authorization: Bearer <secret>" (compared in constant time): the local
// server's scheme.
func WithAdminSecret(secret string) Option {
	want := sha256.Sum256([]byte(secret))
	return func(h *Handler) {
		h.admin = func(req events.APIGatewayV2HTTPRequest) *apiError {
			auth := header(req, "authorization")
			if auth == "" {
				return &apiError{http.StatusUnauthorized, "UNAUTHORIZED", "Admin routes need an Authorization: Bearer header."}
			}
			scheme, got, ok := strings.Cut(auth, " ")
			sum := sha256.Sum256([]byte(got))
			if !ok || !strings.EqualFold(scheme, "Bearer") || subtle.ConstantTimeCompare(sum[:], want[:]) != 1 {
				return &apiError{http.StatusForbidden, "FORBIDDEN", "The admin credentials are not valid."}
			}
			return nil
		}
	}
}

// WithIAMAdmin serves the admin routes to requests that API Gateway's
// AWS_IAM authorizer let through (it rejects unsigned ones before the
// function runs; this is the second lock on the door).
func WithIAMAdmin() Option {
	return func(h *Handler) {
		h.admin = func(req events.APIGatewayV2HTTPRequest) *apiError {
			if a := req.RequestContext.Authorizer; a == nil || a.IAM == nil || a.IAM.UserARN == "" && a.IAM.CallerID == "" {
				return &apiError{http.StatusForbidden, "FORBIDDEN", "Admin routes need an IAM-signed request."}
			}
			return nil
		}
	}
}

// AdminOnly drops the public queue routes (the admin function's handler).
func AdminOnly() Option { return func(h *Handler) { h.public = false } }

// New returns a Handler over svc. Without WithAdminSecret or WithIAMAdmin
// the admin routes answer 404.
func New(svc *queue.Service, opts ...Option) *Handler {
	h := &Handler{svc: svc, log: slog.Default(), public: true, unavRetry: 2 * time.Second}
	for _, o := range opts {
		o(h)
	}
	return h
}

// Handle answers one API Gateway HTTP API request. It never returns an
// error: every failure is an HTTP answer, so API Gateway never turns it into
// an opaque 500.
func (h *Handler) Handle(ctx context.Context, req events.APIGatewayV2HTTPRequest) (resp events.APIGatewayV2HTTPResponse, _ error) {
	defer func() {
		if r := recover(); r != nil {
			h.log.ErrorContext(ctx, "panic", "requestId", req.RequestContext.RequestID, "panic", fmt.Sprint(r))
			resp = h.errorResponse(ctx, req, &apiError{http.StatusInternalServerError, queue.CodeInternal, "Internal error."})
		}
	}()
	start := time.Now()
	resp = h.route(ctx, req)
	// Access log at debug level: a poll is the hot path and CloudWatch bills
	// per byte. Never the token itself.
	h.log.LogAttrs(ctx, slog.LevelDebug, "request",
		slog.String("requestId", req.RequestContext.RequestID),
		slog.String("method", req.RequestContext.HTTP.Method),
		slog.String("path", req.RawPath),
		slog.Int("status", resp.StatusCode),
		slog.Duration("duration", time.Since(start)))
	return resp, nil
}

// Route patterns, split on '/', "*" for the program id; and the Allow
// header of each, from Routes.
var (
	queuePath     = pattern(QueuePath)
	adminPath     = pattern(AdminPath)
	admissionPath = pattern(AdmissionPath)

	allowQueue     = allow(QueuePath)
	allowAdmin     = allow(AdminPath)
	allowAdmission = allow(AdmissionPath)
)

func pattern(path string) []string {
	segs := strings.Split(strings.Trim(path, "/"), "/")
	for i, s := range segs {
		if strings.HasPrefix(s, "{") {
			segs[i] = "*"
		}
	}
	return segs
}

func allow(path string) string {
	var methods []string
	for _, r := range Routes {
		if r.Path == path {
			methods = append(methods, r.Method)
		}
	}
	slices.Sort(methods)
	return strings.Join(methods, ", ")
}

func (h *Handler) route(ctx context.Context, req events.APIGatewayV2HTTPRequest) events.APIGatewayV2HTTPResponse {
	method := req.RequestContext.HTTP.Method
	path := req.RawPath
	if path == "" {
		path = req.RequestContext.HTTP.Path
	}
	segs, err := splitPath(path)
	if err != nil {
		return h.errorResponse(ctx, req, errRouteNotFound)
	}
	if id, ok := match(segs, queuePath); ok && h.public {
		switch method {
		case http.MethodPost:
			v, created, err := h.svc.Enter(ctx, id, queue.Entry{Token: header(req, HeaderToken)})
			status := http.StatusOK
			if created {
				status = http.StatusCreated
			}
			return h.tokenResponse(ctx, req, status, v, err)
		case http.MethodGet:
			v, err := h.svc.Poll(ctx, id, header(req, HeaderToken))
			return h.tokenResponse(ctx, req, http.StatusOK, v, err)
		case http.MethodDelete:
			if err := h.svc.Leave(ctx, id, header(req, HeaderToken)); err != nil {
				return h.errorResponse(ctx, req, err)
			}
			return response(http.StatusNoContent, nil)
		}
		return h.methodNotAllowed(ctx, req, allowQueue)
	}
	if h.admin == nil {
		return h.errorResponse(ctx, req, errRouteNotFound)
	}
	if id, ok := match(segs, adminPath); ok {
		if method != http.MethodGet && method != http.MethodPut {
			return h.methodNotAllowed(ctx, req, allowAdmin)
		}
		if e := h.admin(req); e != nil {
			return h.errorResponse(ctx, req, e)
		}
		if method == http.MethodGet {
			c, err := h.svc.Program(ctx, id)
			return h.countersResponse(ctx, req, http.StatusOK, c, err)
		}
		var body programBody
		if e := decodeBody(req, &body); e != nil {
			return h.errorResponse(ctx, req, e)
		}
		set, e := body.settings()
		if e != nil {
			return h.errorResponse(ctx, req, e)
		}
		c, created, err := h.svc.PutProgram(ctx, id, set)
		status := http.StatusOK
		if created {
			status = http.StatusCreated
		}
		return h.countersResponse(ctx, req, status, c, err)
	}
	if id, ok := match(segs, admissionPath); ok {
		if method != http.MethodPost {
			return h.methodNotAllowed(ctx, req, allowAdmission)
		}
		if e := h.admin(req); e != nil {
			return h.errorResponse(ctx, req, e)
		}
		var body admissionBody
		if e := decodeBody(req, &body); e != nil {
			return h.errorResponse(ctx, req, e)
		}
		if body.Count == nil {
			return h.errorResponse(ctx, req, &apiError{http.StatusBadRequest, queue.CodeInvalidCount, "count is required."})
		}
		c, err := h.svc.Admit(ctx, id, *body.Count)
		return h.countersResponse(ctx, req, http.StatusOK, c, err)
	}
	return h.errorResponse(ctx, req, errRouteNotFound)
}

// splitPath splits a raw path into unescaped segments, dropping one
// trailing slash.
func splitPath(p string) ([]string, error) {
	p = strings.TrimPrefix(p, "/")
	p = strings.TrimSuffix(p, "/")
	segs := strings.Split(p, "/")
	for i, s := range segs {
		u, err := url.PathUnescape(s)
		if err != nil {
			return nil, err
		}
		segs[i] = u
	}
	return segs, nil
}

// match reports whether segs fit pattern, returning the "*" segment.
func match(segs, pattern []string) (string, bool) {
	if len(segs) != len(pattern) {
		return "", false
	}
	var id string
	for i, p := range pattern {
		switch {
		case p == "*":
			id = segs[i]
		case p != segs[i]:
			return "", false
		}
	}
	return id, true
}

// header returns the request header name (case-insensitive).
func header(req events.APIGatewayV2HTTPRequest, name string) string {
	if v, ok := req.Headers[strings.ToLower(name)]; ok {
		return strings.TrimSpace(v)
	}
	for k, v := range req.Headers {
		if strings.EqualFold(k, name) {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// tokenBody is QueueTokenResponse. Keys that do not apply to a status are
// absent, never null.
type tokenBody struct {
	TokenID      string `json:"tokenId"`
	Status       string `json:"status"`
	IssuedAt     string `json:"issuedAt"`
	Position     int64  `json:"position,omitempty"`
	RetryAfterMs int64  `json:"retryAfterMs,omitempty"`
	// EstimatedWaitMs is present while WAITING when the admission pace is known.
	EstimatedWaitMs int64  `json:"estimatedWaitMs,omitempty"`
	AdmittedAt      string `json:"admittedAt,omitempty"`
	ExpiresAt       string `json:"expiresAt,omitempty"`
	LeftAt          string `json:"leftAt,omitempty"`
}

// countersBody is the admin view of a program.
type countersBody struct {
	ProgramID              string  `json:"programId"`
	Issued                 int64   `json:"issued"`
	Admitted               int64   `json:"admitted"`
	Waiting                int64   `json:"waiting"`
	AdmissionRatePerSecond float64 `json:"admissionRatePerSecond"`
	Paused                 bool    `json:"paused"`
	Closed                 bool    `json:"closed"`
	AdmissionWindowSeconds int64   `json:"admissionWindowSeconds"`
	CreatedAt              string  `json:"createdAt"`
	// PollingPolicy is the program's own policy; absent for the default.
	PollingPolicy string `json:"pollingPolicy,omitempty"`
	// EffectiveAt is when the last change takes effect, while it has not.
	EffectiveAt string `json:"effectiveAt,omitempty"`
}

// programBody is the admin PUT body; absent fields keep their value.
type programBody struct {
	AdmissionRatePerSecond *float64 `json:"admissionRatePerSecond"`
	Paused                 *bool    `json:"paused"`
	AdmissionWindowSeconds *int64   `json:"admissionWindowSeconds"`
	PollingPolicy          *string  `json:"pollingPolicy"`
	Closed                 *bool    `json:"closed"`
}

func (b programBody) settings() (queue.Settings, *apiError) {
	set := queue.Settings{AdmissionRatePerSecond: b.AdmissionRatePerSecond, Paused: b.Paused, PollingPolicy: b.PollingPolicy, Closed: b.Closed}
	if w := b.AdmissionWindowSeconds; w != nil {
		if *w < 0 || *w > math.MaxInt64/int64(time.Second) {
			return set, &apiError{http.StatusBadRequest, queue.CodeInvalidSettings, "admissionWindowSeconds is out of range."}
		}
		d := time.Duration(*w) * time.Second
		set.AdmissionWindow = &d
	}
	return set, nil
}

// admissionBody is the body of POST …/admissions.
type admissionBody struct {
	Count *int64 `json:"count"`
}

// timeString formats t as RFC 3339 UTC with milliseconds, or "" for zero.
func timeString(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format("2006-01-02T15:04:05.000Z")
}

func (h *Handler) tokenResponse(ctx context.Context, req events.APIGatewayV2HTTPRequest, status int, v queue.View, err error) events.APIGatewayV2HTTPResponse {
	if err != nil {
		return h.errorResponse(ctx, req, err)
	}
	body := tokenBody{
		TokenID:         v.TokenID,
		Status:          string(v.Status),
		IssuedAt:        timeString(v.IssuedAt),
		Position:        v.Position,
		RetryAfterMs:    v.RetryAfter.Milliseconds(),
		EstimatedWaitMs: v.EstimatedWait.Milliseconds(),
		AdmittedAt:      timeString(v.AdmittedAt),
		ExpiresAt:       timeString(v.ExpiresAt),
		LeftAt:          timeString(v.LeftAt),
	}
	resp := response(status, body)
	if v.Status == queue.StatusWaiting {
		resp.Headers["Retry-After"] = strconv.FormatInt(ceilSeconds(v.RetryAfter), 10)
	}
	return resp
}

func (h *Handler) countersResponse(ctx context.Context, req events.APIGatewayV2HTTPRequest, status int, c queue.Counters, err error) events.APIGatewayV2HTTPResponse {
	if err != nil {
		return h.errorResponse(ctx, req, err)
	}
	return response(status, countersBody{
		ProgramID:              c.ProgramID,
		Issued:                 c.Issued,
		Admitted:               c.Admitted,
		Waiting:                c.Waiting,
		AdmissionRatePerSecond: c.Rate,
		Paused:                 c.Paused,
		Closed:                 c.Closed,
		AdmissionWindowSeconds: int64(c.AdmissionWindow / time.Second),
		CreatedAt:              timeString(c.CreatedAt),
		EffectiveAt:            timeString(c.EffectiveAt),
		PollingPolicy:          c.PollingPolicy,
	})
}

func ceilSeconds(d time.Duration) int64 {
	return int64((d + time.Second - 1) / time.Second)
}

// response builds a JSON answer; body nil means no body.
func response(status int, body any) events.APIGatewayV2HTTPResponse {
	resp := events.APIGatewayV2HTTPResponse{
		StatusCode: status,
		Headers:    map[string]string{"Cache-Control": "no-store"},
	}
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil { // only our own plain structs get here
			b = []byte(`{"code":"INTERNAL","message":"Internal error."}`)
			resp.StatusCode = http.StatusInternalServerError
		}
		resp.Headers["Content-Type"] = "application/json; charset=utf-8"
		resp.Body = string(b)
	}
	return resp
}

var errRouteNotFound = &apiError{http.StatusNotFound, "NOT_FOUND", "No such route."}

func (h *Handler) methodNotAllowed(ctx context.Context, req events.APIGatewayV2HTTPRequest, allow string) events.APIGatewayV2HTTPResponse {
	resp := h.errorResponse(ctx, req, &apiError{http.StatusMethodNotAllowed, "METHOD_NOT_ALLOWED", "Allowed methods: " + allow + "."})
	resp.Headers["Allow"] = allow
	return resp
}
