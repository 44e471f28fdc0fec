// Package clocktest provides Manual, a clock for tests of concurrent
// scenarios. Import it from _test.go files only.
package clocktest

import (
	"context"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/example/waitingroom/internal/clock"
)

// Manual is a clock that moves only when Advance is called; Sleep blocks
// until the clock reaches the sleeper's wake time or ctx ends.
// BlockUntilContext waits until a number of sleepers are asleep, so that a
// test advances time at a chosen step rather than racing the goroutines
// it drives.
type Manual struct{ *clockwork.FakeClock }

var _ clock.Clock = Manual{}

// NewManual returns a Manual clock reading now.
func NewManual(now time.Time) Manual { return Manual{clockwork.NewFakeClockAt(now)} }

// Sleep waits until the clock has been advanced by d, or until ctx is
// done; it returns ctx's error in the second case.
func (m Manual) Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := m.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.Chan():
		return nil
	}
}

// Frozen is a clock that always reads At: Sleep returns at once without
// moving it, so that every goroutine sharing it acts at one instant.
type Frozen struct{ At time.Time }

var _ clock.Clock = Frozen{}

// Now returns At.
func (f Frozen) Now() time.Time { return f.At }

// Sleep returns ctx's error, at once.
func (Frozen) Sleep(ctx context.Context, _ time.Duration) error { return ctx.Err() }
