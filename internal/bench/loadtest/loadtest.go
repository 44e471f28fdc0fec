// Package loadtest runs the bench scenario against a waiting-room server
// over real HTTP, through the typed client of package apiclient: it creates
// a fresh program, lets one goroutine per virtual user enter (with an
// Idempotency-Key) and poll until ADMITTED or the run's deadline, applies
// the rate schedule through the admin API, and retries failed requests as
// their Retry-After says. docs/benchmarks.md describes what it measures.
package loadtest

import (
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
	"github.com/example/waitingroom/internal/bench/apiclient"
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
	// CacheTTL is how long after an admin change the server applies it. It
	// only serves to predict when each ticket is admitted
	// (bench.AdmissionTimes), so that an abandoning user leaves at its
	// fraction of that wait.
	CacheTTL time.Duration
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
	if cfg.Existing && (sc.Abandon > 0 || cfg.Poll.Policy != "") {
		return bench.Result{}, errors.New("loadtest: a run on an existing program has no abandonment and no polling policy of its own")
	}
	if cfg.SampleEvery <= 0 {
		cfg.SampleEvery = 100 * time.Millisecond
	}
	hc := cfg.Client
	if hc == nil {
		hc = NewClient(min(cfg.Conns, sc.Users+1))
		defer hc.CloseIdleConnections()
	}
	r := &runner{cfg: cfg, started: make(chan struct{}), hc: hc}
	r.api = apiclient.New(cfg.BaseURL, apiclient.WithHTTPClient(hc), apiclient.WithAdminToken(cfg.AdminToken), apiclient.WithObserver(r.observe))
	return r.run(ctx)
}

// retryFallback is the wait before retrying a failed request whose answer
// names none (a transport error, a 5xx without Retry-After).
const retryFallback = time.Second

type runner struct {
	cfg   Config
	api   *apiclient.Client
	hc    *http.Client
	start time.Time // set before any virtual user starts

	mu      sync.Mutex
	records []record
	samples []sample // admin counter over time, in time order

	// baseIssued is the program's ticket counter when the run starts: the
	// run's tickets are baseIssued+1, baseIssued+2, …
	baseIssued int64
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

	entered, admitted, left, requests, errs, adminErrs atomic.Int64
}

// record is one request as sent and answered.
type record struct {
	at      time.Duration // sent, from the start
	latency time.Duration
	op      apiclient.Op
	status  int // 0: transport error
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
	ticket      int64 // from the enter answer; 0 when the server does not send it
	issuedAtMs  int64 // the token's issuedAt (server clock, Unix ms); 0 when unknown
	prequeue    int64 // the size of a shuffled pre-queue, when an answer told it
	position    int64 // at enter
	enterAt     time.Duration
	lastWaiting time.Duration // send time of the last WAITING answer
	seenAt      time.Duration // receipt of ADMITTED
	admitted    bool
	polls       int
}

func (r *runner) since() time.Duration { return time.Since(r.start) }

// observe records every request the client sends, unless the run's end
// canceled it.
func (r *runner) observe(ex apiclient.Exchange) {
	if ex.Canceled {
		return
	}
	// A DELETE answered 409 (admitted before it left) is the service
	// working as documented, not a failure.
	failed := ex.Err != nil && !(ex.Op == apiclient.OpLeave && ex.Status == http.StatusConflict)
	var at time.Duration
	if !r.start.IsZero() {
		at = ex.Sent.Sub(r.start)
	}
	r.mu.Lock()
	r.records = append(r.records, record{at: at, latency: ex.Latency, op: ex.Op, status: ex.Status, failed: failed})
	r.mu.Unlock()
	switch {
	case ex.Op.Admin():
		if failed {
			r.adminErrs.Add(1)
		}
	default:
		r.requests.Add(1)
		if failed {
			r.errs.Add(1)
		}
	}
}

// retry reports whether to send a failed request again, after waiting as
// its answer asks (Retry-After on 429 and 5xx; retryFallback after a
// transport error). It does not wait, and answers false, when the wait
// would end past the run's deadline or the answer is not worth a retry.
func retry(ctx context.Context, err error) bool {
	d, ok := apiclient.RetryDelay(ctx, err, retryFallback)
	if !ok {
		return false
	}
	if dl, has := ctx.Deadline(); has && time.Now().Add(d).After(dl) {
		return false
	}
	return Sleep(ctx, d)
}

// getProgram reads the program until it is answered, honouring
// Retry-After, within ctx.
func (r *runner) getProgram(ctx context.Context) (apiclient.Program, error) {
	for {
		p, err := r.api.GetProgram(ctx, r.cfg.ProgramID)
		if err == nil || !retry(ctx, err) {
			return p, err
		}
	}
}

