// Package loadtest runs the bench scenario against a waiting-room server
// over real HTTP, through package client: it creates
// a fresh program, lets one goroutine per virtual user enter (with an
// Idempotency-Key) and poll until ADMITTED or the run's deadline, applies
// the rate schedule through the admin API, and retries failed requests as
// their Retry-After says. docs/benchmarks.md describes what it measures.
package loadtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/example/waitingroom/internal/clock"
	"github.com/example/waitingroom/internal/tools/bench"
	"github.com/example/waitingroom/internal/tools/client"
)

// Poll is how a virtual user waits before its next poll.
type Poll struct {
	// Fixed is the interval of a client that ignores the server's advice;
	// 0 means honour retryAfterMs (the "server" mode).
	Fixed time.Duration
	// Policy, in server mode, is the polling policy the run's program is
	// created with (its admin "pollingPolicy", e.g. "tiers" or "eta"); ""
	// leaves the server's default (POLL_POLICY).
	Policy string
	// AtAdmission ("admission") makes each user first poll when its
	// ticket's admission is due, as the scenario's rates predict it
	// (simulate.AdmissionTimes) plus DueMargin, then as its answers say: an
	// ideal client, whose every timely poll is a first sighting and signs
	// a pass, to measure what admissions cost the server.
	AtAdmission bool
}

// DueMargin is how long after its predicted admission a user polls in
// the admission mode: the prediction is to the millisecond, the server's
// clock and the bench's are one, and a poll that comes early is answered
// WAITING and polls again.
const DueMargin = 100 * time.Millisecond

// ParsePoll reads "server", "server:POLICY" (e.g. server:eta),
// "fixed:DUR" (e.g. fixed:3s) or "admission".
func ParsePoll(s string) (Poll, error) {
	s = strings.TrimSpace(s)
	switch s {
	case "server":
		return Poll{}, nil
	case "admission":
		return Poll{AtAdmission: true}, nil
	}
	if name, ok := strings.CutPrefix(s, "server:"); ok && validPolicyName(name) {
		return Poll{Policy: name}, nil
	}
	if rest, ok := strings.CutPrefix(s, "fixed:"); ok {
		d, err := time.ParseDuration(rest)
		if err == nil && d >= time.Millisecond {
			return Poll{Fixed: d}, nil
		}
	}
	return Poll{}, fmt.Errorf("poll %q: want server, server:POLICY (server:tiers, server:eta), fixed:DURATION (fixed:3s) or admission", s)
}

// validPolicyName accepts a lower-case word: the server validates the name
// itself when the program is created.
func validPolicyName(s string) bool {
	if s == "" || len(s) > 32 {
		return false
	}
	for _, c := range s {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' && c != '_' {
			return false
		}
	}
	return true
}

// String returns the mode as ParsePoll reads it.
func (p Poll) String() string {
	switch {
	case p.Fixed > 0:
		return "fixed:" + p.Fixed.String()
	case p.Policy != "":
		return "server:" + p.Policy
	case p.AtAdmission:
		return "admission"
	}
	return "server"
}

