package loadtest

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/example/waitingroom/internal/api"
	"github.com/example/waitingroom/internal/clock"
	"github.com/example/waitingroom/internal/tools/bench"
	"github.com/example/waitingroom/internal/tools/bench/simulate"
	"github.com/example/waitingroom/internal/tools/client"
	"github.com/example/waitingroom/internal/tools/partitionmodel"
)

// retryFallback is the wait before retrying a failed request whose answer
// names none.
const retryFallback = time.Second

// runner is one load-test run: its client, and what its virtual users and
// background work record.
type runner struct {
	cfg    Config
	client *client.Client
	hc     *http.Client
	clock  clock.Clock
	start  time.Time // set before any virtual user starts
	// deadline is the run's end on the clock (zero while unknown); no
	// wait is begun past it.
	deadline time.Time

	mu      sync.Mutex
	records []record
	samples []sample // admin counter over time, sorted once the run is over

	// baseIssued is the program's ticket counter when the run starts.
	baseIssued int64
	// plan is the predicted admission offset of each ticket from the start
	// of admission (simulate.AdmissionTimes), with abandonment or
	// Poll.AtAdmission.
	plan []time.Duration
	// admitStart is the start of admission from the run's start, plus 1 ns
	// (0 until known); started ends once it is set.
	admitStart  atomic.Int64
	started     context.Context
	markStarted context.CancelFunc
	passes      atomic.Int64 // first ADMITTED answers that carried a pass
	solves      atomic.Int64 // proofs of work solved
	solveNs     atomic.Int64 // their time
	proofs      bool         // the program asks for a proof of work
}

// record is one request as sent and answered.
type record struct {
	at      time.Duration // sent, from the start
	latency time.Duration
	op      client.Op
	status  int    // 0: transport error
	code    string // the error answer's code, e.g. PASS_UNAVAILABLE
	failed  bool
}

// sample is the admin counter at an instant.
type sample struct {
	at       time.Duration
	admitted int64
	// issued, and with a cap the active, ended and no-show counters.
	issued, active, ended, noShows int64
}

func (r *runner) since() time.Duration { return r.clock.Now().Sub(r.start) }

// bound is parent ended at the run's deadline, on the real clock (on
// another clock, sleep enforces it).
func (r *runner) bound(parent context.Context) (context.Context, context.CancelFunc) {
	if r.cfg.Clock != nil {
		return context.WithCancel(parent)
	}
	return context.WithDeadline(parent, r.deadline)
}

// userKey is the context key of a virtual user's index (userOf).
type userKey struct{}

// samplerUser is userOf the counter sampling's context.
const samplerUser = -2

// userOf is the index of the virtual user of ctx (samplerUser for the
// counter sampling); ok is false for the runner's other work.
func userOf(ctx context.Context) (index int, ok bool) {
	index, ok = ctx.Value(userKey{}).(int)
	return index, ok
}

// sleep waits d on the run's clock or until ctx ends, and reports whether
// d elapsed: a wait that would end at or past the run's deadline only
// lasts until it, and reports false.
func (r *runner) sleep(ctx context.Context, d time.Duration) bool {
	if !r.deadline.IsZero() {
		if left := r.deadline.Sub(r.clock.Now()); d >= left {
			_ = r.clock.Sleep(ctx, left)
			return false
		}
	}
	return r.clock.Sleep(ctx, d) == nil && ctx.Err() == nil
}

// observe records every request the client sends that the run's end did
// not cancel.
func (r *runner) observe(ex client.Exchange) {
	if ex.Canceled {
		return
	}
	// A DELETE answered 409 (admitted before it left) is the service
	// working as documented, not a failure.
	failed := ex.Err != nil && !(ex.Op == client.OpLeave && ex.Status == http.StatusConflict)
	var at time.Duration
	switch {
	case r.start.IsZero():
	case r.cfg.Clock == nil:
		at = ex.Sent.Sub(r.start)
	default: // the client times its exchanges in real time
		at = r.since()
	}
	var code string
	if ae := (*client.Error)(nil); errors.As(ex.Err, &ae) {
		code = ae.Code
	}
	r.mu.Lock()
	r.records = append(r.records, record{at: at, latency: ex.Latency, op: ex.Op, status: ex.Status, code: code, failed: failed})
	r.mu.Unlock()
}

