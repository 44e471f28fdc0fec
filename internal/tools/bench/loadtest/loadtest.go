// Package loadtest runs the bench scenario against a waiting-room server
// over real HTTP: it creates a fresh program, lets one goroutine per
// virtual user enter and poll until ADMITTED or the run's deadline, and
// applies the rate schedule through the admin API. docs/benchmarks.md
// describes what it measures.
package loadtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"regexp"
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
	// Policy, in server mode, is the program's "pollingPolicy" (e.g. "eta");
	// "" leaves the server's default.
	Policy string
	// AtAdmission ("admission") makes each user first poll DueMargin after
	// its ticket's predicted admission (simulate.AdmissionTimes), then as
	// its answers say: every timely poll is a first sighting.
	AtAdmission bool
}

// DueMargin is how long after its predicted admission a user polls in the
// admission mode.
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
	if name, ok := strings.CutPrefix(s, "server:"); ok && policyName.MatchString(name) {
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

// policyName matches a lower-case word: the server validates the name
// itself when the program is created.
var policyName = regexp.MustCompile(`^[a-z0-9_-]{1,32}$`)

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
	// BaseURL is the server's root, e.g. http://127.0.0.1:3000, and
	// AdminToken the bearer secret of its admin API.
	BaseURL, AdminToken string
	// ProgramID names the program the run creates; it should be fresh.
	ProgramID string
	// Existing makes the run fill ProgramID, which must exist, leaving its
	// settings and admission to the operator.
	Existing bool
	Scenario bench.Scenario
	Poll     Poll
	// SampleEvery is the period of the admin-counter sampling that times
	// admissions (default 100ms).
	SampleEvery time.Duration
	// Seed draws the abandoning users and the crowd, as in the simulator.
	Seed uint64
	// CacheTTL is how long after an admin change the server applies it,
	// to predict when each ticket is admitted (simulate.AdmissionTimes).
	CacheTTL time.Duration
	// Crowd, when not nil, creates the program with its cap and plays its
	// no-shows and sessions (ended at once without a Session).
	Crowd *bench.Crowd
	// OnPass, when not nil, receives the pass of each user's first
	// ADMITTED answer that carries one, concurrently.
	OnPass func(pass string)
	// Clock, when not nil, is the run's time: every instant and wait of the
	// run, and Scenario.Timeout, are on it (ctx bounds the real time). nil
	// means the real clock.
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
	if client.Loopback(u.Host) {
		return nil
	}
	return fmt.Errorf("url %q is not a loopback address: refusing to send load there (see -allow-remote)", rawURL)
}

// conns is the size of the connection pool.
const conns = 256

// newClient returns an HTTP client with a pool of at most conns kept-alive
// connections shared by all virtual users: a connection each would storm
// the loopback listener. A request's wait for a connection counts in its
// latency.
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

// Run executes cfg and returns its result. The run stops when every user
// has seen ADMITTED (or given up) or cfg.Scenario.Timeout has passed; ctx
// cancels it early.
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
	r := &runner{cfg: cfg, clock: cfg.Clock, hc: hc}
	r.started, r.markStarted = context.WithCancel(context.Background())
	defer r.markStarted()
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
