// Package loadtest runs the bench scenario against a waiting-room server
// over real HTTP: one goroutine per virtual user enters the queue, then
// polls until it sees ADMITTED or the run's deadline passes, sleeping
// either a fixed interval or exactly the retryAfterMs of each answer.
//
// The bench creates a fresh program through the admin API (with the
// polling policy the mode names, if any), keeps it paused while a burst of
// users enters, then applies the scenario's rate schedule through the admin
// API. Abandoning users (Scenario.Abandon) send DELETE at their instant
// and stop. To measure
// the notification delay (from the instant a ticket is admitted to the
// instant its holder sees ADMITTED) it samples the program's admitted
// counter through the admin API and interpolates when it passed each
// ticket; see Config.SampleEvery.
package loadtest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/example/waitingroom/internal/bench"
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
}

// ParsePoll reads "server", "server:POLICY" (e.g. server:eta) or
// "fixed:DUR" (e.g. fixed:3s).
func ParsePoll(s string) (Poll, error) {
	s = strings.TrimSpace(s)
	if s == "server" {
		return Poll{}, nil
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
	return Poll{}, fmt.Errorf("poll %q: want server, server:POLICY (server:tiers, server:eta) or fixed:DURATION (fixed:3s)", s)
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
	Scenario  bench.Scenario
	Poll      Poll
	// SampleEvery is the period of the admin-counter sampling that times
	// admissions (default 100ms). The notification delay is exact to about
	// one admission interval (1/rate) plus the loopback round trip.
	SampleEvery time.Duration
	// Client sends the requests; nil means NewClient(Conns).
	Client *http.Client
	// Conns bounds the connections of the default client (DefaultConns
	// when 0).
	Conns int
	// Progress, when not nil, receives a live progress line.
	Progress io.Writer
	// Seed draws the abandoning users and their instants
	// (bench.Scenario.Leaving), as in the simulator.
	Seed uint64
	// CacheTTL is the server's PROGRAM_CACHE_TTL. It only serves to
	// predict when each ticket is admitted (bench.AdmissionTimes), so that
	// an abandoning user leaves at its fraction of that wait.
	CacheTTL time.Duration
}

// Route keys of bench.Result.ByRoute are "METHOD route status", route being
// enter, poll, admin or admissions and status a number or "error".
const (
	routeEnter = "POST enter"
	routePoll  = "GET poll"
	routeLeave = "DELETE leave"
)

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

// DefaultConns is the default size of the connection pool.
const DefaultConns = 256

// NewClient returns an HTTP client with a pool of at most conns kept-alive
// connections shared by all virtual users. A connection per user would
// storm the loopback listener (a burst of thousands of connects overflows
// its backlog and stalls on SYN retransmits) and leave thousands of
// sockets in TIME_WAIT after each run; a request waiting for a free
// connection counts that wait in its latency, as a browser's would.
func NewClient(conns int) *http.Client {
	if conns <= 0 {
		conns = DefaultConns
	}
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
	if cfg.SampleEvery <= 0 {
		cfg.SampleEvery = 100 * time.Millisecond
	}
	r := &runner{cfg: cfg, base: strings.TrimRight(cfg.BaseURL, "/"), client: cfg.Client, started: make(chan struct{})}
	if r.client == nil {
		r.client = NewClient(min(cfg.Conns, sc.Users+1))
		defer r.client.CloseIdleConnections()
	}
	r.queueURL = r.base + "/api/v1/queues/programs/" + url.PathEscape(cfg.ProgramID)
	r.adminURL = r.base + "/api/v1/admin/programs/" + url.PathEscape(cfg.ProgramID)
	return r.run(ctx)
}

type runner struct {
	cfg                Config
	base               string
	queueURL, adminURL string
	client             *http.Client
	start              time.Time

	mu      sync.Mutex
	records []record
	samples []sample // admin counter over time, in time order

	// leaving is, per user, the fraction of its wait after which it leaves
	// (negative: it stays); plan is the predicted admission offset of each
	// ticket from the start of admission (bench.AdmissionTimes).
	leaving []float64
	plan    []time.Duration
	// admitStart is the start of admission, from the run's start, plus 1
	// ns; 0 until known (a burst starts admission once everyone is in),
	// when started is closed.
	admitStart atomic.Int64
	started    chan struct{}

	entered, admitted, left, requests, errs atomic.Int64
}

// record is one request as sent and answered.
type record struct {
	at      time.Duration // sent, from the start
	latency time.Duration
	route   string // "POST enter", …
	status  int    // 0: transport error
	failed  bool
}

// sample is the admin counter at an instant.
type sample struct {
	at       time.Duration
	admitted int64
}

// user is one virtual user's outcome.
type user struct {
	index       int
	entered     bool
	leaving     float64 // fraction of the wait after which it leaves; negative: never
	left        bool
	ticket      int64 // from the enter answer, or 0 to derive
	position    int64 // at enter
	enterAt     time.Duration
	lastWaiting time.Duration // send time of the last WAITING answer
	seenAt      time.Duration // receipt of ADMITTED
	admitted    bool
	polls       int
}

// tokenAnswer is the part of QueueTokenResponse the bench reads. Ticket is
// used when the server reports it.
type tokenAnswer struct {
	Status       string `json:"status"`
	TokenID      string `json:"tokenId"`
	Position     int64  `json:"position"`
	RetryAfterMs int64  `json:"retryAfterMs"`
	Ticket       int64  `json:"ticket"`
}

type counters struct {
	Issued   int64 `json:"issued"`
	Admitted int64 `json:"admitted"`
}

func (r *runner) since() time.Duration { return time.Since(r.start) }

func (r *runner) run(parent context.Context) (bench.Result, error) {
	sc := r.cfg.Scenario
	// Create the program paused: nobody is admitted before the scenario's
	// admission starts.
	var c counters
	create := map[string]any{"paused": true}
	if r.cfg.Poll.Policy != "" {
		create["pollingPolicy"] = r.cfg.Poll.Policy
	}
	if err := r.admin(parent, http.MethodPut, r.adminURL, create, "PUT admin", &c); err != nil {
		return bench.Result{}, fmt.Errorf("create program %s: %w", r.cfg.ProgramID, err)
	}
	baseServing := c.Admitted

	r.start = time.Now()
	ctx, cancel := context.WithTimeout(parent, sc.Timeout)
	defer cancel()

	admits := false
	for _, ch := range sc.Rates {
		admits = admits || ch.Rate > 0
	}
	var bg sync.WaitGroup
	bgCtx, stopBG := context.WithCancel(ctx)
	defer stopBG()
	if admits {
		bg.Go(func() { r.sample(bgCtx) })
	}
	var progress *bench.Progress
	if r.cfg.Progress != nil {
		progress = bench.NewProgress(r.cfg.Progress, r.cfg.Poll.String())
		bg.Go(func() { r.report(bgCtx, progress) })
	}

	// A burst enters a paused queue and admission starts once everyone is
	// in, as in the simulator; a ramp starts admission with the run.
	var enters sync.WaitGroup
	enters.Add(sc.Users)
	schedErr := make(chan error, 1)
	bg.Go(func() {
		if sc.Arrival.Over == 0 {
			enters.Wait()
		}
		schedErr <- r.schedule(bgCtx)
	})

	users := make([]user, sc.Users)
	r.leaving = sc.Leaving(r.cfg.Seed)
	if r.leaving != nil {
		r.plan = bench.AdmissionTimes(sc, r.cfg.CacheTTL, true)
	}
	var vus sync.WaitGroup
	for i := range users {
		users[i].index, users[i].leaving = i, -1
		if r.leaving != nil {
			users[i].leaving = r.leaving[i]
		}
		vus.Go(func() {
			if !Sleep(ctx, time.Until(r.start.Add(sc.Arrival.At(i, sc.Users)))) {
				enters.Done()
				return
			}
			r.user(ctx, &users[i], enters.Done)
		})
	}
	vus.Wait()
	end := r.since()
	stopBG()
	bg.Wait()
	if err := <-schedErr; err != nil && parent.Err() == nil {
		return bench.Result{}, err
	}
	if err := parent.Err(); err != nil {
		return bench.Result{}, err
	}
	if end > sc.Timeout {
		end = sc.Timeout
	}
	return r.result(users, baseServing, end), nil
}

// schedule applies the scenario's rate changes at their offsets (the first
// one now).
func (r *runner) schedule(ctx context.Context) error {
	from := r.since()
	r.admitStart.Store(int64(from) + 1)
	close(r.started)
	for i, ch := range r.cfg.Scenario.Rates {
		if i > 0 && !Sleep(ctx, time.Until(r.start.Add(from+ch.At))) {
			return nil
		}
		if i == 0 && ch.Rate == 0 {
			continue // created paused
		}
		body := map[string]any{"paused": ch.Rate == 0}
		if ch.Rate > 0 {
			body["admissionRatePerSecond"] = ch.Rate
		}
		if err := r.admin(ctx, http.MethodPut, r.adminURL, body, "PUT admin", nil); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("set admission rate %g: %w", ch.Rate, err)
		}
	}
	return nil
}

