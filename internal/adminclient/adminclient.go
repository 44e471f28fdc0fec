// Package adminclient calls the waiting room's admin API: a program's
// counters, its settings, manual admissions. Requests are authorized with
// the local server's bearer token or, on AWS, signed with SigV4 for API
// Gateway's IAM authorizer.
package adminclient

import (
	"bytes"
	"context"
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

// programsPath is where the admin API's programs live.
const programsPath = "/api/v1/admin/programs/"

// maxAnswerBytes bounds what the client reads of an answer.
const maxAnswerBytes = 1 << 20

// Client calls one waiting room's admin API. It is safe for concurrent use.
type Client struct {
	base  *url.URL
	auth  Authorizer
	http  *http.Client
	retry Retry
}

// Retry is how a Client repeats a request the server could not serve now
// (429, or 503 for a request safe to repeat: see retryable): up to
// Attempts in all, each after the answer's Retry-After (1 s without one, or
// for 0),
// at most MaxWait. Notify, if set, hears of each retry before its wait.
// The zero Retry sends each request once.
type Retry struct {
	Attempts int
	MaxWait  time.Duration
	Notify   func(err *Error, wait time.Duration, attempt int)
}

// SetRetry makes c repeat requests as r says; call it before any request.
func (c *Client) SetRetry(r Retry) { c.retry = r }

// New returns a Client for the API at baseURL (http or https, e.g.
// "https://abc123.execute-api.eu-west-1.amazonaws.com"), authorizing every
// request with auth. A nil httpClient means one with a 30 s timeout.
func New(baseURL string, auth Authorizer, httpClient *http.Client) (*Client, error) {
	u, err := url.Parse(strings.TrimRight(baseURL, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("API URL %q: want http(s)://host[:port][/path]", baseURL)
	}
	if auth == nil {
		return nil, errors.New("adminclient: no Authorizer")
	}
	if _, ok := auth.(BearerToken); ok {
		if err := BearerSafe(u); err != nil {
			return nil, err
		}
	}
	if httpClient == nil {
		httpClient = &http.Client{Timeout: 30 * time.Second}
	}
	return &Client{base: u, auth: auth, http: httpClient}, nil
}

// Program is the admin view of a program: its counters and settings. Raw
// holds the answer exactly as the server sent it, including any field this
// client does not know.
type Program struct {
	ProgramID              string    `json:"programId"`
	Issued                 int64     `json:"issued"`
	Admitted               int64     `json:"admitted"`
	Waiting                int64     `json:"waiting"`
	AdmissionRatePerSecond float64   `json:"admissionRatePerSecond"`
	Paused                 bool      `json:"paused"`
	Closed                 bool      `json:"closed"`
	AdmissionWindowSeconds int64     `json:"admissionWindowSeconds"`
	CreatedAt              time.Time `json:"createdAt"`
	// PollingPolicy is "" for the service's default.
	PollingPolicy string `json:"pollingPolicy"`
	// EffectiveAt is when the last change takes effect, while it has not.
	EffectiveAt time.Time `json:"effectiveAt"`
	// OpensAt is when admission starts, for a program with a scheduled
	// opening.
	OpensAt       time.Time `json:"opensAt"`
	ShuffleAtOpen bool      `json:"shuffleAtOpen"`
	TargetURL     string    `json:"targetUrl"`
	DisplayName   string    `json:"displayName"`
	Message       string    `json:"message"`
	Notice        string    `json:"notice"`

	Raw json.RawMessage `json:"-"`
}

// UnmarshalJSON reads a program; a time field that is absent or "" stays
// zero.
func (p *Program) UnmarshalJSON(b []byte) error {
	type plain Program // without this method
	var aux struct {
		plain
		// Shallower than plain's, so these take the time fields.
		CreatedAt   string `json:"createdAt"`
		EffectiveAt string `json:"effectiveAt"`
		OpensAt     string `json:"opensAt"`
	}
	if err := json.Unmarshal(b, &aux); err != nil {
		return err
	}
	*p = Program(aux.plain)
	for _, f := range []struct {
		name string
		text string
		dst  *time.Time
	}{{"createdAt", aux.CreatedAt, &p.CreatedAt}, {"effectiveAt", aux.EffectiveAt, &p.EffectiveAt}, {"opensAt", aux.OpensAt, &p.OpensAt}} {
		if f.text == "" {
			continue
		}
		t, err := time.Parse(time.RFC3339Nano, f.text)
		if err != nil {
			return fmt.Errorf("%s %q is not an RFC 3339 time", f.name, f.text)
		}
		*f.dst = t
	}
	return nil
}

// Settings is the body of a program PUT: JSON field names to values. Only
// the fields present are sent; the server keeps the others.
type Settings map[string]any

// Error is an answer other than 2xx: the API's {"code","message"}, or API
// Gateway's own {"message"} (Code is then empty).
type Error struct {
	Status  int
	Code    string
	Message string
	// RetryAfter is the Retry-After of a 503 or 429, zero if none.
	RetryAfter time.Duration
}

func (e *Error) Error() string {
	if e.Code == "" {
		return fmt.Sprintf("%s (HTTP %d)", e.Message, e.Status)
	}
	return e.Code + ": " + e.Message
}

// Program returns programID's counters and settings, read fresh.
func (c *Client) Program(ctx context.Context, programID string) (Program, error) {
	p, _, err := c.do(ctx, http.MethodGet, programsPath+url.PathEscape(programID), nil)
	return p, err
}

// PutProgram creates programID with set, or changes its settings; created
// tells which.
func (c *Client) PutProgram(ctx context.Context, programID string, set Settings) (p Program, created bool, err error) {
	if set == nil {
		set = Settings{}
	}
	p, status, err := c.do(ctx, http.MethodPut, programsPath+url.PathEscape(programID), set)
	return p, status == http.StatusCreated, err
}

// Admit admits n more people of programID now, on top of the automatic
// admission.
func (c *Client) Admit(ctx context.Context, programID string, n int64) (Program, error) {
	p, _, err := c.do(ctx, http.MethodPost, programsPath+url.PathEscape(programID)+"/admissions", map[string]int64{"count": n})
	return p, err
}

// do sends body (JSON; nil for none) to path (escaped, under the base
// URL) and reads a program from the answer, repeating the request as
// c.retry says.
func (c *Client) do(ctx context.Context, method, path string, body any) (Program, int, error) {
	for attempt := 1; ; attempt++ {
		p, status, err := c.once(ctx, method, path, body)
		var e *Error
		if !errors.As(err, &e) || attempt >= c.retry.Attempts || !retryable(method, e) {
			return p, status, err
		}
		wait := e.RetryAfter
		if wait <= 0 {
			wait = time.Second
		}
		wait = min(wait, c.retry.MaxWait)
		if c.retry.Notify != nil {
			c.retry.Notify(e, wait, attempt)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return p, status, err
		case <-t.C:
		}
	}
}

// retryable reports whether a request answered e may be sent again: a 429
// (throttled before it was served) or a BUSY (the change was not made)
// always; another 503, which may come after a change was made, only for a
// request that is the same done twice (GET, and PUT of settings), not for
// an admission.
func retryable(method string, e *Error) bool {
	switch {
	case e.Status == http.StatusTooManyRequests, e.Status == http.StatusServiceUnavailable && e.Code == "BUSY":
		return true
	case e.Status == http.StatusServiceUnavailable:
		return method == http.MethodGet || method == http.MethodPut
	}
	return false
}

// once sends the request of do once.
func (c *Client) once(ctx context.Context, method, path string, body any) (Program, int, error) {
	var payload []byte
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return Program{}, 0, fmt.Errorf("encode the request: %w", err)
		}
		payload = b
	}
	u, err := url.Parse(c.base.String() + path)
	if err != nil {
		return Program{}, 0, err
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), bytes.NewReader(payload))
	if err != nil {
		return Program{}, 0, err
	}
	if payload == nil {
		req.Body, req.GetBody, req.ContentLength = http.NoBody, nil, 0
	} else {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	if err := c.auth.Authorize(ctx, req, payload); err != nil {
		return Program{}, 0, err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return Program{}, 0, fmt.Errorf("%s %s: %w", method, u.Redacted(), err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes))
	if err != nil {
		return Program{}, resp.StatusCode, fmt.Errorf("%s %s: read the answer: %w", method, u.Redacted(), err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return Program{}, resp.StatusCode, answerError(resp, raw)
	}
	var p Program
	if err := json.Unmarshal(raw, &p); err != nil {
		return Program{}, resp.StatusCode, fmt.Errorf("%s %s: the answer is not a program: %w", method, u.Redacted(), err)
	}
	p.Raw = json.RawMessage(raw)
	return p, resp.StatusCode, nil
}

// answerError reads a non-2xx answer: the API's error body, API Gateway's
// {"message"}, or, failing both, the status text.
func answerError(resp *http.Response, raw []byte) *Error {
	e := &Error{Status: resp.StatusCode}
	var body struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	}
	if json.Unmarshal(raw, &body) == nil {
		e.Code, e.Message = body.Code, body.Message
	}
	if e.Message == "" {
		e.Message = http.StatusText(resp.StatusCode)
	}
	if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s >= 0 {
		e.RetryAfter = time.Duration(s) * time.Second
	}
	return e
}
