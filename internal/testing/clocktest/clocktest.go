// Package clocktest provides Manual, a clock for tests of concurrent
// scenarios. Import it from _test.go files only.
package clocktest

import (
	"context"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/example/waitingroom/internal/clock"
	"github.com/example/waitingroom/internal/tools/simclock"
)

// Manual is a clock that moves only by Advance: Sleep blocks until it
// reaches the wake time or ctx ends, and BlockUntilContext waits until n
// goroutines sleep, so a test advances time at a chosen step.
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

// Asleep reports whether at least n goroutines sleep on the clock (or
// wait on its timers) now, without waiting.
func (m Manual) Asleep(n int) bool {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return m.BlockUntilContext(ctx, n) == nil
}

// Drive advances the clock by step each time at least n goroutines sleep
// on it, until done is closed or ctx ends, and returns how many times it
// advanced.
func (m Manual) Drive(ctx context.Context, n int, step time.Duration, done <-chan struct{}) (int, error) {
	for k := 0; ; k++ {
		wctx, cancel := context.WithCancel(ctx)
		asleep := make(chan error, 1)
		go func() { asleep <- m.BlockUntilContext(wctx, n) }()
		select {
		case <-done:
			cancel()
			return k, nil
		case err := <-asleep:
			cancel()
			if err != nil {
				return k, err
			}
			m.Advance(step)
		}
	}
}

// Frozen is a clock that moves only when Advance is called: Sleep returns
// at once without moving it, so that goroutines sharing it act at one
// instant until the test moves it. It is safe for concurrent use.
// Unlike a simclock.Fake, its timeouts run on real time.
type Frozen struct{ fake *simclock.Fake }

var _ clock.Clock = (*Frozen)(nil)

// NewFrozen returns a Frozen clock reading at.
func NewFrozen(at time.Time) *Frozen { return &Frozen{simclock.NewFake(at)} }

// Now returns the frozen time.
func (f *Frozen) Now() time.Time { return f.fake.Now() }

// Advance moves the clock forward by d.
func (f *Frozen) Advance(d time.Duration) { f.fake.Advance(d) }

// Sleep returns ctx's error, at once.
func (*Frozen) Sleep(ctx context.Context, _ time.Duration) error { return ctx.Err() }

// Patient is a Frozen clock whose timeouts last a minute of real time,
// whatever they ask: a hang guard in place of a product budget (the
// admin's 3 s), so that a loaded machine does not run that out. Use it
// only where no call waits for the clock to move.
type Patient struct{ *Frozen }

// WithTimeout returns ctx with a real minute's deadline.
func (Patient) WithTimeout(ctx context.Context, _ time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, time.Minute)
}

// MidSlot is the real clock shifted so that it reads the middle of its
// current slot of length slot (slots start at multiples of slot since the
// Unix epoch, as the keyring's do): a test that runs for less than half a
// slot never sees one end, whatever the hour it runs at.
func MidSlot(slot time.Duration) simclock.Offset {
	now := time.Now()
	into := time.Duration(now.UnixMilli()%slot.Milliseconds()) * time.Millisecond
	return simclock.Offset{Base: clock.Real{}, By: slot/2 - into}
}
