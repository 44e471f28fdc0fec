// Package clocktest provides Manual, a clock for tests of concurrent
// scenarios. Import it from _test.go files only.
package clocktest

import (
	"context"
	"sync"
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

// Frozen is a clock that moves only when Advance is called: Sleep returns
// at once without moving it, so that goroutines sharing it act at one
// instant until the test moves it. It is safe for concurrent use.
type Frozen struct {
	mu sync.Mutex
	at time.Time
}

var _ clock.Clock = (*Frozen)(nil)

// NewFrozen returns a Frozen clock reading at.
func NewFrozen(at time.Time) *Frozen { return &Frozen{at: at} }

// Now returns the clock's time.
func (f *Frozen) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.at
}

// Advance moves the clock forward by d.
func (f *Frozen) Advance(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.at = f.at.Add(d)
}

// Sleep returns ctx's error, at once.
func (*Frozen) Sleep(ctx context.Context, _ time.Duration) error { return ctx.Err() }
