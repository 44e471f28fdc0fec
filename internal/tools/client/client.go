// Package client calls the waiting room's HTTP API: the queue calls of the
// people who wait and the admin calls of the operator. Admin calls are
// authorized with a bearer token or a SigV4 signature; every answer other
// than the one expected is an *Error.
package client

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
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/example/waitingroom/internal/api"
)

// Op names an API call as "METHOD route"; the bench counts requests by it.
type Op string

// The calls of the API.
const (
	OpEnter      Op = "POST enter"
	OpPoll       Op = "GET poll"
	OpLeave      Op = "DELETE leave"
	OpEndSession Op = "DELETE session"
	// OpReleaseSession is the site's end of a session as an admin.
	OpReleaseSession Op = "DELETE release"
	OpGetProgram     Op = "GET admin"
	OpPutProgram     Op = "PUT admin"
	OpAdmit          Op = "POST admissions"
	OpListPrograms   Op = "GET programs"
	OpDeleteProgram  Op = "DELETE admin"
	OpHistory        Op = "GET changes"
	// OpBypass is an admin's issuance of bypass passes.
	OpBypass Op = "POST passes"
)

// adminOps are the admin calls.
var adminOps = []Op{OpGetProgram, OpPutProgram, OpAdmit, OpListPrograms, OpDeleteProgram, OpHistory, OpGetToken, OpRevokeToken, OpBypass,
	OpListKeys, OpRotateKey, OpRevokeKey}

// Admin reports whether o is an admin call.
func (o Op) Admin() bool { return slices.Contains(adminOps, o) }

// authorized reports whether o's request carries the admin credentials:
// an admin operation, or the site's release of a session.
func (o Op) authorized() bool { return o.Admin() || o == OpReleaseSession }

// Exchange is one request as sent and answered, for an observer.
type Exchange struct {
	Op      Op
	Sent    time.Time
	Latency time.Duration // from sending to the whole answer read
	// Status is the answer's status; 0 when none came.
	Status int
	// Err is nil for an expected 2xx, an *Error for any other answer,
	// else the transport error.
	Err error
	// Canceled reports that the caller's context ended the request: the
	// failure is the caller's, not the server's.
	Canceled bool
}

// Client calls one waiting room's API. It is safe for concurrent use.
type Client struct {
	base    *url.URL
	auth    Authorizer
	authSet bool // WithAuth was given, if with nil
	http    *http.Client
	retry   Retry
	observe func(Exchange)
	now     func() time.Time
}

// Option configures a Client.
type Option func(*Client)

// WithAuth authorizes the admin calls with auth; without it they go
// without credentials.
func WithAuth(auth Authorizer) Option {
	return func(c *Client) { c.auth, c.authSet = auth, true }
}

// WithHTTPClient sends the requests with hc (default: a client with a 30 s
// timeout).
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.http = hc } }

// WithRetry repeats the requests the server could not serve now as r says
// (default: each request is sent once).
func WithRetry(r Retry) Option { return func(c *Client) { c.retry = r } }

// WithNow reads the time from now (default time.Now) where an answer is
// read against it: a Retry-After given as an HTTP-date in an answer without
// a Date header. Tests pass a fixed clock.
func WithNow(now func() time.Time) Option { return func(c *Client) { c.now = now } }

// WithObserver calls f after every request sent, retries included, before
// the call returns, from the calling goroutine.
func WithObserver(f func(Exchange)) Option { return func(c *Client) { c.observe = f } }