// putProgram sends an admin change until it is applied, honouring
// Retry-After, within ctx.
func (r *runner) putProgram(ctx context.Context, s apiclient.ProgramSettings) (apiclient.Program, error) {
	for {
		p, err := r.api.PutProgram(ctx, r.cfg.ProgramID, s)
		if err == nil || !retry(ctx, err) {
			return p, err
		}
	}
}

func (r *runner) run(parent context.Context) (bench.Result, error) {
	sc := r.cfg.Scenario
	// Create the program paused: nobody is admitted before the scenario's
	// admission starts.
	create := apiclient.ProgramSettings{Paused: new(true)}
	if r.cfg.Poll.Policy != "" {
		create.PollingPolicy = new(r.cfg.Poll.Policy)
	}
	createCtx, cancelCreate := context.WithTimeout(parent, sc.Timeout)
	var c apiclient.Program
	var err error
	if r.cfg.Existing {
		if c, err = r.getProgram(createCtx); err != nil {
			err = fmt.Errorf("read program %s: %w", r.cfg.ProgramID, err)
		}
	} else if c, err = r.putProgram(createCtx, create); err != nil {
		err = fmt.Errorf("create program %s: %w", r.cfg.ProgramID, err)
	}
	cancelCreate()
	if err != nil {
		return bench.Result{}, err
	}
	baseServing := c.Admitted
	r.baseIssued = c.Issued

	r.start = time.Now()
	ctx, cancel := context.WithTimeout(parent, sc.Timeout)
	defer cancel()

	admits := r.cfg.Existing // the operator may admit at any time
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
		if r.cfg.Existing {
			schedErr <- nil
			return
		}
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
	issued, writes := r.final(parent)
	res := r.result(users, baseServing, end)
	r.tickets(users, issued, &res)
	res.ProgramItemWritesPerSecondMax = writes
	return res, nil
}

// PartitionStatsPath is where the local server publishes its partition
// model's counts (cmd/local -partition-limits).
const PartitionStatsPath = "/debug/partition-model"

// final reads, once the run is over, the program's issued counter (-1 if
// the read fails; the read counts among the admin requests) and the
// program item's busiest second from the server's partition model (nil
// when the server has none).
func (r *runner) final(ctx context.Context) (issued int64, writes *int64) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	issued = -1
	if p, err := r.api.GetProgram(ctx, r.cfg.ProgramID); err == nil {
		issued = p.Issued
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(r.cfg.BaseURL, "/")+PartitionStatsPath, nil)
	if err != nil {
		return issued, nil
	}
	resp, err := r.hc.Do(req)
	if err != nil {
		return issued, nil
	}
	defer resp.Body.Close()
	var sum struct {
		Hottest []struct {
			Key                string
			MaxWritesPerSecond int64
		}
	}
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&sum) != nil {
		return issued, nil
	}
	for _, p := range sum.Hottest {
		if strings.Contains(p.Key, `"PROGRAM#`+r.cfg.ProgramID+`"`) {
			return issued, &p.MaxWritesPerSecond
		}
	}
	return issued, nil
}

// tickets fills the ticket-order fields of res: the gaps (the run's
// tickets, from the program's issued counter, that no user holds) and
// duplicates, and the worst inversion of arrival order.
func (r *runner) tickets(users []user, issued int64, res *bench.Result) {
	held := map[int64]int{}
	var es []bench.Entrant
	var prequeue int64
	for _, u := range users {
		prequeue = max(prequeue, u.prequeue)
	}
	for _, u := range users {
		if u.ticket <= 0 {
			continue
		}
		held[u.ticket]++
		if u.issuedAtMs > 0 {
			// A shuffled pre-queue's order is random by design: left out.
			e := bench.Entrant{EnteredMs: u.issuedAtMs, Place: u.ticket, Prequeue: u.ticket <= prequeue}
			es = append(es, e)
		}
	}
	for _, n := range held {
		res.DuplicateTickets += int64(n - 1)
	}
	res.MaxInversionMs = float64(bench.MaxInversion(es))
	if issued >= 0 {
		res.Gaps = max(0, issued-r.baseIssued-int64(len(held)))
	}
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
		s := apiclient.ProgramSettings{Paused: new(ch.Rate == 0)}
		if ch.Rate > 0 {
			s.AdmissionRatePerSecond = new(ch.Rate)
		}
		if _, err := r.putProgram(ctx, s); err != nil {
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
		if p, err := r.api.GetProgram(ctx, r.cfg.ProgramID); err == nil {
			at := sent + (r.since()-sent)/2
			r.mu.Lock()
			r.samples = append(r.samples, sample{at: at, admitted: p.Admitted})
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
			p.Update("%s/%s  entered %d/%d  admitted %d  requests %d (%.0f/s)  errors %d  admin errors %d",
				r.since().Truncate(time.Second), r.cfg.Scenario.Timeout, r.entered.Load(), r.cfg.Scenario.Users,
				r.admitted.Load(), req, rps, r.errs.Load(), r.adminErrs.Load())
		}
	}
}

