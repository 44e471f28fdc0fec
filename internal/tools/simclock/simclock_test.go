package simclock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/example/waitingroom/internal/clock"
	"github.com/example/waitingroom/internal/tools/simclock"
)

var t0 = time.Date(2026, 5, 19, 10, 0, 0, 0, time.UTC)

func TestFake(t *testing.T) {
	c := simclock.NewFake(t0)
	start := time.Now()
	if err := c.Sleep(t.Context(), time.Hour); err != nil {
		t.Fatalf("Sleep: %v", err)
	}
	if got, want := c.Now(), t0.Add(time.Hour); !got.Equal(want) {
		t.Errorf("after Sleep(1h): %v, want %v", got, want)
	}
	if real := time.Since(start); real > time.Second {
		t.Errorf("Sleep(1h) on a fake clock took %v of real time", real)
	}
	c.Advance(time.Minute)
	if got, want := c.Now(), t0.Add(time.Hour+time.Minute); !got.Equal(want) {
		t.Errorf("after Advance(1m): %v, want %v", got, want)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := c.Sleep(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Errorf("Sleep on a done context: %v, want context.Canceled", err)
	}
	if got, want := c.Now(), t0.Add(time.Hour+time.Minute); !got.Equal(want) {
		t.Errorf("Sleep on a done context moved the clock to %v", got)
	}
}

func TestOffset(t *testing.T) {
	base := simclock.NewFake(t0)
	for _, by := range []time.Duration{-500 * time.Millisecond, 0, 500 * time.Millisecond} {
		c := simclock.Offset{Base: base, By: by}
		before := base.Now()
		if got, want := c.Now(), before.Add(by); !got.Equal(want) {
			t.Errorf("Offset %v: Now() = %v, want %v", by, got, want)
		}
		if err := c.Sleep(t.Context(), time.Second); err != nil {
			t.Fatalf("Offset %v: Sleep: %v", by, err)
		}
		if got, want := base.Now(), before.Add(time.Second); !got.Equal(want) {
			t.Errorf("Offset %v: Sleep(1s) left the base clock at %v, want %v", by, got, want)
		}
	}
}

// TestWithTimeout: a Fake's timeout ends its context when the fake time
// reaches it (by Advance or Sleep), never on real time, and reports no
// deadline; cancelling first ends it as Canceled; Offset times out on its
// base; the real clock gives a real deadline.
func TestWithTimeout(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	done := func(ctx context.Context) bool { return ctx.Err() != nil }

	f := simclock.NewFake(t0)
	ctx, cancel := clock.WithTimeout(t.Context(), f, time.Second)
	defer cancel()
	if _, ok := ctx.Deadline(); ok {
		t.Error("a fake timeout reports a real deadline")
	}
	f.Advance(999 * time.Millisecond)
	if done(ctx) {
		t.Fatal("done 1 ms before its fake deadline")
	}
	if err := f.Sleep(t.Context(), time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if !done(ctx) || !errors.Is(context.Cause(ctx), context.DeadlineExceeded) {
		t.Errorf("at its fake deadline: err %v, cause %v; want done, DeadlineExceeded", ctx.Err(), context.Cause(ctx))
	}

	early, cancelEarly := clock.WithTimeout(t.Context(), simclock.Offset{Base: f, By: time.Hour}, time.Minute)
	cancelEarly()
	if !errors.Is(context.Cause(early), context.Canceled) {
		t.Errorf("cancelled before its deadline: cause %v, want Canceled", context.Cause(early))
	}
	f.Advance(time.Hour) // fires nothing left behind by the cancel

	onBase, cancelBase := clock.WithTimeout(t.Context(), simclock.Offset{Base: f, By: time.Hour}, time.Minute)
	defer cancelBase()
	f.Advance(time.Minute)
	if !done(onBase) {
		t.Error("an Offset's timeout did not follow its base")
	}
	if now, cancelNow := clock.WithTimeout(t.Context(), f, 0); !done(now) {
		t.Error("a zero timeout is not done at once")
	} else {
		cancelNow()
	}

	real, cancelReal := clock.WithTimeout(t.Context(), clock.Real{}, time.Hour)
	defer cancelReal()
	if d, ok := real.Deadline(); !ok || time.Until(d) < 59*time.Minute {
		t.Errorf("real clock: deadline %v (%v), want an hour from now", d, ok)
	}
}

// TestSteps: the clock stands still while a party works, moves to the
// earliest end once all sleep (waking those due within Batch with it),
// leaves others' sleeps out of the count, and a party whose sleep is
// canceled works again.
func TestSteps(t *testing.T) {
	c := simclock.NewSteps(t0)
	c.Party = func(ctx context.Context) bool { return ctx.Value(stepsKey{}) == nil }
	c.Batch = 20 * time.Millisecond
	// Not a party's sleep, with none working: the clock moves at once.
	if err := c.Sleep(context.WithValue(t.Context(), stepsKey{}, true), time.Minute); err != nil {
		t.Fatal(err)
	}
	start := t0.Add(time.Minute)
	if got := c.Now(); !got.Equal(start) {
		t.Fatalf("after another's sleep: %v, want %v", got, start)
	}
	c.Track(3) // this test, a and b
	woke := make(chan time.Time, 3)
	party := func(d time.Duration) {
		defer c.Track(-1)
		if err := c.Sleep(t.Context(), d); err != nil {
			t.Error(err)
		}
		woke <- c.Now()
	}
	go party(time.Second)
	go party(time.Second + 10*time.Millisecond) // within the batch: wakes with a
	if got := c.Now(); !got.Equal(start) {
		t.Fatalf("the clock moved to %v while this party works", got)
	}
	if err := c.Sleep(t.Context(), 3*time.Second); err != nil { // returns once a and b are done
		t.Fatal(err)
	}
	if got, want := c.Now(), start.Add(3*time.Second); !got.Equal(want) {
		t.Errorf("after the sleep: %v, want %v", got, want)
	}
	for range 2 {
		if got, want := <-woke, start.Add(time.Second); !got.Equal(want) {
			t.Errorf("a party woke at %v, want %v", got, want)
		}
	}
	// A sleep canceled by a working party: this party works again, so the
	// other's sleep waits for its next one.
	ctx, cancel := context.WithCancel(t.Context())
	handled := make(chan struct{})
	c.Track(1)
	go func() {
		cancel()
		<-handled
		party(time.Minute)
	}()
	if err := c.Sleep(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Errorf("canceled sleep: %v", err)
	}
	if got, want := c.Now(), start.Add(3*time.Second); !got.Equal(want) {
		t.Errorf("after the canceled sleep: %v, want %v", got, want)
	}
	close(handled)
	if err := c.Sleep(t.Context(), 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	if got, want := <-woke, start.Add(3*time.Second+time.Minute); !got.Equal(want) {
		t.Errorf("woke at %v, want %v", got, want)
	}
}

type stepsKey struct{}
