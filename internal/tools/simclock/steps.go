package simclock

import (
	"context"
	"slices"
	"sync"
	"time"
)

// Steps is a discrete-event clock: Sleep blocks until the clock reaches its
// end, and the clock moves, to the earliest end, only while every party is
// asleep. A party is counted by Track and sleeps when Party says its
// context is one's; time stands still while any party works (a request in
// flight reads one time at both ends). It is safe for concurrent use.
type Steps struct {
	// Party reports whether a Sleep on ctx is a party's (nil: every one).
	Party func(ctx context.Context) bool
	// Batch wakes, with the earliest sleeper, those due within it of it:
	// they run side by side, a little early.
	Batch time.Duration

	mu       sync.Mutex
	now      time.Time
	awake    int // parties tracked and not asleep
	sleepers []*sleeper
}

type sleeper struct {
	at    time.Time
	party bool
	wake  chan struct{}
}

// NewSteps returns a Steps clock reading now.
func NewSteps(now time.Time) *Steps { return &Steps{now: now} }

// Now returns the clock's time.
func (s *Steps) Now() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.now
}

// Track counts delta parties in (+1, before the party's first Sleep) or out
// (-1, when it is done).
func (s *Steps) Track(delta int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.awake += delta
	s.step()
}

// Sleep waits until the clock has moved d on, or ctx is done.
func (s *Steps) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil || d <= 0 {
		return err
	}
	w := &sleeper{party: s.Party == nil || s.Party(ctx), wake: make(chan struct{})}
	s.mu.Lock()
	w.at = s.now.Add(d)
	s.sleepers = append(s.sleepers, w)
	if w.party {
		s.awake--
	}
	s.step()
	s.mu.Unlock()
	select {
	case <-w.wake:
		return nil
	case <-ctx.Done():
		s.mu.Lock()
		defer s.mu.Unlock()
		if i := slices.Index(s.sleepers, w); i >= 0 { // not woken meanwhile
			s.sleepers = slices.Delete(s.sleepers, i, i+1)
			if w.party {
				s.awake++
			}
		}
		return ctx.Err()
	}
}

// step moves the clock to the earliest sleeper's end while no party is
// awake, waking it and those due within Batch.
func (s *Steps) step() {
	for s.awake <= 0 && len(s.sleepers) > 0 {
		first := slices.MinFunc(s.sleepers, func(a, b *sleeper) int { return a.at.Compare(b.at) })
		if first.at.After(s.now) {
			s.now = first.at
		}
		s.sleepers = slices.DeleteFunc(s.sleepers, func(w *sleeper) bool {
			if w.at.After(s.now.Add(s.Batch)) {
				return false
			}
			if w.party {
				s.awake++
			}
			close(w.wake)
			return true
		})
	}
}

// WithTimeout is context.WithTimeout: on a Steps clock budgets run in real
// time, since the clock stands still while a party waits on one.
func (*Steps) WithTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, d)
}