// sample reads the admitted counter every SampleEvery, timing each read
// at the middle of its round trip.
func (r *runner) sample(ctx context.Context) {
	t := time.NewTicker(r.cfg.SampleEvery)
	defer t.Stop()
	for {
		sent := r.since()
		var c counters
		if err := r.admin(ctx, http.MethodGet, r.adminURL, nil, "GET admin", &c); err == nil {
			at := sent + (r.since()-sent)/2
			r.mu.Lock()
			r.samples = append(r.samples, sample{at: at, admitted: c.Admitted})
			r.mu.Unlock()
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (r *runner) report(ctx context.Context, p *bench.Progress) {
	t := time.NewTicker(500 * time.Millisecond)
	defer t.Stop()
	defer p.Done()
	var lastReq int64
	lastAt := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			req := r.requests.Load()
			rps := float64(req-lastReq) / now.Sub(lastAt).Seconds()
			lastReq, lastAt = req, now
			p.Update("%s/%s  entered %d/%d  admitted %d  requests %d (%.0f/s)  errors %d",
				r.since().Truncate(time.Second), r.cfg.Scenario.Timeout, r.entered.Load(), r.cfg.Scenario.Users,
				r.admitted.Load(), req, rps, r.errs.Load())
		}
	}
}

// user plays one virtual user; entered is called once its enter is over,
// whatever the outcome.
func (r *runner) user(ctx context.Context, u *user, entered func()) {
	var once sync.Once
	defer once.Do(entered)
	var ans tokenAnswer
	var sent, recv time.Duration
	for {
		var st int
		var hdr http.Header
		var err error
		sent, recv, st, hdr, err = r.token(ctx, http.MethodPost, "", routeEnter, &ans)
		if err != nil && ctx.Err() != nil {
			return
		}
		if err == nil && (st == http.StatusCreated || st == http.StatusOK) {
			break
		}
		if !retryable(st, err) || !Sleep(ctx, retryAfter(hdr, time.Second)) {
			return
		}
	}
	u.entered, u.enterAt, u.ticket, u.position = true, recv, ans.Ticket, ans.Position
	r.entered.Add(1)
	once.Do(entered)
	token := ans.TokenID
	for {
		switch ans.Status {
		case "ADMITTED":
			u.admitted, u.seenAt = true, recv
			r.admitted.Add(1)
			return
		case "WAITING":
			u.lastWaiting = sent
		default: // EXPIRED or LEFT: the bench never lets either happen
			r.errs.Add(1)
			return
		}
		wait := r.cfg.Poll.Fixed
		if wait == 0 {
			wait = time.Duration(ans.RetryAfterMs) * time.Millisecond
			if wait <= 0 {
				wait = time.Second
			}
		}
		if done := r.wait(ctx, u, token, wait); done {
			return
		}
		for {
			var st int
			var hdr http.Header
			var err error
			sent, recv, st, hdr, err = r.token(ctx, http.MethodGet, token, routePoll, &ans)
			if err != nil && ctx.Err() != nil {
				return
			}
			u.polls++
			if err == nil && st == http.StatusOK {
				break
			}
			if !retryable(st, err) || !Sleep(ctx, retryAfter(hdr, time.Second)) {
				return
			}
		}
	}
}

// wait sleeps d before u's next poll, unless u is an abandoning user whose
// leave instant comes first: then it leaves. It reports whether u is done
// (it left, or the run ended). An abandoner in a burst enters before the
// start of admission is known, so it also wakes up at that start to place
// its leave.
func (r *runner) wait(ctx context.Context, u *user, token string, d time.Duration) (done bool) {
	until := r.since() + d
	for {
		if at, ok := r.leaveAt(u); ok && at < until {
			if !Sleep(ctx, at-r.since()) {
				return true
			}
			// A 409 (admitted first) leaves u waiting: it polls at once and
			// hears it.
			return r.leave(ctx, u, token)
		}
		if u.leaving < 0 || r.admitStart.Load() != 0 {
			return !Sleep(ctx, until-r.since())
		}
		t := time.NewTimer(until - r.since())
		select {
		case <-ctx.Done():
			t.Stop()
			return true
		case <-r.started:
			t.Stop()
		case <-t.C:
			return false
		}
	}
}

// leaveAt is when u, an abandoning user, leaves: its fraction of the wait
// from its enter to its ticket's predicted admission (or to the timeout).
// ok is false for a user who stays, or while the start of admission is
// not known yet.
func (r *runner) leaveAt(u *user) (time.Duration, bool) {
	start := r.admitStart.Load()
	if u.leaving < 0 || start == 0 {
		return 0, false
	}
	// A burst enters a paused queue: its position is its rank in the
	// run's tickets. A ramp's tickets follow the arrival order.
	k := int64(u.index + 1)
	if r.cfg.Scenario.Arrival.Over == 0 && u.position > 0 {
		k = u.position
	}
	end := r.cfg.Scenario.Timeout
	if k >= 1 && k < int64(len(r.plan)) && r.plan[k] >= 0 {
		end = time.Duration(start-1) + r.plan[k]
	}
	if end <= u.enterAt {
		return 0, false
	}
	return u.enterAt + time.Duration(u.leaving*float64(end-u.enterAt)), true
}

// leave sends u's DELETE until it is answered; it reports whether u is
// done (it left, or the run ended). A 409 means u was admitted first: it
// stays, and polls again.
func (r *runner) leave(ctx context.Context, u *user, token string) bool {
	u.leaving = -1
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodDelete, r.queueURL, nil)
		if err != nil {
			return true
		}
		req.Header.Set("X-Queue-Token", token)
		_, _, st, hdr, _, err := r.do(req, routeLeave, true)
		switch {
		case err != nil && ctx.Err() != nil:
			return true
		case err == nil && st == http.StatusNoContent:
			u.left = true
			r.left.Add(1)
			return true
		case err == nil && st == http.StatusConflict:
			return false
		case !retryable(st, err) || !Sleep(ctx, retryAfter(hdr, time.Second)):
			return true
		}
	}
}