// New returns a Client of the API at baseURL (http or https, e.g.
// "https://abc123.execute-api.eu-west-1.amazonaws.com" or
// "http://127.0.0.1:3000"). A bearer token is refused unless the URL is
// https or loopback (BearerSafe).
func New(baseURL string, opts ...Option) (*Client, error) {
	u, err := url.Parse(strings.TrimRight(baseURL, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("API URL %q: want http(s)://host[:port][/path]", baseURL)
	}
	c := &Client{base: u, now: time.Now}
	for _, o := range opts {
		o(c)
	}
	if c.authSet && c.auth == nil {
		return nil, errors.New("client: WithAuth(nil)")
	}
	if _, ok := c.auth.(BearerToken); ok {
		if err := BearerSafe(u); err != nil {
			return nil, err
		}
	}
	if c.http == nil {
		c.http = &http.Client{Timeout: 30 * time.Second}
	}
	return c, nil
}

// NewIdempotencyKey returns a fresh random key for an enter (128 bits of
// crypto/rand as 26 base32 characters).
func NewIdempotencyKey() string { return rand.Text() }

// Entry is what an enter sends besides the program: a token already held
// (answered again) and an idempotency key, each optional.
type Entry struct {
	Token string
	// IdempotencyKey makes a retried enter answer the token and ticket of
	// the first attempt.
	IdempotencyKey string
	// Challenge and Solution are a proof of work (Prove), for a program
	// that asks for one.
	Challenge, Solution string
}

// ProgramAnswer is an admin call's answer: the program, and the body as
// the server sent it, including any field this client does not know.
type ProgramAnswer struct {
	api.Program
	Raw json.RawMessage
}

// request is one call of the API: what to send and what answer to expect.
type request struct {
	op     Op
	method string
	path   string // under the base URL, escaped
	header http.Header
	body   any   // JSON; nil for none
	want   []int // the statuses of a success
}

func queuePath(programID string) string {
	return strings.Replace(api.QueuePath, "{programId}", url.PathEscape(programID), 1)
}

func adminPath(programID string) string {
	return strings.Replace(api.AdminPath, "{programId}", url.PathEscape(programID), 1)
}

// Enter takes a place in programID's queue; created is true for a new
// place (201), false for a token answered again (200).
func (c *Client) Enter(ctx context.Context, programID string, e Entry) (t api.Token, created bool, err error) {
	h := http.Header{}
	if e.Token != "" {
		h.Set(api.HeaderToken, e.Token)
	}
	if e.IdempotencyKey != "" {
		h.Set(api.HeaderIdempotencyKey, e.IdempotencyKey)
	}
	if e.Challenge != "" || e.Solution != "" {
		h.Set(api.HeaderChallenge, e.Challenge)
		h.Set(api.HeaderSolution, e.Solution)
	}
	status, _, err := c.do(ctx, request{OpEnter, http.MethodPost, queuePath(programID), h, nil, []int{http.StatusCreated, http.StatusOK}}, &t)
	return t, status == http.StatusCreated, err
}

// Poll reads the status of token in programID's queue.
func (c *Client) Poll(ctx context.Context, programID, token string) (api.Token, error) {
	var t api.Token
	_, _, err := c.do(ctx, request{OpPoll, http.MethodGet, queuePath(programID), http.Header{api.HeaderToken: {token}}, nil, []int{http.StatusOK}}, &t)
	return t, err
}

// Leave gives up token's place in programID's queue. An admitted token
// cannot leave: that is an *Error with Status 409.
func (c *Client) Leave(ctx context.Context, programID, token string) error {
	_, _, err := c.do(ctx, request{OpLeave, http.MethodDelete, queuePath(programID), http.Header{api.HeaderToken: {token}}, nil, []int{http.StatusNoContent}}, nil)
	return err
}

// EndSession tells the waiting room that the protected site is done with
// the person whose admission pass is pass, as passverify.EndSession does;
// under a cap their slot frees when their window ends. Ending it again is
// no error.
func (c *Client) EndSession(ctx context.Context, programID, pass string) error {
	path := strings.Replace(api.SessionPath, "{programId}", url.PathEscape(programID), 1)
	_, _, err := c.do(ctx, request{OpEndSession, http.MethodDelete, path, http.Header{api.HeaderAdmissionPass: {pass}}, nil, []int{http.StatusNoContent}}, nil)
	return err
}

// ReleaseSession is EndSession with the client's admin credentials: under
// a cap the slot also frees at once.
func (c *Client) ReleaseSession(ctx context.Context, programID, pass string) error {
	path := strings.Replace(api.AdminSessionPath, "{programId}", url.PathEscape(programID), 1)
	_, _, err := c.do(ctx, request{OpReleaseSession, http.MethodDelete, path, http.Header{api.HeaderAdmissionPass: {pass}}, nil, []int{http.StatusNoContent}}, nil)
	return err
}

// GetProgram reads programID's counters and settings.
func (c *Client) GetProgram(ctx context.Context, programID string) (ProgramAnswer, error) {
	p, _, err := c.program(ctx, request{OpGetProgram, http.MethodGet, adminPath(programID), nil, nil, []int{http.StatusOK}})
	return p, err
}

// PutProgram creates programID with s, or changes the settings s holds;
// created tells which.
func (c *Client) PutProgram(ctx context.Context, programID string, s api.ProgramSettings) (p ProgramAnswer, created bool, err error) {
	p, status, err := c.program(ctx, request{OpPutProgram, http.MethodPut, adminPath(programID), nil, s, []int{http.StatusCreated, http.StatusOK}})
	return p, status == http.StatusCreated, err
}

// Admit admits the next n people of programID's queue now, on top of the
// automatic admission.
func (c *Client) Admit(ctx context.Context, programID string, n int64) (ProgramAnswer, error) {
	path := strings.Replace(api.AdmissionPath, "{programId}", url.PathEscape(programID), 1)
	p, _, err := c.program(ctx, request{OpAdmit, http.MethodPost, path, nil, api.Admission{Count: &n}, []int{http.StatusOK}})
	return p, err
}

// ListPrograms reads a page of up to limit programs (0: the server's
// default) from cursor ("" for the first).
func (c *Client) ListPrograms(ctx context.Context, cursor string, limit int) (api.ProgramList, error) {
	var l api.ProgramList
	_, _, err := c.do(ctx, request{OpListPrograms, http.MethodGet, api.ProgramsPath + pageQuery(cursor, limit), nil, nil, []int{http.StatusOK}}, &l)
	return l, err
}

// DeleteProgram deletes programID, which must be closed.
func (c *Client) DeleteProgram(ctx context.Context, programID string) error {
	_, _, err := c.do(ctx, request{OpDeleteProgram, http.MethodDelete, adminPath(programID), nil, nil, []int{http.StatusNoContent}}, nil)
	return err
}

// History reads a page of up to limit of programID's changes (0: the
// server's default), newest first, from cursor ("" for the newest).
func (c *Client) History(ctx context.Context, programID, cursor string, limit int) (api.ChangeList, error) {
	path := strings.Replace(api.ChangesPath, "{programId}", url.PathEscape(programID), 1)
	var l api.ChangeList
	_, _, err := c.do(ctx, request{OpHistory, http.MethodGet, path + pageQuery(cursor, limit), nil, nil, []int{http.StatusOK}}, &l)
	return l, err
}

// pageQuery is the query string of a page: cursor and limit when set.
func pageQuery(cursor string, limit int) string {
	q := url.Values{}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	if len(q) == 0 {
		return ""
	}
	return "?" + q.Encode()
}

// IssueBypass asks for n bypass passes to programID, each valid for
// validity (whole seconds) from when the server signs it.
func (c *Client) IssueBypass(ctx context.Context, programID string, n int64, validity time.Duration) ([]string, error) {
	path := strings.Replace(api.PassesPath, "{programId}", url.PathEscape(programID), 1)
	seconds := int64(validity / time.Second)
	var out api.BypassPasses
	_, _, err := c.do(ctx, request{OpBypass, http.MethodPost, path, nil, api.BypassRequest{Count: &n, ValidSeconds: &seconds}, []int{http.StatusOK}}, &out)
	return out.Passes, err
}

// program sends an admin request and reads the program it answers.
func (c *Client) program(ctx context.Context, r request) (ProgramAnswer, int, error) {
	var p ProgramAnswer
	status, raw, err := c.do(ctx, r, &p.Program)
	if err == nil {
		p.Raw = raw
	}
	return p, status, err
}

// do sends r, repeating it as c.retry says, and decodes a wanted answer
// into out (unless nil); it returns the answer's status and body.
func (c *Client) do(ctx context.Context, r request, out any) (int, []byte, error) {
	var payload []byte
	if r.body != nil {
		b, err := json.Marshal(r.body)
		if err != nil {
			return 0, nil, fmt.Errorf("%s: encode the request: %w", r.op, err)
		}
		payload = b
	}
	for attempt := 1; ; attempt++ {
		status, raw, err := c.observed(ctx, r, payload, out)
		wait, again := c.retry.after(r.method, err, attempt)
		if !again {
			return status, raw, err
		}
		if c.retry.sleep(ctx, wait) != nil {
			return status, raw, err // the caller's context ended the wait
		}
	}
}

// observed sends r once and tells the observer.
func (c *Client) observed(ctx context.Context, r request, payload []byte, out any) (int, []byte, error) {
	ex := Exchange{Op: r.op, Sent: time.Now()}
	status, raw, err := c.once(ctx, r, payload, out)
	ex.Latency, ex.Status, ex.Err = time.Since(ex.Sent), status, err
	ex.Canceled = err != nil && ctx.Err() != nil
	if c.observe != nil {
		c.observe(ex)
	}
	return status, raw, err
}

// maxAnswerBytes bounds what the client reads of an answer: the API's are
// under a kilobyte.
const maxAnswerBytes = 1 << 20

// once sends r with payload as its body and reads the answer: a wanted
// status, its body decoded into out (unless nil), or else an *Error.
func (c *Client) once(ctx context.Context, r request, payload []byte, out any) (int, []byte, error) {
	u := c.base.String() + r.path
	req, err := http.NewRequestWithContext(ctx, r.method, u, bytes.NewReader(payload))
	if err != nil {
		return 0, nil, fmt.Errorf("%s: %w", r.op, err)
	}
	for k, v := range r.header {
		req.Header[k] = v
	}
	if payload == nil {
		req.Body, req.GetBody, req.ContentLength = http.NoBody, nil, 0
	} else {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	if r.op.authorized() && c.auth != nil {
		if err := c.auth.Authorize(ctx, req, payload); err != nil {
			return 0, nil, err
		}
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("%s %s: %w", r.method, req.URL.Redacted(), err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes))
	if err != nil {
		return resp.StatusCode, nil, fmt.Errorf("%s %s: read the answer: %w", r.method, req.URL.Redacted(), err)
	}
	if !slices.Contains(r.want, resp.StatusCode) {
		return resp.StatusCode, nil, answerError(resp, raw, c.now())
	}
	if out != nil {
		if err := decodeAnswer(raw, out); err != nil {
			return resp.StatusCode, nil, fmt.Errorf("%s %s: decode the answer: %w", r.method, req.URL.Redacted(), err)
		}
	}
	return resp.StatusCode, raw, nil
}

// decodeAnswer decodes raw into out; an error names the member that did
// not decode.
func decodeAnswer(raw []byte, out any) error {
	err := json.Unmarshal(raw, out)
	if err == nil {
		return nil
	}
	var members map[string]json.RawMessage
	if json.Unmarshal(raw, &members) == nil {
		for name, v := range members {
			one, _ := json.Marshal(map[string]json.RawMessage{name: v})
			if e := json.Unmarshal(one, out); e != nil {
				err = fmt.Errorf("%s: %w", name, e)
				break
			}
		}
	}
	return err
}
