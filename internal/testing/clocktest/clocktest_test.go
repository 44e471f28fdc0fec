package clocktest_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/example/waitingroom/internal/clock"
	"github.com/example/waitingroom/internal/testing/clocktest"
)

var t0 = time.Date(2026, 5, 19, 10, 0, 0, 0, time.UTC)

// TestManual: a sleeper wakes only once the clock is advanced to its wake
// time, the test can wait until it sleeps, and a done context ends the
// sleep without moving the clock or leaving a sleeper.
func TestManual(t *testing.T) {
	c := clocktest.NewManual(t0)
	woke := make(chan error, 1)
	go func() { woke <- c.Sleep(t.Context(), time.Second) }()
	if err := c.BlockUntilContext(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	c.Advance(999 * time.Millisecond)
	select {
	case err := <-woke:
		t.Fatalf("woke at +999ms (%v), want at +1s", err)
	default:
	}
	c.Advance(time.Millisecond)
	if err := <-woke; err != nil {
		t.Fatalf("Sleep: %v", err)
	}
	if got, want := c.Now(), t0.Add(time.Second); !got.Equal(want) {
		t.Errorf("Now() = %v, want %v", got, want)
	}
	ctx, cancel := context.WithCancel(t.Context())
	go func() { woke <- c.Sleep(ctx, time.Hour) }()
	if err := c.BlockUntilContext(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := <-woke; !errors.Is(err, context.Canceled) {
		t.Errorf("Sleep with its context canceled: %v, want context.Canceled", err)
	}
	if c.Asleep(1) {
		t.Error("a canceled Sleep left a sleeper")
	}
	if !c.Now().Equal(t0.Add(time.Second)) {
		t.Errorf("a canceled Sleep moved the clock to %v", c.Now())
	}
	if err := c.Sleep(t.Context(), 0); err != nil {
		t.Errorf("Sleep(0): %v", err)
	}
}

// TestFrozen: the clock moves only when advanced, not when slept on.
func TestFrozen(t *testing.T) {
	c := clocktest.NewFrozen(t0)
	if err := c.Sleep(t.Context(), time.Hour); err != nil || !c.Now().Equal(t0) {
		t.Errorf("after Sleep(1h): %v, %v; want %v, nil", c.Now(), err, t0)
	}
	c.Advance(time.Second)
	if got := c.Now(); !got.Equal(t0.Add(time.Second)) {
		t.Errorf("after Advance(1s): %v", got)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := c.Sleep(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Errorf("Sleep on a done context: %v", err)
	}
}

// TestDrive: Drive advances the clock each time the driven goroutine
// sleeps on it, until it is done.
func TestDrive(t *testing.T) {
	c := clocktest.NewManual(t0)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 3 {
			if err := c.Sleep(t.Context(), 100*time.Millisecond); err != nil {
				t.Error(err)
			}
		}
	}()
	n, err := c.Drive(t.Context(), 1, 100*time.Millisecond, done)
	if err != nil || n != 3 {
		t.Errorf("Drive = %d, %v; want 3 advances", n, err)
	}
	if got := c.Now().Sub(t0); got != 300*time.Millisecond {
		t.Errorf("the clock moved %v, want 300ms", got)
	}
}

// TestMidSlot: the shifted clock reads half a slot into its slot, and
// moves as the real one does.
func TestMidSlot(t *testing.T) {
	for _, slot := range []time.Duration{time.Hour, 24 * time.Hour} {
		c := clocktest.MidSlot(slot)
		ms := c.Now().UnixMilli() % slot.Milliseconds()
		if into := time.Duration(ms) * time.Millisecond; into < slot/2 || into > slot/2+time.Minute {
			t.Errorf("slot %v: %v into the slot, want about %v", slot, into, slot/2)
		}
		if c.Base != (clock.Real{}) {
			t.Errorf("slot %v: base %v, want the real clock", slot, c.Base)
		}
	}
}
