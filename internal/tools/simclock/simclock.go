// Package simclock provides the clocks of tests and simulations: Fake,
// which moves only when told, Steps, which moves only while everyone it
// waits for sleeps, and Offset, a clock off by a fixed skew.
package simclock

import (
	"context"
	"sync"
	"time"

	"github.com/example/waitingroom/internal/clock"
)

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

var _ clock.Clock = (*Fake)(nil)

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

// WithTimeout is clock.WithTimeout on the fake time: the context has no
// Deadline, and context.DeadlineExceeded as its Cause.
func (f *Fake) WithTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
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

// Offset is a clock that reads Base shifted by By: an instance whose clock
// is off by By (simulations of clock skew). It sleeps on Base.
type Offset struct {
	Base clock.Clock
	By   time.Duration
}

var _ clock.Clock = Offset{}

// Now returns Base's time plus By.
func (o Offset) Now() time.Time { return o.Base.Now().Add(o.By) }

// Sleep sleeps on Base.
func (o Offset) Sleep(ctx context.Context, d time.Duration) error { return o.Base.Sleep(ctx, d) }

// WithTimeout times out on Base.
func (o Offset) WithTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	return clock.WithTimeout(ctx, o.Base, d)
}
