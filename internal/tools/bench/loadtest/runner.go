package loadtest

import (
	"cmp"
	"context"
	"encoding/json"
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

// retryFallback is the wait before retrying a failed request whose answer names none.
const retryFallback = time.Second

// runner is one load-test run: its client, and what its users and background work record.
type runner struct {
	cfg      Config
	client   *client.Client
	hc       *http.Client
	clock    clock.Clock
	start    time.Time // set before any request
	deadline time.Time // the run's end on the clock; no wait is begun past it

	mu      sync.Mutex
	records []record
	samples []sample // admin counter over time, sorted once the run is over

	baseIssued  int64           // the program's ticket counter when the run starts
	plan        []time.Duration // each ticket's predicted admission from the start of admission, when needed
	admitStart  atomic.Int64    // the start of admission from the run's start, plus 1 ns (0 until known)
	started     context.Context // ends once admitStart is set
	markStarted context.CancelFunc
	passes      atomic.Int64 // first ADMITTED answers that carried a pass
	solves      atomic.Int64 // proofs of work solved
	solveNs     atomic.Int64 // their time
	proofs      bool         // the program asks for a proof of work
}

// record is one request as sent (at, from the start) and answered.
type record struct {
	client.Exchange
	at time.Duration
}

// sample is the admin counters at an instant (active, ended and noShows with a cap).
type sample struct {
	at                                       time.Duration
	admitted, issued, active, ended, noShows int64
}

func (r *runner) since() time.Duration { return r.clock.Now().Sub(r.start) }

// within starts the clock of the run (or its setup), the timeout long, and returns parent ended at its
// deadline on the real clock (on another, sleep enforces it).
func (r *runner) within(parent context.Context) (context.Context, context.CancelFunc) {
	r.start = r.clock.Now()
	r.deadline = r.start.Add(r.cfg.Scenario.Timeout)
	if r.cfg.Clock != nil {
		return context.WithCancel(parent)
	}
	return context.WithDeadline(parent, r.deadline)
}

// userKey is the context key of a virtual user's index, or samplerUser for the counter sampling's.
type userKey struct{}

const samplerUser = -2

// UserOf returns the index of the virtual user whose work ctx is; ok is
// false for the runner's own (its schedule and counter sampling).
func UserOf(ctx context.Context) (index int, ok bool) {
	index, ok = ctx.Value(userKey{}).(int)
	return index, ok && index >= 0
}

// sleep waits d on the run's clock or until ctx ends, and reports whether
// d elapsed: a wait that would end at or past the run's deadline only
// lasts until it, and reports false.
func (r *runner) sleep(ctx context.Context, d time.Duration) bool {
	if left := r.deadline.Sub(r.clock.Now()); d >= left {
		_ = r.clock.Sleep(ctx, left)
		return false
	}
	return r.clock.Sleep(ctx, d) == nil && ctx.Err() == nil
}

// observe records every request the client sends that the run's end did not cancel.
func (r *runner) observe(ex client.Exchange) {
	if ex.Canceled {
		return
	}
	rec := record{Exchange: ex, at: r.since()} // the client times its exchanges in real time
	if r.cfg.Clock == nil {
		rec.at = ex.Sent.Sub(r.start)
	}
	r.mu.Lock()
	r.records = append(r.records, rec)
	r.mu.Unlock()
}

// retrying calls send until it succeeds, waiting between failures as their answers ask, and returns its
// last error: it gives up at once when the wait would end past the run's deadline or the answer is not
// worth a retry.
func (r *runner) retrying(ctx context.Context, send func() error) error {
	for {
		err := send()
		if err == nil {
			return nil
		}
		if d, ok := client.RetryDelay(ctx, err, retryFallback); !ok || r.clock.Now().Add(d).After(r.deadline) || !r.sleep(ctx, d) {
			return err
		}
	}
}

// putProgram sends an admin change until it is applied, seeing a request sent through even when ctx ends.
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
	r.baseIssued, r.proofs = c.Issued, c.ChallengeBits > 0

	ctx, cancel := r.within(parent)
	defer cancel()
	// The counter sampling runs when anyone gets admitted, the schedule once everyone is in for a burst.
	bgCtx, stopBG := context.WithCancel(ctx)
	defer stopBG()
	var bg, enters sync.WaitGroup
	enters.Add(sc.Users)
	if r.cfg.Existing || maxRate(sc.Rates) > 0 {
		bg.Go(func() { r.sample(bgCtx) })
	}
	var schedErr error
	if !r.cfg.Existing {
		bg.Go(func() {
			if sc.Arrival.Over == 0 {
				enters.Wait()
			}
			schedErr = r.schedule(bgCtx)
		})
	}
	users := r.playUsers(ctx, &enters)
	end := min(r.since(), sc.Timeout)
	stopBG()
	bg.Wait()
	if err := cmp.Or(parent.Err(), schedErr); err != nil {
		return bench.Result{}, err
	}
	// Read the final counters first: their requests count in the result.
	fctx, fcancel := context.WithTimeout(parent, 10*time.Second)
	defer fcancel()
	issued := int64(-1)
	if p, err := r.client.GetProgram(fctx, r.cfg.ProgramID); err == nil {
		issued = p.Issued
	}
	writes := r.programWrites(fctx)
	slices.SortFunc(r.samples, func(a, b sample) int { return cmp.Compare(a.at, b.at) })
	res := r.result(users, end)
	r.tickets(users, issued, &res)
	if r.cfg.Crowd != nil {
		res.Capacity = r.capacity(users, end)
	}
	res.ProgramItemWritesPerSecondMax = writes
	return res, nil
}

