package clocktest_test

import (
	"context"
	"errors"
	"testing"
	"time"

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
	if err := c.BlockUntilContext(t.Context(), 0); err != nil {
		t.Fatal(err)
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
