package memstore

import (
	"context"
	"time"

	"github.com/example/waitingroom/internal/queue"
)

// challengeUse is the record of a proof of work used (queue.Store.UseChallenge).
type challengeUse struct {
	owner   string
	expires time.Time
}

// UseChallenge implements queue.Store.
func (s *Store) UseChallenge(ctx context.Context, key, owner string, expires time.Time) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if u, ok := s.challenges[key]; ok && u.owner != owner {
		return queue.ErrConflict
	}
	s.challenges[key] = challengeUse{owner: owner, expires: expires}
	return nil
}

// sweepChallenges deletes the uses past their expiry; s.mu is held.
func (s *Store) sweepChallenges(now time.Time) {
	for key, u := range s.challenges {
		if now.After(u.expires) {
			delete(s.challenges, key)
		}
	}
}