// user plays one virtual user; entered is called once its enter is over,
// whatever the outcome. Its enters all carry one idempotency key, so that
// a retry can be answered the place the first attempt took.
func (r *runner) user(ctx context.Context, u *user, entered func()) {
	var once sync.Once
	defer once.Do(entered)
	key := apiclient.NewIdempotencyKey()
	var ans apiclient.TokenAnswer
	var sent, recv time.Duration
	for {
		var err error
		sent = r.since()
		ans, err = r.api.Enter(ctx, r.cfg.ProgramID, key)
		recv = r.since()
		if err == nil {
			break
		}
		if !retry(ctx, err) {
			return
		}
	}
	u.entered, u.enterAt, u.ticket, u.position = true, recv, ans.Ticket, ans.Position
	if at, err := time.Parse(time.RFC3339Nano, ans.IssuedAt); err == nil {
		u.issuedAtMs = at.UnixMilli()
	}
	r.entered.Add(1)
	once.Do(entered)
	token := ans.TokenID
	for {
		switch ans.Status {
		case apiclient.StatusAdmitted:
			u.admitted, u.seenAt = true, recv
			r.admitted.Add(1)
			return
		case apiclient.StatusWaiting:
			u.lastWaiting = sent
			if ans.Shuffle != nil && ans.Shuffle.Prequeue > 0 {
				u.prequeue = ans.Shuffle.Prequeue
			}
		default: // EXPIRED or LEFT: the bench never lets either happen
			return
		}
		wait := r.cfg.Poll.Fixed
		if wait == 0 {
			wait = ans.RetryAfter()
			if wait <= 0 {
				wait = retryFallback
			}
		}
		if done := r.wait(ctx, u, token, wait); done {
			return
		}
		for {
			var err error
			sent = r.since()
			ans, err = r.api.Poll(ctx, r.cfg.ProgramID, token)
			recv = r.since()
			u.polls++
			if err == nil {
				break
			}
			if !retry(ctx, err) {
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
	// k is u's rank among the run's tickets: exact when the server sends
	// the ticket; else a burst's position (it entered a paused queue) or a
	// ramp's arrival order.
	k := int64(u.index + 1)
	switch {
	case u.ticket > 0:
		k = u.ticket - r.baseIssued
	case r.cfg.Scenario.Arrival.Over == 0 && u.position > 0:
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
		err := r.api.Leave(ctx, r.cfg.ProgramID, token)
		var ae *apiclient.APIError
		switch {
		case err == nil:
			u.left = true
			r.left.Add(1)
			return true
		case errors.As(err, &ae) && ae.Status == http.StatusConflict:
			return false
		case !retry(ctx, err):
			return true
		}
	}
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
	if r.cfg.Existing {
		res.AdmitRate = "by the operator"
	}
	seconds := int((end + time.Second - 1) / time.Second) // the last one may be partial
	res.RpsSeries = make([]int64, seconds)
	res.PollSeries = make([]int64, seconds)
	enters := make([]int64, seconds)
	var lat []float64
	for _, rec := range r.records {
		key := string(rec.op) + " "
		if rec.status == 0 {
			key += "error"
		} else {
			key += strconv.Itoa(rec.status)
		}
		res.ByRoute[key]++
		if rec.op.Admin() {
			res.AdminRequests++
			if rec.failed {
				res.AdminErrors++
			}
			continue
		}
		res.Requests++
		if rec.failed {
			res.Errors++
		}
		switch rec.op {
		case apiclient.OpEnter:
			res.Enters++
			if rec.status == http.StatusServiceUnavailable || rec.status == http.StatusTooManyRequests {
				res.ThrottledEnters++
			}
			if rec.status == http.StatusCreated {
				if s := min(int((rec.at+rec.latency)/time.Second), seconds-1); s >= 0 {
					enters[s]++
				}
			}
		case apiclient.OpPoll:
			res.Polls++
		case apiclient.OpLeave:
			res.Leaves++
		}
		if s := min(int(rec.at/time.Second), seconds-1); s >= 0 {
			res.RpsSeries[s]++
			if rec.op == apiclient.OpPoll {
				res.PollSeries[s]++
			}
		}
		if rec.status != 0 {
			lat = append(lat, bench.Ms(rec.latency))
		}
	}
	l := bench.Summarize(lat)
	res.LatencyMs = &l
	res.EnterSeries, res.EntersPerSecondPeak = enters, bench.SeriesPeak(enters)

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
		if tk > 0 {
			res.TicketsKnown++
		} else {
			tk = servingAt(samples, u.enterAt, baseServing, sc.Arrival.Over == 0 && !r.cfg.Existing) + u.position
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