// retryable reports whether a failed request is worth sending again: a
// transport error, 429 or 5xx. Other 4xx mean the bench is wrong.
func retryable(status int, err error) bool {
	return err != nil || status == http.StatusTooManyRequests || status >= 500
}

// token sends a queue request and decodes its answer into ans.
func (r *runner) token(ctx context.Context, method, token, route string, ans *tokenAnswer) (sent, recv time.Duration, status int, hdr http.Header, err error) {
	req, err := http.NewRequestWithContext(ctx, method, r.queueURL, nil)
	if err != nil {
		return 0, 0, 0, nil, err
	}
	if token != "" {
		req.Header.Set("X-Queue-Token", token)
	}
	sent, recv, status, hdr, body, err := r.do(req, route, true)
	if err == nil && status < 300 {
		*ans = tokenAnswer{}
		if jerr := json.Unmarshal(body, ans); jerr != nil {
			err = fmt.Errorf("%s: decode answer: %w", route, jerr)
		}
	}
	return sent, recv, status, hdr, err
}

// admin sends an admin request; out, when not nil, receives the JSON answer.
func (r *runner) admin(ctx context.Context, method, u string, body any, route string, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+r.cfg.AdminToken)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	_, _, status, _, b, err := r.do(req, route, false)
	switch {
	case err != nil:
		return err
	case status >= 300:
		return fmt.Errorf("%s %s: %d %s", method, u, status, bytes.TrimSpace(b))
	case out != nil:
		return json.Unmarshal(b, out)
	}
	return nil
}

