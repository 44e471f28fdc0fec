package await_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/example/waitingroom/internal/testing/await"
)

func TestCounter(t *testing.T) {
	var c await.Counter
	done := make(chan error, 1)
	go func() { done <- c.Wait(t.Context(), 3) }()
	for range 3 {
		select {
		case err := <-done:
			t.Fatalf("Wait returned (%v) after %d events, want after 3", err, c.Count())
		default:
		}
		c.Add()
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := c.Wait(ctx, 4); !errors.Is(err, context.Canceled) {
		t.Errorf("Wait(4) on a done context: %v", err)
	}
	if err := c.Wait(ctx, 3); err != nil {
		t.Errorf("Wait(3) after 3 events: %v", err)
	}
}

func TestBarrier(t *testing.T) {
	b := &await.Barrier{N: 4}
	var mu sync.Mutex
	passed := 0
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			if first, err := b.Arrive(t.Context()); !first || err != nil {
				t.Errorf("Arrive: %v %v, want one of the first, nil", first, err)
			}
			mu.Lock()
			passed++
			mu.Unlock()
		})
	}
	// Three wait; nobody has passed. The fourth lets all through.
	mu.Lock()
	if passed != 0 {
		t.Errorf("%d passed before the fourth arrived", passed)
	}
	mu.Unlock()
	if first, err := b.Arrive(t.Context()); !first || err != nil {
		t.Fatalf("fourth: %v %v", first, err)
	}
	wg.Wait()
	if first, err := b.Arrive(t.Context()); first || err != nil {
		t.Errorf("fifth: %v %v, want a later caller passing at once", first, err)
	}
}
