// Package await gives tests steps of a concurrent scenario to wait on instead
// of time: a Counter of events and a Barrier. Import it from test code only.
package await

import (
	"context"
	"fmt"
	"sync"
)

// Counter counts events a test waits for; the zero value is ready, and it is
// safe for concurrent use.
type Counter struct {
	mu      sync.Mutex
	n       int
	changed chan struct{} // closed at the next Add; nil if nobody waits
}

// Add counts one event.
func (c *Counter) Add() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n++
	if c.changed != nil {
		close(c.changed)
		c.changed = nil
	}
}

// Count returns the events counted so far.
func (c *Counter) Count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// Wait blocks until n events were counted, or ctx ends.
func (c *Counter) Wait(ctx context.Context, n int) error {
	for {
		c.mu.Lock()
		got := c.n
		if got >= n {
			c.mu.Unlock()
			return nil
		}
		if c.changed == nil {
			c.changed = make(chan struct{})
		}
		ch := c.changed
		c.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("await: %d of %d events: %w", got, n, ctx.Err())
		}
	}
}

// Barrier holds its first N callers of Arrive until all N have arrived;
// later callers pass at once. Its zero value holds nobody.
type Barrier struct {
	N int

	once    sync.Once
	mu      sync.Mutex
	arrived int
	all     chan struct{}
}

// Arrive waits until N callers have arrived, or ctx ends; it reports
// whether the caller was one of the first N.
func (b *Barrier) Arrive(ctx context.Context) (bool, error) {
	b.once.Do(func() { b.all = make(chan struct{}) })
	b.mu.Lock()
	b.arrived++
	first := b.arrived <= b.N
	if b.arrived == b.N {
		close(b.all)
	}
	b.mu.Unlock()
	if !first {
		return false, nil
	}
	select {
	case <-b.all:
		return true, nil
	case <-ctx.Done():
		return true, ctx.Err()
	}
}
