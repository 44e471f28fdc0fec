package clock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/example/waitingroom/internal/clock"
)

func TestReal(t *testing.T) {
	var c clock.Real
	start := time.Now()
	if err := c.Sleep(t.Context(), 20*time.Millisecond); err != nil {
		t.Fatalf("Sleep: %v", err)
	}
	if d := time.Since(start); d < 20*time.Millisecond {
		t.Errorf("Sleep(20ms) returned after %v", d)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Millisecond)
	defer cancel()
	start = time.Now()
	if err := c.Sleep(ctx, time.Hour); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Sleep past the deadline: %v, want context.DeadlineExceeded", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("Sleep past a 10 ms deadline returned after %v", d)
	}
	if now := c.Now(); time.Since(now) > time.Second || time.Until(now) > time.Second {
		t.Errorf("Now() = %v, far from time.Now()", now)
	}
}