// retry reports whether to send a failed request again, after waiting as
// its answer asks; it answers false at once when the wait would end past
// the run's deadline or the answer is not worth a retry.
func (r *runner) retry(ctx context.Context, err error) bool {
	d, ok := client.RetryDelay(ctx, err, retryFallback)
	if !ok {
		return false
	}
	if !r.deadline.IsZero() && r.clock.Now().Add(d).After(r.deadline) {
		return false
	}
	return r.sleep(ctx, d)
}

// retrying calls send until it succeeds or retry gives up, and returns
// its last error.
func (r *runner) retrying(ctx context.Context, send func() error) error {
	for {
		err := send()
		if err == nil || !r.retry(ctx, err) {
			return err
		}
	}
}

// putProgram sends an admin change until it is applied, within ctx; a
// request sent is seen to its answer even when ctx ends meanwhile.
func (r *runner) putProgram(ctx context.Context, s api.ProgramSettings) (p client.ProgramAnswer, err error) {
	err = r.retrying(ctx, func() (err error) {
		p, _, err = r.client.PutProgram(context.WithoutCancel(ctx), r.cfg.ProgramID, s)
		return err
	})
	return p, err
}

func (r *runner) run(parent context.Context) (bench.Result, error) {
	sc := r.cfg.Scenario
	c, err := r.openProgram(parent)
	if err != nil {
		return bench.Result{}, err
	}
	r.baseIssued = c.Issued
	r.proofs = c.ChallengeBits > 0

	r.start = r.clock.Now()
	r.deadline = r.start.Add(sc.Timeout)
	ctx, cancel := r.bound(parent)
	defer cancel()
	bgCtx, stopBG := context.WithCancel(ctx)
	defer stopBG()
	var enters sync.WaitGroup
	enters.Add(sc.Users)
	bg, schedErr := r.startBackground(bgCtx, &enters)
	users := r.playUsers(ctx, &enters)
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
	slices.SortFunc(r.samples, func(a, b sample) int { return cmp.Compare(a.at, b.at) })
	res := r.result(users, end)
	r.tickets(users, issued, &res)
	if r.cfg.Crowd != nil {
		res.Capacity = r.capacity(users, end)
	}
	res.ProgramItemWritesPerSecondMax = writes
	return res, nil
}

// openProgram creates the run's program paused, or reads the existing
// one, within the scenario's timeout.
func (r *runner) openProgram(parent context.Context) (client.ProgramAnswer, error) {
	r.deadline = r.clock.Now().Add(r.cfg.Scenario.Timeout)
	ctx, cancel := r.bound(parent)
	defer cancel()
	if r.cfg.Existing {
		var c client.ProgramAnswer
		err := r.retrying(ctx, func() (err error) {
			c, err = r.client.GetProgram(ctx, r.cfg.ProgramID)
			return err
		})
		if err != nil {
			return c, fmt.Errorf("read program %s: %w", r.cfg.ProgramID, err)
		}
		return c, nil
	}
	create := api.ProgramSettings{Paused: new(true)}
	if r.cfg.Poll.Policy != "" {
		create.PollingPolicy = new(r.cfg.Poll.Policy)
	}
	if r.cfg.Crowd != nil {
		r.cfg.Crowd.Settings(&create)
	}
	c, err := r.putProgram(ctx, create)
	if err != nil {
		return c, fmt.Errorf("create program %s: %w", r.cfg.ProgramID, err)
	}
	return c, nil
}

// startBackground starts, until ctx ends, the counter sampling (when
// anyone gets admitted) and the rate schedule, which starts once everyone
// is in (enters) for a burst, with the run otherwise. The channel receives
// the schedule's outcome.
func (r *runner) startBackground(ctx context.Context, enters *sync.WaitGroup) (*sync.WaitGroup, <-chan error) {
	sc := r.cfg.Scenario
	admits := r.cfg.Existing // the operator may admit at any time
	for _, ch := range sc.Rates {
		admits = admits || ch.Rate > 0
	}
	var bg sync.WaitGroup
	if admits {
		bg.Go(func() { r.sample(ctx) })
	}
	schedErr := make(chan error, 1)
	bg.Go(func() {
		if r.cfg.Existing {
			schedErr <- nil
			return
		}
		if sc.Arrival.Over == 0 {
			enters.Wait()
		}
		schedErr <- r.schedule(ctx)
	})
	return &bg, schedErr
}

