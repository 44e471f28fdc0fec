// Package apiclient is a typed client of the waiting room's HTTP API, as the
// bench's virtual users and admin calls use it: each call returns a typed
// answer, or an *APIError with the status, the API's error code and the
// Retry-After delay. It does not retry; RetryDelay tells the caller whether
// and when to.
package apiclient

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Request headers of the queue API.
const (
	HeaderToken          = "X-Queue-Token"
	HeaderIdempotencyKey = "Idempotency-Key"
)

// Op names an API call as "METHOD route"; the bench counts requests by it.
type Op string

// The calls of the API.
const (
	OpEnter      Op = "POST enter"
	OpPoll       Op = "GET poll"
	OpLeave      Op = "DELETE leave"
	OpGetProgram Op = "GET admin"
	OpPutProgram Op = "PUT admin"
	OpAdmit      Op = "POST admissions"
)

// Admin reports whether o is an admin call.
func (o Op) Admin() bool { return o == OpGetProgram || o == OpPutProgram || o == OpAdmit }

// Status is a token's status in a TokenAnswer.
type Status string

// Token statuses.
const (
	StatusWaiting  Status = "WAITING"
	StatusAdmitted Status = "ADMITTED"
	StatusExpired  Status = "EXPIRED"
	StatusLeft     Status = "LEFT"
)

// TokenAnswer is the API's answer to an enter or a poll. Times are the
// API's RFC 3339 strings, "" when absent.
type TokenAnswer struct {
	TokenID string `json:"tokenId"`
	Status  Status `json:"status"`
	// Ticket is the token's place in the program's ticket order; 0 when the
	// server does not send it.
	Ticket          int64  `json:"ticket"`
	Position        int64  `json:"position"`
	RetryAfterMs    int64  `json:"retryAfterMs"`
	EstimatedWaitMs int64  `json:"estimatedWaitMs"`
	IssuedAt        string `json:"issuedAt"`
	AdmittedAt      string `json:"admittedAt"`
	ExpiresAt       string `json:"expiresAt"`
	LeftAt          string `json:"leftAt"`
	// OpensAt and StatusLine tell a scheduled opening ("" otherwise).
	OpensAt    string `json:"opensAt"`
	StatusLine string `json:"statusLine"`
	// Shuffle is a shuffled opening's commitment and, once the pre-queue
	// is fixed, the seed, its size and the token's place; nil without one.
	Shuffle *Shuffle `json:"shuffle"`
	// Created is true when an enter was answered 201 (a new place), false
	// for 200 (an existing token answered again).
	Created bool `json:"-"`
}

// Shuffle is the shuffle object of a token answer.
type Shuffle struct {
	Commitment string `json:"commitment"`
	PublicKey  string `json:"publicKey"`
	Seed       string `json:"seed"`
	Prequeue   int64  `json:"prequeue"`
	Place      int64  `json:"place"`
}

// RetryAfter is the server's advice of when to poll next.
func (a TokenAnswer) RetryAfter() time.Duration {
	return time.Duration(a.RetryAfterMs) * time.Millisecond
}

// Program is the admin view of a program. Times are the API's RFC 3339
// strings, "" when absent.
type Program struct {
	ProgramID              string  `json:"programId"`
	Issued                 int64   `json:"issued"`
	Admitted               int64   `json:"admitted"`
	Waiting                int64   `json:"waiting"`
	AdmissionRatePerSecond float64 `json:"admissionRatePerSecond"`
	Paused                 bool    `json:"paused"`
	Closed                 bool    `json:"closed"`
	AdmissionWindowSeconds int64   `json:"admissionWindowSeconds"`
	PollingPolicy          string  `json:"pollingPolicy"`
	CreatedAt              string  `json:"createdAt"`
	EffectiveAt            string  `json:"effectiveAt"`
	// Created is true when a PutProgram created the program (201).
	Created bool `json:"-"`
}

// ProgramSettings is the body of PutProgram: nil fields are left out, and
// keep their value on the server.
type ProgramSettings struct {
	AdmissionRatePerSecond *float64 `json:"admissionRatePerSecond,omitempty"`
	Paused                 *bool    `json:"paused,omitempty"`
	AdmissionWindowSeconds *int64   `json:"admissionWindowSeconds,omitempty"`
	PollingPolicy          *string  `json:"pollingPolicy,omitempty"`
	Closed                 *bool    `json:"closed,omitempty"`
}

