// Package clock provides the time the service reads and waits on: the real
// clock in production, a fake one in tests and simulations, so that a test
// never sleeps real time.
package clock

import (
	"context"
	"sync"
	"time"
)

// Clock tells the time and waits.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// Sleep waits for d, or until ctx is done, whichever comes first; it
	// returns ctx's error in the second case.
	Sleep(ctx context.Context, d time.Duration) error
}

// Real is the system clock.
type Real struct{}

var _ Clock = Real{}

// Now returns time.Now().
func (Real) Now() time.Time { return time.Now() }

// Sleep waits d of real time, or until ctx is done.
func (Real) Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

// Fake is a clock that moves only by Advance or Sleep. It is safe for
// concurrent use.
type Fake struct {
	mu     sync.Mutex
	now    time.Time
	timers map[*fakeTimer]bool // the WithTimeout contexts not yet done
}

// fakeTimer ends a WithTimeout context once the fake time reaches at.
type fakeTimer struct {
	at     time.Time
	cancel context.CancelCauseFunc
}

var _ Clock = (*Fake)(nil)

// NewFake returns a Fake clock reading now.
func NewFake(now time.Time) *Fake { return &Fake{now: now} }

// Now returns the fake time.
func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// Advance moves the clock forward by d.
func (f *Fake) Advance(d time.Duration) {
	f.mu.Lock()
	f.now = f.now.Add(d)
	var due []context.CancelCauseFunc
	for tm := range f.timers {
		if !tm.at.After(f.now) {
			due = append(due, tm.cancel)
			delete(f.timers, tm)
		}
	}
	f.mu.Unlock()
	for _, cancel := range due {
		cancel(context.DeadlineExceeded)
	}
}

// withTimeout is WithTimeout on the fake time.
func (f *Fake) withTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(ctx)
	if d <= 0 {
		cancel(context.DeadlineExceeded)
		return ctx, func() {}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.timers == nil {
		f.timers = make(map[*fakeTimer]bool)
	}
	tm := &fakeTimer{at: f.now.Add(d), cancel: cancel}
	f.timers[tm] = true
	return ctx, func() {
		f.mu.Lock()
		delete(f.timers, tm)
		f.mu.Unlock()
		cancel(context.Canceled)
	}
}

// Sleep advances the clock by d (if positive) and returns at once, or
// returns ctx's error without advancing it if ctx is already done.
func (f *Fake) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if d > 0 {
		f.Advance(d)
	}
	return nil
}

// WithTimeout returns a copy of ctx that is done once c has moved d on; on
// a Fake it has no Deadline, and context.DeadlineExceeded as its Cause.
func WithTimeout(ctx context.Context, c Clock, d time.Duration) (context.Context, context.CancelFunc) {
	switch c := c.(type) {
	case *Fake:
		return c.withTimeout(ctx, d)
	case Offset:
		return WithTimeout(ctx, c.Base, d)
	}
	return context.WithTimeout(ctx, d)
}

// Offset is a clock that reads Base shifted by By: an instance whose clock
// is off by By (simulations of clock skew). It sleeps on Base.
type Offset struct {
	Base Clock
	By   time.Duration
}

var _ Clock = Offset{}

// Now returns Base's time plus By.
func (o Offset) Now() time.Time { return o.Base.Now().Add(o.By) }

// Sleep sleeps on Base.
func (o Offset) Sleep(ctx context.Context, d time.Duration) error { return o.Base.Sleep(ctx, d) }