// openProgram creates the run's program paused, or reads the existing one, within the timeout.
func (r *runner) openProgram(parent context.Context) (c client.ProgramAnswer, err error) {
	ctx, cancel := r.within(parent)
	defer cancel()
	if r.cfg.Existing {
		err = r.retrying(ctx, func() (err error) {
			c, err = r.client.GetProgram(ctx, r.cfg.ProgramID)
			return err
		})
		if err != nil {
			err = fmt.Errorf("read program %s: %w", r.cfg.ProgramID, err)
		}
		return c, err
	}
	create := api.ProgramSettings{Paused: new(true)}
	if r.cfg.Poll.Policy != "" {
		create.PollingPolicy = new(r.cfg.Poll.Policy)
	}
	if r.cfg.Crowd != nil {
		r.cfg.Crowd.Settings(&create)
	}
	if c, err = r.putProgram(ctx, create); err != nil {
		err = fmt.Errorf("create program %s: %w", r.cfg.ProgramID, err)
	}
	return c, err
}

// playUsers plays each virtual user from its arrival instant, calling enters.Done once its enter is over,
// and returns their outcomes.
func (r *runner) playUsers(ctx context.Context, enters *sync.WaitGroup) []user {
	sc := r.cfg.Scenario
	users := make([]user, sc.Users)
	leaving := sc.Leaving(r.cfg.Seed)
	if leaving != nil || r.cfg.Poll.AtAdmission {
		r.plan = simulate.AdmissionTimes(sc, r.cfg.CacheTTL, true)
	}
	var noShow []bool
	var session []time.Duration
	if c := r.cfg.Crowd; c != nil {
		noShow, session = c.Draw(sc.Users, r.cfg.Seed)
	}
	for i := range users {
		users[i].leaving = -1
		if leaving != nil {
			users[i].leaving = leaving[i]
		}
		users[i].noShow = noShow != nil && noShow[i]
		if session != nil {
			users[i].session = session[i]
		}
	}
	track := r.cfg.Track
	if track == nil {
		track = func(int) {}
	}
	var vus sync.WaitGroup
	for i := range users {
		track(1)
		vus.Go(func() {
			defer track(-1)
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

// programWrites reads the program item's busiest second from the server's partition model (nil without one).
func (r *runner) programWrites(ctx context.Context) *int64 {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(r.cfg.BaseURL, "/")+partitionmodel.StatsPath, nil)
	if err != nil {
		return nil
	}
	resp, err := r.hc.Do(req)
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	var sum partitionmodel.Summary
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&sum) != nil {
		return nil
	}
	for _, p := range sum.Hottest {
		if strings.Contains(p.Key, `"PROGRAM#`+r.cfg.ProgramID+`"`) {
			return &p.MaxWritesPerSecond
		}
	}
	return nil
}

// schedule applies the scenario's rate changes at their offsets (the first one now).
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

// sampleGrace is how long a counter read in flight at the run's end may take, to count what the server saw.
const sampleGrace = 2 * time.Second

// sample reads the counters every SampleEvery, timing each read at the middle of its round trip.
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