// Config is one load-test run.
type Config struct {
	// BaseURL is the server's root, e.g. http://127.0.0.1:3000.
	BaseURL string
	// AdminToken is the bearer secret of the admin API.
	AdminToken string
	// ProgramID names the program the run creates; it should be fresh.
	ProgramID string
	// Existing makes the run fill ProgramID, which must exist, as it is:
	// its settings and its admission are the operator's, so the run sets
	// neither (Scenario.Rates and Abandon do not apply, nor Poll.Policy).
	Existing bool
	Scenario bench.Scenario
	Poll     Poll
	// SampleEvery is the period of the admin-counter sampling that times
	// admissions (default 100ms). The notification delay is exact to about
	// one admission interval (1/rate) plus the loopback round trip.
	SampleEvery time.Duration
	// Seed draws the abandoning users and their instants
	// (bench.Scenario.Leaving), as in the simulator.
	Seed uint64
	// CacheTTL is how long after an admin change the server applies it. It
	// only serves to predict when each ticket is admitted
	// (simulate.AdmissionTimes), so that an abandoning user leaves at its
	// fraction of that wait.
	CacheTTL time.Duration
	// Crowd, when not nil, creates the program with its active-user cap
	// and plays it: no-shows, and sessions the site ends (at once, without
	// a Session).
	Crowd *bench.Crowd
	// OnPass, when not nil, receives the admission pass of each user's
	// first ADMITTED answer (one pass a user; none when the answer carries
	// none), from that user's goroutine, so concurrently.
	OnPass func(pass string)
	// Clock, when not nil, is the run's time: its start, every instant it
	// records, and every wait of the users and the runner (arrival
	// offsets, poll intervals, Retry-After, rate changes, sessions, leave
	// instants) are on it, and Scenario.Timeout is enforced on it alone
	// (ctx bounds the real time). nil means the real clock and a real
	// timeout.
	Clock clock.Clock

	// trackUser, when not nil, is told of each virtual user's start (+1,
	// before it starts) and end (-1): tests drive a clock by it.
	trackUser func(delta int)
}

// CheckLoopback returns an error unless rawURL is http(s) on a loopback
// address (127.0.0.0/8, ::1 or "localhost").
func CheckLoopback(rawURL string) error {
	u, err := url.Parse(rawURL)
	if err != nil {
		return fmt.Errorf("url %q: %w", rawURL, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("url %q: want http:// or https://", rawURL)
	}
	h := u.Hostname()
	if h == "localhost" {
		return nil
	}
	if ip := net.ParseIP(h); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("url %q is not a loopback address: refusing to send load there (see -allow-remote)", rawURL)
}

// conns is the size of the connection pool.
const conns = 256

// newClient returns an HTTP client with a pool of at most conns kept-alive
// connections shared by all virtual users. A connection per user would
// storm the loopback listener (a burst of thousands of connects overflows
// its backlog and stalls on SYN retransmits) and leave thousands of
// sockets in TIME_WAIT after each run; a request waiting for a free
// connection counts that wait in its latency, as a browser's would.
func newClient() *http.Client {
	tr := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxConnsPerHost:     conns,
		MaxIdleConnsPerHost: conns,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}
}

// Run executes cfg and returns its result. The run stops by itself when
// every user has seen ADMITTED (or given up on an error) or when
// cfg.Scenario.Timeout has passed since the start; ctx cancels it early.
func Run(ctx context.Context, cfg Config) (bench.Result, error) {
	sc := cfg.Scenario
	if err := sc.Validate(); err != nil {
		return bench.Result{}, err
	}
	if sc.Timeout <= 0 {
		return bench.Result{}, errors.New("loadtest: a timeout is required")
	}
	if cfg.Existing && (sc.Abandon > 0 || cfg.Poll.Policy != "" || cfg.Poll.AtAdmission) {
		return bench.Result{}, errors.New("loadtest: a run on an existing program has no abandonment, no polling policy and no admission schedule of its own")
	}
	if c := cfg.Crowd; c != nil {
		if err := c.Validate(); err != nil || c.MaxActive < 1 {
			return bench.Result{}, fmt.Errorf("loadtest: a crowd needs a cap (-max-active) and valid settings: %v", err)
		}
		if cfg.Existing {
			return bench.Result{}, errors.New("loadtest: a run on an existing program has no capacity settings of its own")
		}
	}
	if cfg.SampleEvery <= 0 {
		cfg.SampleEvery = 100 * time.Millisecond
	}
	hc := newClient()
	defer hc.CloseIdleConnections()
	r := &runner{cfg: cfg, clock: cfg.Clock, started: make(chan struct{}), hc: hc}
	if r.clock == nil {
		r.clock = clock.Real{}
	}
	c, err := client.New(cfg.BaseURL, client.WithHTTPClient(hc), client.WithAuth(client.BearerToken(cfg.AdminToken)), client.WithObserver(r.observe))
	if err != nil {
		return bench.Result{}, err
	}
	r.client = c
	return r.run(ctx)
}