// playUsers starts each virtual user at its arrival instant and returns
// their outcomes once all are done; each calls enters.Done once its enter
// is over.
func (r *runner) playUsers(ctx context.Context, enters *sync.WaitGroup) []user {
	sc := r.cfg.Scenario
	users := make([]user, sc.Users)
	leaving := sc.Leaving(r.cfg.Seed)
	if leaving != nil || r.cfg.Poll.AtAdmission {
		r.plan = simulate.AdmissionTimes(sc, r.cfg.CacheTTL, true)
	}
	var vus sync.WaitGroup
	var noShow []bool
	var session []time.Duration
	if c := r.cfg.Crowd; c != nil {
		noShow, session = c.Draw(sc.Users, r.cfg.Seed)
	}
	for i := range users {
		users[i].leaving = -1
		if noShow != nil {
			users[i].noShow = noShow[i]
		}
		if session != nil {
			users[i].session = session[i]
		}
		if leaving != nil {
			users[i].leaving = leaving[i]
		}
		if r.cfg.trackUser != nil {
			r.cfg.trackUser(1)
		}
		vus.Go(func() {
			if r.cfg.trackUser != nil {
				defer r.cfg.trackUser(-1)
			}
			ctx := context.WithValue(ctx, userKey{}, i)
			if !r.sleep(ctx, sc.Arrival.At(i, sc.Users)-r.since()) {
				enters.Done()
				return
			}
			r.user(ctx, &users[i], enters.Done)
		})
	}
	vus.Wait()
	return users
}

// final reads, once the run is over, the program's issued counter (-1 if
// the read fails) and the program item's busiest second from the server's
// partition model (nil when it has none).
func (r *runner) final(ctx context.Context) (issued int64, writes *int64) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	issued = -1
	if p, err := r.client.GetProgram(ctx, r.cfg.ProgramID); err == nil {
		issued = p.Issued
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(r.cfg.BaseURL, "/")+partitionmodel.StatsPath, nil)
	if err != nil {
		return issued, nil
	}
	resp, err := r.hc.Do(req)
	if err != nil {
		return issued, nil
	}
	defer resp.Body.Close()
	var sum partitionmodel.Summary
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

// schedule applies the scenario's rate changes at their offsets (the first
// one now).
func (r *runner) schedule(ctx context.Context) error {
	from := r.since()
	r.admitStart.Store(int64(from) + 1)
	r.markStarted()
	for i, ch := range r.cfg.Scenario.Rates {
		if i > 0 && !r.sleep(ctx, from+ch.At-r.since()) {
			return nil
		}
		if i == 0 && ch.Rate == 0 {
			continue // created paused
		}
		s := api.ProgramSettings{Paused: new(ch.Rate == 0 || ch.Paused)}
		if ch.Rate > 0 {
			s.AdmissionRatePerSecond = new(api.Rate(ch.Rate))
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

// sampleGrace is how long a counter read in flight when the run ends may
// still take, so that the admin requests counted are those the server saw.
const sampleGrace = 2 * time.Second

// sample reads the admitted counter every SampleEvery, timing each read
// at the middle of its round trip.
func (r *runner) sample(ctx context.Context) {
	ctx = context.WithValue(ctx, userKey{}, samplerUser)
	for {
		sent := r.since()
		rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		stop := context.AfterFunc(ctx, func() { time.AfterFunc(sampleGrace, cancel) })
		p, err := r.client.GetProgram(rctx, r.cfg.ProgramID)
		stop()
		cancel()
		if err == nil {
			at := sent + (r.since()-sent)/2
			r.mu.Lock()
			r.samples = append(r.samples, sample{at: at, admitted: p.Admitted, issued: p.Issued,
				active: deref(p.Active), ended: deref(p.Ended), noShows: deref(p.NoShows)})
			r.mu.Unlock()
		}
		if !r.sleep(ctx, sent+r.cfg.SampleEvery-r.since()) {
			return
		}
	}
}

// deref is *p, or 0 for nil.
func deref(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}