// APIError is a non-2xx answer.
type APIError struct {
	Status int
	// Code and Message are the API's {code, message}; Code is "" when the
	// body was not the API's JSON (API Gateway's own 429, a proxy's page),
	// and Message then holds the start of the body.
	Code    string
	Message string
	// RetryAfter is the answer's Retry-After delay (seconds or an
	// HTTP-date, RFC 9110); 0 when absent.
	RetryAfter time.Duration
}

func (e *APIError) Error() string {
	s := strconv.Itoa(e.Status)
	if e.Code != "" {
		s += " " + e.Code
	}
	if e.Message != "" {
		s += ": " + e.Message
	}
	return s
}

// Retryable reports whether the same request may succeed later: 429 and
// 5xx. Any other 4xx is the caller's mistake.
func (e *APIError) Retryable() bool {
	return e.Status == http.StatusTooManyRequests || e.Status >= 500
}

// RetryDelay reports whether a call that failed with err is worth sending
// again, and after how long: an *APIError's Retry-After (fallback when it
// has none) if it is Retryable, fallback after a transport error, never
// once ctx has ended or for any other answer.
func RetryDelay(ctx context.Context, err error, fallback time.Duration) (time.Duration, bool) {
	if err == nil || ctx.Err() != nil {
		return 0, false
	}
	var ae *APIError
	if !errors.As(err, &ae) {
		return fallback, true
	}
	if !ae.Retryable() {
		return 0, false
	}
	if ae.RetryAfter > 0 {
		return ae.RetryAfter, true
	}
	return fallback, true
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

// NewIdempotencyKey returns a fresh random key for an enter (128 bits of
// crypto/rand as 26 base32 characters).
func NewIdempotencyKey() string { return rand.Text() }

// Exchange is one request as sent and answered, for an observer.
type Exchange struct {
	Op      Op
	Sent    time.Time
	Latency time.Duration // from sending to the whole answer read
	// Status is the answer's status; 0 when none came.
	Status int
	// Err is nil for an expected 2xx, an *APIError for any other answer,
	// else the transport error.
	Err error
	// Canceled reports that the caller's context ended the request: the
	// failure is the caller's, not the server's.
	Canceled bool
}

// Client calls one server's API. It is safe for concurrent use.
type Client struct {
	base       string
	hc         *http.Client
	adminToken string
	observe    func(Exchange)
}

// Option configures a Client.
type Option func(*Client)

// WithHTTPClient sends the requests with hc (default http.DefaultClient).
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.hc = hc } }

// WithAdminToken authenticates admin calls with "Authorization: Bearer
// token", the local server's scheme.
func WithAdminToken(token string) Option { return func(c *Client) { c.adminToken = token } }

// WithObserver calls f after every request, before the call returns, from
// the calling goroutine.
func WithObserver(f func(Exchange)) Option { return func(c *Client) { c.observe = f } }

// New returns a client of the API served at baseURL (e.g.
// http://127.0.0.1:3000).
func New(baseURL string, opts ...Option) *Client {
	c := &Client{base: strings.TrimRight(baseURL, "/"), hc: http.DefaultClient}
	for _, o := range opts {
		o(c)
	}
	return c
}

func (c *Client) queueURL(programID string) string {
	return c.base + "/api/v1/queues/programs/" + url.PathEscape(programID)
}

func (c *Client) adminURL(programID string) string {
	return c.base + "/api/v1/admin/programs/" + url.PathEscape(programID)
}

// Enter takes a place in programID's queue. A non-empty idempotencyKey is
// sent as the Idempotency-Key header: an enter retried with the same key
// is meant to be answered the same token and ticket.
func (c *Client) Enter(ctx context.Context, programID, idempotencyKey string) (TokenAnswer, error) {
	h := http.Header{}
	if idempotencyKey != "" {
		h.Set(HeaderIdempotencyKey, idempotencyKey)
	}
	var a TokenAnswer
	st, err := c.do(ctx, OpEnter, http.MethodPost, c.queueURL(programID), h, nil, &a, http.StatusCreated, http.StatusOK)
	a.Created = st == http.StatusCreated
	return a, err
}

