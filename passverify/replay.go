package passverify

import (
	"cmp"
	"container/heap"
	"context"
	"errors"
	"sync"
	"time"
)

// ReplayGuard remembers the passes a Gate exchanged, so that each is
// exchanged for its cookie once.
type ReplayGuard interface {
	// FirstUse records jti until the instant until and reports whether it
	// was new. An error means nothing could be decided.
	FirstUse(ctx context.Context, jti string, until time.Time) (bool, error)
}

// DefaultMemoryGuardSize is the capacity of a NewMemoryGuard(0).
const DefaultMemoryGuardSize = 100_000

// ErrGuardFull is returned by MemoryGuard.FirstUse when it holds its
// capacity of unexpired passes: it refuses rather than forgets one.
var ErrGuardFull = errors.New("passverify: replay guard full")

// MemoryGuard is a ReplayGuard in memory for a site on one instance; it
// holds at most its capacity of passes and forgets each as it expires.
type MemoryGuard struct {
	max int
	now func() time.Time

	mu     sync.Mutex
	seen   map[string]time.Time
	expiry expiryHeap
}

// NewMemoryGuard returns a MemoryGuard for at most capacity passes at once
// (DefaultMemoryGuardSize when capacity ≤ 0).
func NewMemoryGuard(capacity int) *MemoryGuard {
	capacity = cmp.Or(max(capacity, 0), DefaultMemoryGuardSize)
	return &MemoryGuard{max: capacity, now: time.Now, seen: make(map[string]time.Time)}
}

// FirstUse records jti until until and reports whether it was new.
func (g *MemoryGuard) FirstUse(_ context.Context, jti string, until time.Time) (bool, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.now()
	for len(g.expiry) > 0 && !g.expiry[0].until.After(now) {
		delete(g.seen, heap.Pop(&g.expiry).(seenPass).jti)
	}
	if _, ok := g.seen[jti]; ok {
		return false, nil
	}
	if len(g.seen) >= g.max {
		return false, ErrGuardFull
	}
	g.seen[jti] = until
	heap.Push(&g.expiry, seenPass{jti: jti, until: until})
	return true, nil
}

type seenPass struct {
	jti   string
	until time.Time
}

// expiryHeap orders passes by expiry, soonest first.
type expiryHeap []seenPass

func (h expiryHeap) Len() int           { return len(h) }
func (h expiryHeap) Less(i, j int) bool { return h[i].until.Before(h[j].until) }
func (h expiryHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *expiryHeap) Push(x any)        { *h = append(*h, x.(seenPass)) }
func (h *expiryHeap) Pop() any {
	x := (*h)[len(*h)-1]
	*h = (*h)[:len(*h)-1]
	return x
}