// do sends req and records it (unless the run's context ended it).
func (r *runner) do(req *http.Request, route string, queue bool) (sent, recv time.Duration, status int, hdr http.Header, body []byte, err error) {
	sent = r.since()
	resp, err := r.client.Do(req)
	if err == nil {
		body, err = io.ReadAll(resp.Body)
		resp.Body.Close()
		status, hdr = resp.StatusCode, resp.Header
	}
	recv = r.since()
	if err != nil && req.Context().Err() != nil {
		return sent, recv, status, hdr, body, err // the run ended, not the server
	}
	// A DELETE answered 409 (admitted before it left) is the service
	// working as documented, not a failure.
	failed := err != nil || status >= 400 && !(route == routeLeave && status == http.StatusConflict)
	rec := record{at: sent, latency: recv - sent, route: route, status: status, failed: failed}
	r.mu.Lock()
	r.records = append(r.records, rec)
	r.mu.Unlock()
	if queue {
		r.requests.Add(1)
	}
	if failed {
		r.errs.Add(1)
	}
	return sent, recv, status, hdr, body, err
}

// retryAfter reads a Retry-After header in seconds, or returns def.
func retryAfter(h http.Header, def time.Duration) time.Duration {
	if h != nil {
		if s, err := strconv.Atoi(h.Get("Retry-After")); err == nil && s > 0 {
			return time.Duration(s) * time.Second
		}
	}
	return def
}

