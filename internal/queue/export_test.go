package queue

import "time"

// IdempotentTokenID exposes idempotentTokenID to the external tests.
var IdempotentTokenID = idempotentTokenID

// CachedPrograms is how many programs s keeps in its program cache.
func (s *Service) CachedPrograms() int {
	s.cache.mu.RLock()
	defer s.cache.mu.RUnlock()
	return len(s.cache.entries)
}

// CacheNotice is the notice s's program cache gives an answer from p at now.
func (s *Service) CacheNotice(p Program, now time.Time) time.Duration { return s.cache.notice(p, now) }

// CachePut caches p as read at now.
func (s *Service) CachePut(p Program, now time.Time) { s.cache.put(p, now) }

// FreedAt exposes Capacity.freedAt.
func (c Capacity) FreedAt(ms int64) int64 { return c.freedAt(ms) }

// ReachMs exposes Capacity.reachMs.
func (c Capacity) ReachMs(n, from int64) (int64, bool) { return c.reachMs(n, from) }

// Pruned exposes pruned.
var Pruned = pruned

// BypassSigners and AdminDeadline expose the bounds of a bypass issuance.
const (
	BypassSigners = bypassSigners
	AdminDeadline = adminDeadline
	// BypassSignBudget bounds the signing of one issuance.
	BypassSignBudget = bypassSignBudget
	// MaxAdminTrials bounds an admin request's optimistic retries.
	MaxAdminTrials = maxAdminTrials
)

// Reserve exposes reserve.
var Reserve = reserve

// HeldAt exposes Reservation.heldAt.
func (r Reservation) HeldAt(ms int64) int64 { return r.heldAt(ms) }
