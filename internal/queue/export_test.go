package queue

import (
	"context"
	"time"

	"github.com/example/waitingroom/internal/admission"
	"github.com/example/waitingroom/internal/capacity"
)

// IdempotentTokenID exposes idempotentTokenID to the external tests.
var IdempotentTokenID = idempotentTokenID

// CachedPrograms is how many programs s keeps in its program cache.
func (s *Service) CachedPrograms() int {
	return s.cache.Len()
}

// CacheNotice is the notice s's program cache gives an answer from p at now.
func (s *Service) CacheNotice(p admission.Program, now time.Time) time.Duration {
	return s.cache.Notice(p, now)
}

// CachePut caches p as read at now.
func (s *Service) CachePut(p admission.Program, now time.Time) { s.cache.Put(p, now) }

// AdminDeadline bounds an admin request; MaxAdminTrials its optimistic
// retries.
const (
	AdminDeadline  = adminDeadline
	MaxAdminTrials = maxAdminTrials
)

// Fold folds p's capacity at now (capacity.Fold), its step taking effect
// delay later.
func Fold(ctx context.Context, cs capacity.Store, p admission.Program, now time.Time, delay time.Duration) (capacity.Capacity, error) {
	return capacity.Fold(ctx, cs, p.Folding(now), now, delay)
}
