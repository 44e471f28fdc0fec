package loadtest

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/example/waitingroom/internal/api"
	"github.com/example/waitingroom/internal/tools/simclock"
)

// vwait is one wait a run asked its clock for: by virtual user (-1 for
// the runner's own, e.g. the rate schedule and admin retries).
type vwait struct {
	user int
	d    time.Duration
}

// vclock is a run's clock in tests: Now reads a simclock.Fake (the server
// shares it through queue.WithClock), and Sleep records the wait and
// hands it to onSleep, which by default advances the fake clock by it at
// once. No wait takes real time, except as onSleep blocks on an event.
type vclock struct {
	*simclock.Fake
	// onSleep, when not nil, replaces the default advance; it may block
	// until an event of the scenario (and must return ctx's error if ctx
	// ends first).
	onSleep func(ctx context.Context, w vwait) error
	// samples is how many of the counter sampling's waits pass at once
	// (without moving the clock); the next one lasts until the run ends.
	// With driveSampler, onSleep sees the sampling's waits instead.
	samples      int
	driveSampler bool

	mu    sync.Mutex
	waits []vwait
}

// userOf is the index of the virtual user of ctx (samplerUser for the
// counter sampling); ok is false for the runner's other work.
func userOf(ctx context.Context) (index int, ok bool) {
	index, ok = ctx.Value(userKey{}).(int)
	return index, ok
}

// WithTimeout hides the Fake's: timeouts on a vclock run in real time.
func (*vclock) WithTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, d)
}

func newVClock() *vclock { return &vclock{Fake: simclock.NewFake(time.Now().Truncate(time.Second))} }

// Sleep records the wait, then passes it to onSleep (or advances by it).
func (c *vclock) Sleep(ctx context.Context, d time.Duration) error {
	w := vwait{user: -1, d: d}
	if u, ok := userOf(ctx); ok {
		w.user = u
	}
	c.mu.Lock()
	c.waits = append(c.waits, w)
	sampled := 0
	for _, w := range c.waits {
		if w.user == samplerUser {
			sampled++
		}
	}
	c.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return err
	}
	if w.user == samplerUser && !c.driveSampler {
		if sampled <= c.samples {
			return nil
		}
		<-ctx.Done()
		return ctx.Err()
	}
	if c.onSleep != nil {
		return c.onSleep(ctx, w)
	}
	return c.Fake.Sleep(ctx, d)
}

// of returns the positive waits of user (-1: the runner's), in order.
func (c *vclock) of(user int) []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	var ds []time.Duration
	for _, w := range c.waits {
		if w.user == user && w.d > 0 {
			ds = append(ds, w.d)
		}
	}
	return ds
}

// byUser returns every user's positive waits, in order.
func (c *vclock) byUser() map[int][]time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := map[int][]time.Duration{}
	for _, w := range c.waits {
		if w.user >= 0 && w.d > 0 {
			m[w.user] = append(m[w.user], w.d)
		}
	}
	return m
}

// after returns an onSleep that holds every wait until ready is closed,
// then advances the clock by it.
func (c *vclock) after(ready <-chan struct{}) func(context.Context, vwait) error {
	return func(ctx context.Context, w vwait) error {
		if w.d <= 0 {
			return nil
		}
		select {
		case <-ready:
		case <-ctx.Done():
			return ctx.Err()
		}
		return c.Fake.Sleep(ctx, w.d)
	}
}

// hangGuard is the real-time bound of a run on a vclock: only a hang
// reaches it.
func hangGuard(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// virtualTimeout is the scenario timeout of runs on a vclock: long on the
// virtual clock, so that only the scenario ends them.
const virtualTimeout = 24 * time.Hour

// statusWriter records the status an API handler answered.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(status int) {
	w.status = status
	w.ResponseWriter.WriteHeader(status)
}

// onRateApplied returns a serverOptions.after hook that closes the
// returned channel once a PUT setting a rate has been answered 200, after
// calling then (when not nil) in the handler.
func onRateApplied(then func()) (func(r *http.Request, body []byte, status int), <-chan struct{}) {
	ch := make(chan struct{})
	var once sync.Once
	return func(r *http.Request, body []byte, status int) {
		if r.Method == http.MethodPut && status == http.StatusOK && containsRate(body) {
			once.Do(func() {
				if then != nil {
					then()
				}
				close(ch)
			})
		}
	}, ch
}

// onNth returns a serverOptions.after hook that closes the returned channel
// once the n-th answer with status to a method request has been written,
// after calling then (when not nil) in the handler.
func onNth(method string, status, n int, then func()) (func(r *http.Request, body []byte, status int), <-chan struct{}) {
	ch := make(chan struct{})
	var mu sync.Mutex
	seen := 0
	return func(r *http.Request, _ []byte, st int) {
		if r.Method != method || st != status {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if seen++; seen == n {
			if then != nil {
				then()
			}
			close(ch)
		}
	}, ch
}

// containsRate reports whether an admin PUT body sets a positive rate
// without pausing.
func containsRate(body []byte) bool {
	var s api.ProgramSettings
	if json.Unmarshal(body, &s) != nil {
		return false
	}
	return s.AdmissionRatePerSecond != nil && *s.AdmissionRatePerSecond > 0 && (s.Paused == nil || !*s.Paused)
}

// driver moves a vclock as a discrete-event simulation: a wait ends when
// the clock reaches its end, and the clock moves to the earliest end only
// when every participant (the users still playing, and extra others such
// as the counter sampling) is waiting. A user sending a request is not
// waiting, so no time passes while the server works.
type driver struct {
	c     *vclock
	extra int

	mu       sync.Mutex
	live     int
	sleepers []*sleeper
}

type sleeper struct {
	at   time.Time
	wake chan struct{}
}

// newDriver drives c for a run of users (and extra other participants);
// it sets c.onSleep and returns the Config.Track hook.
func newDriver(c *vclock, users, extra int) func(delta int) {
	d := &driver{c: c, extra: extra, live: users}
	c.onSleep, c.driveSampler = d.sleep, true
	return func(delta int) {
		if delta > 0 {
			return // counted from the start
		}
		d.mu.Lock()
		defer d.mu.Unlock()
		d.live += delta
		d.step()
	}
}

func (d *driver) sleep(ctx context.Context, w vwait) error {
	if w.d <= 0 {
		return nil
	}
	s := &sleeper{at: d.c.Now().Add(w.d), wake: make(chan struct{})}
	d.mu.Lock()
	d.sleepers = append(d.sleepers, s)
	d.step()
	d.mu.Unlock()
	select {
	case <-s.wake:
		return nil
	case <-ctx.Done():
		d.mu.Lock()
		defer d.mu.Unlock()
		if i := slices.Index(d.sleepers, s); i >= 0 {
			d.sleepers = slices.Delete(d.sleepers, i, i+1)
			d.step()
		}
		return ctx.Err()
	}
}

// step, while every participant waits, moves the clock to the earliest
// end of a wait and wakes the waits due.
func (d *driver) step() {
	for len(d.sleepers) > 0 && len(d.sleepers) >= d.live+d.extra {
		next := d.sleepers[0].at
		for _, s := range d.sleepers {
			if s.at.Before(next) {
				next = s.at
			}
		}
		if now := d.c.Now(); next.After(now) {
			d.c.Advance(next.Sub(now))
		}
		d.sleepers = slices.DeleteFunc(d.sleepers, func(s *sleeper) bool {
			if s.at.After(next) {
				return false
			}
			close(s.wake)
			return true
		})
	}
}