// Sleep waits d or until ctx ends; it reports whether d elapsed.
func Sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

func (r *runner) result(users []user, baseServing int64, end time.Duration) bench.Result {
	sc := r.cfg.Scenario
	res := bench.Result{
		Policy:    r.cfg.Poll.String(),
		Mode:      "run",
		ProgramID: r.cfg.ProgramID,
		Arrival:   sc.Arrival.String(),
		AdmitRate: sc.Rates.String(),
		Abandon:   sc.Abandon,
		Seed:      r.cfg.Seed,
		Users:     sc.Users,
		ByRoute:   map[string]int64{},
	}
	seconds := int((end + time.Second - 1) / time.Second) // the last one may be partial
	res.RpsSeries = make([]int64, seconds)
	res.PollSeries = make([]int64, seconds)
	var lat []float64
	for _, rec := range r.records {
		key := rec.route + " "
		if rec.status == 0 {
			key += "error"
		} else {
			key += strconv.Itoa(rec.status)
		}
		res.ByRoute[key]++
		if rec.failed {
			res.Errors++
		}
		if rec.route != routeEnter && rec.route != routePoll && rec.route != routeLeave {
			continue
		}
		res.Requests++
		switch rec.route {
		case routeEnter:
			res.Enters++
		case routePoll:
			res.Polls++
		default:
			res.Leaves++
		}
		if s := min(int(rec.at/time.Second), seconds-1); s >= 0 {
			res.RpsSeries[s]++
			if rec.route == routePoll {
				res.PollSeries[s]++
			}
		}
		if rec.status != 0 {
			lat = append(lat, bench.Ms(rec.latency))
		}
	}
	l := bench.Summarize(lat)
	res.LatencyMs = &l

	samples := slices.Clone(r.samples)
	slices.SortFunc(samples, func(a, b sample) int { return int(a.at - b.at) })
	var delays []float64
	var pollsOfAdmitted int64
	for _, u := range users {
		if u.entered {
			res.Entered++
		}
		if u.left {
			res.Left++
		}
		if !u.admitted {
			continue
		}
		res.Admitted++
		pollsOfAdmitted += int64(u.polls)
		tk := u.ticket
		if tk == 0 {
			tk = servingAt(samples, u.enterAt, baseServing, sc.Arrival.Over == 0) + u.position
		}
		at := admittedAt(samples, tk)
		// The server answered WAITING to a request sent at lastWaiting, and
		// ADMITTED by seenAt: the admission lies in between.
		at = min(max(at, u.lastWaiting), u.seenAt)
		delays = append(delays, bench.Ms(u.seenAt-at))
	}
	res.NotifyDelayMs = bench.Summarize(delays)
	res.Finish(end, pollsOfAdmitted)
	return res
}

// servingAt estimates the serving counter at instant t: exactly base while
// a burst enters the paused queue, else interpolated between samples.
func servingAt(samples []sample, t time.Duration, base int64, paused bool) int64 {
	if paused || len(samples) == 0 {
		return base
	}
	i, _ := slices.BinarySearchFunc(samples, t, func(s sample, t time.Duration) int { return int(s.at - t) })
	switch {
	case i == 0:
		return base
	case i == len(samples):
		return samples[i-1].admitted
	}
	a, b := samples[i-1], samples[i]
	f := float64(t-a.at) / float64(b.at-a.at)
	return a.admitted + int64(f*float64(b.admitted-a.admitted))
}

// admittedAt estimates when the counter passed ticket: between the last
// sample below it and the first at or above it, reading each sample as the
// middle of its counter's interval (a floor); -1 (so that the caller's
// clamp applies) when the samples say nothing.
func admittedAt(samples []sample, ticket int64) time.Duration {
	i, _ := slices.BinarySearchFunc(samples, ticket, func(s sample, k int64) int {
		switch {
		case s.admitted < k:
			return -1
		case s.admitted > k:
			return 1
		}
		return 0
	})
	// i is the first sample with admitted ≥ ticket.
	var a, b sample
	switch {
	case i == 0:
		return -1
	case i == len(samples):
		if len(samples) < 2 {
			return -1
		}
		a, b = samples[len(samples)-2], samples[len(samples)-1]
		if b.admitted == a.admitted {
			return b.at
		}
	default:
		a, b = samples[i-1], samples[i]
	}
	f := (float64(ticket-a.admitted) - 0.5) / float64(b.admitted-a.admitted)
	return a.at + time.Duration(f*float64(b.at-a.at))
}
