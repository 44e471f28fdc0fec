// Package clock provides the time the service reads and waits on: the real
// clock in production; tests and simulations inject their own (package
// simclock), so that a test never sleeps real time.
package clock

import (
	"context"
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

// WithTimeout returns a copy of ctx that is done once c has moved d on: a
// clock with a WithTimeout method of its own (a simulated one) times it,
// any other the real timer.
func WithTimeout(ctx context.Context, c Clock, d time.Duration) (context.Context, context.CancelFunc) {
	if t, ok := c.(interface {
		WithTimeout(context.Context, time.Duration) (context.Context, context.CancelFunc)
	}); ok {
		return t.WithTimeout(ctx, d)
	}
	return context.WithTimeout(ctx, d)
}
