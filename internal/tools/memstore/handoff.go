package memstore

import (
	"context"
	"time"

	"github.com/example/waitingroom/internal/queue"
)

var _ queue.HandoffStore = (*Store)(nil)

// PutHandoff implements queue.HandoffStore.
func (s *Store) PutHandoff(ctx context.Context, h queue.Handoff, t queue.Token, notBefore time.Time) error {
	return s.do(ctx, func() error {
		if cur, ok := s.handoffs[h.Hash]; ok && cur.v.TokenID != h.TokenID {
			return queue.ErrConflict
		}
		s.handoffs[h.Hash] = expiring[queue.Handoff]{h, h.ExpiresAt}
		cur, err := lookup(s.tokens, t.ID)
		if err != nil || !cur.Pending() || cur.HandoffAt.After(notBefore) {
			return queue.ErrConflict
		}
		cur.Handoff, cur.HandoffAt = t.Handoff, t.HandoffAt
		s.tokens[t.ID] = cur
		return nil
	})
}

// GetHandoff implements queue.HandoffStore; like DynamoDB TTL, it returns expired handoffs until Sweep.
func (s *Store) GetHandoff(ctx context.Context, hash string) (queue.Handoff, error) {
	return locked(ctx, s, func() (queue.Handoff, error) {
		h, err := lookup(s.handoffs, hash)
		return h.v, err
	})
}

// MoveToken implements queue.HandoffStore.
func (s *Store) MoveToken(ctx context.Context, t queue.Token) (queue.Token, error) {
	return s.update(ctx, t.ID, func(cur queue.Token) bool { return cur.Pending() && cur.Handoff == t.Handoff },
		func(cur *queue.Token) { cur.MovedTo, cur.MovedAt = t.MovedTo, t.MovedAt })
}