// Poll reads the status of token in programID's queue.
func (c *Client) Poll(ctx context.Context, programID, token string) (TokenAnswer, error) {
	var a TokenAnswer
	_, err := c.do(ctx, OpPoll, http.MethodGet, c.queueURL(programID), http.Header{HeaderToken: {token}}, nil, &a, http.StatusOK)
	return a, err
}

// Leave gives up token's place in programID's queue. An admitted token
// cannot leave: that is an *APIError with Status 409.
func (c *Client) Leave(ctx context.Context, programID, token string) error {
	_, err := c.do(ctx, OpLeave, http.MethodDelete, c.queueURL(programID), http.Header{HeaderToken: {token}}, nil, nil, http.StatusNoContent)
	return err
}

// GetProgram reads programID's counters and settings (admin).
func (c *Client) GetProgram(ctx context.Context, programID string) (Program, error) {
	var p Program
	_, err := c.do(ctx, OpGetProgram, http.MethodGet, c.adminURL(programID), c.adminHeader(), nil, &p, http.StatusOK)
	return p, err
}

// PutProgram creates programID or changes its settings (admin).
func (c *Client) PutProgram(ctx context.Context, programID string, s ProgramSettings) (Program, error) {
	var p Program
	st, err := c.do(ctx, OpPutProgram, http.MethodPut, c.adminURL(programID), c.adminHeader(), s, &p, http.StatusCreated, http.StatusOK)
	p.Created = st == http.StatusCreated
	return p, err
}

// Admit admits the next count people of programID's queue at once (admin).
func (c *Client) Admit(ctx context.Context, programID string, count int64) (Program, error) {
	var p Program
	body := struct {
		Count int64 `json:"count"`
	}{count}
	_, err := c.do(ctx, OpAdmit, http.MethodPost, c.adminURL(programID)+"/admissions", c.adminHeader(), body, &p, http.StatusOK)
	return p, err
}

func (c *Client) adminHeader() http.Header {
	return http.Header{"Authorization": {"Bearer " + c.adminToken}}
}

// maxAnswerBytes bounds the answers read: the API's are under a kilobyte.
const maxAnswerBytes = 1 << 20

// do sends one request and decodes a wanted answer into out (unless nil);
// it returns the answer's status.
func (c *Client) do(ctx context.Context, op Op, method, u string, h http.Header, body, out any, want ...int) (int, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, fmt.Errorf("%s: encode body: %w", op, err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", op, err)
	}
	for k, v := range h {
		req.Header[k] = v
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	ex := Exchange{Op: op, Sent: time.Now()}
	status, err := c.exchange(req, out, want)
	ex.Latency, ex.Status, ex.Err = time.Since(ex.Sent), status, err
	ex.Canceled = err != nil && ctx.Err() != nil
	if c.observe != nil {
		c.observe(ex)
	}
	return status, err
}

func (c *Client) exchange(req *http.Request, out any, want []int) (int, error) {
	resp, err := c.hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes))
	if err != nil {
		return resp.StatusCode, fmt.Errorf("%s %s: read answer: %w", req.Method, req.URL.Path, err)
	}
	ok := false
	for _, w := range want {
		ok = ok || resp.StatusCode == w
	}
	if !ok {
		return resp.StatusCode, decodeError(resp, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return resp.StatusCode, fmt.Errorf("%s %s: decode answer: %w", req.Method, req.URL.Path, err)
		}
	}
	return resp.StatusCode, nil
}

// decodeError builds the *APIError of an unwanted answer.
func decodeError(resp *http.Response, body []byte) *APIError {
	e := &APIError{Status: resp.StatusCode}
	e.RetryAfter, _ = ParseRetryAfter(resp.Header, time.Now())
	var eb struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	}
	if json.Unmarshal(body, &eb) == nil && (eb.Code != "" || eb.Message != "") {
		e.Code, e.Message = eb.Code, eb.Message
		return e
	}
	msg := strings.TrimSpace(string(body))
	if len(msg) > 200 {
		msg = strings.ToValidUTF8(msg[:200], "") + "…"
	}
	e.Message = msg
	return e
}
