package admission

import (
	"sync"
	"time"
)

// ShardView returns the last read of program id if at most one TTL old,
// past its drain instant too: enough to choose where a ticket comes from.
func (c *Cache) ShardView(id string, now time.Time) (Program, bool) {
	c.mu.RLock()
	e, ok := c.entries[id]
	c.mu.RUnlock()
	if !ok || now.Before(e.loadedAt) || !now.Before(e.loadedAt.Add(c.ttl)) {
		return Program{}, false
	}
	return e.p, true
}

// cached is one read of a program kept by Cache.
type cached struct {
	p        Program
	loadedAt time.Time
	until    time.Time // Program.CacheableUntil
}

// Cache keeps recent program reads per function instance; a read never
// replaces a newer version loaded less than two TTLs ago.
type Cache struct {
	ttl     time.Duration // 0: no reuse
	mu      sync.RWMutex
	entries map[string]cached
	sweptAt time.Time
}

// Get returns the cached read of id if usable at now (CacheableUntil).
func (c *Cache) Get(id string, now time.Time) (Program, bool) {
	c.mu.RLock()
	e, ok := c.entries[id]
	c.mu.RUnlock()
	if !ok || !now.Before(e.until) || now.Before(e.loadedAt) {
		return Program{}, false
	}
	return e.p, true
}

// Notice is ChangeNotice for p at now, from the cached read of p's version.
func (c *Cache) Notice(p Program, now time.Time) time.Duration {
	c.mu.RLock()
	e, ok := c.entries[p.ID]
	c.mu.RUnlock()
	if !ok || e.p.Version != p.Version {
		return ChangeNotice(now, now, 0)
	}
	return ChangeNotice(e.loadedAt, now, c.ttl)
}

// Put caches p as read at now (nothing without a TTL), sweeping old entries.
func (c *Cache) Put(p Program, now time.Time) {
	if c.ttl <= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.entries[p.ID]; ok && e.p.Version > p.Version && now.Before(e.loadedAt.Add(2*c.ttl)) {
		return
	}
	if now.Sub(c.sweptAt) >= c.ttl {
		c.sweptAt = now
		for id, e := range c.entries {
			if !now.Before(e.loadedAt.Add(2 * c.ttl)) {
				delete(c.entries, id)
			}
		}
	}
	c.entries[p.ID] = cached{p: p, loadedAt: now, until: p.CacheableUntil(now, c.ttl)}
}

// Forget drops id's cached read.
func (c *Cache) Forget(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.entries, id)
}

// NewCache returns a Cache that reuses a read for up to ttl (0: never).
func NewCache(ttl time.Duration) *Cache {
	return &Cache{ttl: ttl, entries: make(map[string]cached)}
}

// TTL is how long c reuses a read.
func (c *Cache) TTL() time.Duration { return c.ttl }

// Len is how many programs c holds.
func (c *Cache) Len() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.entries)
}

// ChangeNotice is the least time, at now, before an admin change a read at
// readAt does not show could take effect.
func ChangeNotice(readAt, now time.Time, ttl time.Duration) time.Duration {
	if ttl <= 0 {
		return readAt.Sub(now) - AdminWriteBudget
	}
	return readAt.Add(ttl).Sub(now)
}
