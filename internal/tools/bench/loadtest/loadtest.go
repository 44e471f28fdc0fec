// Package loadtest runs the bench scenario against a waiting-room server
// over real HTTP, one goroutine per virtual user, and applies the rate
// schedule through the admin API (docs/benchmarks.md).
package loadtest

import (
	"cmp"
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
	Fixed       time.Duration // the interval of a client ignoring the server's advice; 0 honours retryAfterMs
	Policy      string        // in server mode, the program's pollingPolicy (e.g. "eta"); "" keeps the default
	AtAdmission bool          // first poll DueMargin after the ticket's predicted admission, then as answered
}

// DueMargin is how long after its predicted admission a user polls in the admission mode.
const DueMargin = 100 * time.Millisecond

// ParsePoll reads "server", "server:POLICY" (server:eta), "fixed:DUR" (fixed:3s) or "admission".
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
		if d, err := time.ParseDuration(rest); err == nil && d >= time.Millisecond {
			return Poll{Fixed: d}, nil
		}
	}
	return Poll{}, fmt.Errorf("poll %q: want server, server:POLICY (server:tiers, server:eta), fixed:DURATION (fixed:3s) or admission", s)
}

// policyName matches a lower-case word; the server validates the name.
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
	BaseURL     string // the server's root, e.g. http://127.0.0.1:3000
	AdminToken  string // the bearer secret of its admin API
	ProgramID   string // the program the run creates; it should be fresh
	Existing    bool   // fill ProgramID, which must exist, leaving settings and admission to the operator
	Scenario    bench.Scenario
	Poll        Poll
	SampleEvery time.Duration // the period of the counter sampling that times admissions (default 100ms)
	Seed        uint64        // draws the abandoning users and the crowd, as in the simulator
	CacheTTL    time.Duration // the server's delay in applying an admin change, to predict admissions
	// Crowd, when not nil, creates the program with its cap and plays its
	// no-shows and sessions (ended at once without a Session).
	Crowd  *bench.Crowd
	OnPass func(pass string) // when not nil, receives each user's first admission pass, concurrently
	// Clock, when not nil, is the run's time, Scenario.Timeout's included (ctx bounds the real time).
	Clock clock.Clock

	// Track, when not nil, is told of each user's start (+1, before it
	// starts) and end (-1): a discrete-event clock counts the users it waits
	// for with it (see UserOf).
	Track func(delta int)
}

// CheckLoopback returns an error unless rawURL is http(s) on a loopback address.
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

// conns bounds the connections all users share: one each would storm the loopback listener.
const conns = 256

// Run plays cfg until every user has seen ADMITTED (or given up) or its timeout passes; ctx cancels it.
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
	hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxConnsPerHost:     conns,
		MaxIdleConnsPerHost: conns,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}}
	defer hc.CloseIdleConnections()
	r := &runner{cfg: cfg, clock: cmp.Or[clock.Clock](cfg.Clock, clock.Real{}), hc: hc}
	r.started, r.markStarted = context.WithCancel(context.Background())
	defer r.markStarted()
	var err error
	r.client, err = client.New(cfg.BaseURL, client.WithHTTPClient(hc), client.WithAuth(client.BearerToken(cfg.AdminToken)), client.WithObserver(r.observe))
	if err != nil {
		return bench.Result{}, err
	}
	return r.run(ctx)
}
