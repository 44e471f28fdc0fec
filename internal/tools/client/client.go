// Package client calls the waiting room's HTTP API: the queue calls of the
// people who wait and the admin calls of the operator. Admin calls are
// authorized with a bearer token or a SigV4 signature; every answer other
// than the one expected is an *Error.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/example/waitingroom/internal/clock"
)

// Exchange is one request as sent and answered, for an observer; Canceled
// reports that the caller's context ended the request.
type Exchange struct {
	Op       Op
	Sent     time.Time
	Latency  time.Duration // from sending to the whole answer read
	Status   int           // 0 when no answer came
	Err      error
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

// WithAuth authorizes the admin calls with auth.
func WithAuth(auth Authorizer) Option {
	return func(c *Client) { c.auth, c.authSet = auth, true }
}

// WithHTTPClient sends the requests with hc (default: a 30 s timeout).
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.http = hc } }

// WithRetry repeats the requests the server could not serve now as r says.
func WithRetry(r Retry) Option { return func(c *Client) { c.retry = r } }

// WithObserver calls f after every request sent, retries included, from the calling goroutine.
func WithObserver(f func(Exchange)) Option { return func(c *Client) { c.observe = f } }

// New returns a Client of the API at baseURL (http or https); a bearer
// token is refused unless the URL is https or loopback (BearerSafe).
func New(baseURL string, opts ...Option) (*Client, error) {
	u, err := url.Parse(strings.TrimRight(baseURL, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("API URL %q: want http(s)://host[:port][/path]", baseURL)
	}
	c := &Client{base: u, now: time.Now, http: &http.Client{Timeout: 30 * time.Second}}
	for _, o := range opts {
		o(c)
	}
	if c.retry.Sleep == nil {
		c.retry.Sleep = clock.Real{}.Sleep
	}
	if c.authSet && c.auth == nil {
		return nil, errors.New("client: WithAuth(nil)")
	}
	if _, ok := c.auth.(BearerToken); ok {
		if err := BearerSafe(u); err != nil {
			return nil, err
		}
	}
	return c, nil
}

type request struct {
	op     Op
	path   string // under the base URL, escaped
	header http.Header
	body   any   // JSON; nil for none
	want   []int // the statuses of a success (nil: 200)
}

// do sends r, repeating it as c.retry says, decodes a wanted answer into
// out (unless nil) and returns the answer's status and body.
func (c *Client) do(ctx context.Context, r request, out any) (int, []byte, error) {
	var payload []byte
	if r.body != nil {
		var err error
		if payload, err = json.Marshal(r.body); err != nil {
			return 0, nil, fmt.Errorf("%s: encode the request: %w", r.op, err)
		}
	}
	for attempt := 1; ; attempt++ {
		sent := time.Now()
		status, raw, err := c.once(ctx, r, payload, out)
		if c.observe != nil {
			c.observe(Exchange{Op: r.op, Sent: sent, Latency: time.Since(sent), Status: status, Err: err, Canceled: err != nil && ctx.Err() != nil})
		}
		wait, again := c.retry.after(r.op.method(), err, attempt)
		if !again || c.retry.Sleep(ctx, wait) != nil {
			return status, raw, err
		}
	}
}

const maxAnswerBytes = 1 << 20

// once sends r with payload once and reads the answer, as do does.
func (c *Client) once(ctx context.Context, r request, payload []byte, out any) (int, []byte, error) {
	method := r.op.method()
	req, err := http.NewRequestWithContext(ctx, method, c.base.String()+r.path, bytes.NewReader(payload))
	if err != nil {
		return 0, nil, fmt.Errorf("%s: %w", r.op, err)
	}
	maps.Copy(req.Header, r.header)
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
	where := method + " " + req.URL.Redacted()
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("%s: %w", where, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes))
	if err != nil {
		return resp.StatusCode, nil, fmt.Errorf("%s: read the answer: %w", where, err)
	}
	want := r.want
	if want == nil {
		want = []int{http.StatusOK}
	}
	if !slices.Contains(want, resp.StatusCode) {
		return resp.StatusCode, nil, answerError(resp, raw, c.now())
	}
	if out != nil {
		if err := decodeAnswer(raw, out); err != nil {
			return resp.StatusCode, nil, fmt.Errorf("%s: decode the answer: %w", where, err)
		}
	}
	return resp.StatusCode, raw, nil
}

// decodeAnswer decodes raw into out; an error names the member that did not decode.
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
