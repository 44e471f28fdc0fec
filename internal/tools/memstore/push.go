package memstore

import (
	"cmp"
	"context"
	"slices"
	"time"

	"github.com/example/waitingroom/internal/admissionpass"
	"github.com/example/waitingroom/internal/queue"
)

var _ queue.PushStore = (*Store)(nil)

// Subscribe implements queue.PushStore.
func (s *Store) Subscribe(ctx context.Context, t queue.Token, sub queue.Subscription) (queue.Token, error) {
	return s.update(ctx, t.ID, func(cur queue.Token) bool {
		return cur.Ticket == t.Ticket && cur.Claim == "" && cur.Pending() && cur.PushTold < queue.PushTurn
	}, func(cur *queue.Token) { cur.Push, cur.PushTries = sub, [3]int8{} })
}

// Unsubscribe implements queue.PushStore.
func (s *Store) Unsubscribe(ctx context.Context, id, endpoint string) error {
	_, err := s.update(ctx, id, func(cur queue.Token) bool { return endpoint == "" || cur.Push.Endpoint == endpoint },
		func(cur *queue.Token) { cur.Push = queue.Subscription{} })
	if err == queue.ErrNotFound {
		return nil
	}
	return err
}

// Subscribed implements queue.PushStore with a scan of every token.
func (s *Store) Subscribed(ctx context.Context, programID string, after, through int64, limit int) ([]queue.PushEntry, bool, error) {
	out, err := locked(ctx, s, func() ([]queue.PushEntry, error) {
		var out []queue.PushEntry
		for id, t := range s.tokens {
			if t.ProgramID == programID && t.Push.Endpoint != "" && t.PushTold < queue.PushTurn && t.Ticket > after && t.Ticket <= through {
				out = append(out, queue.PushEntry{TokenID: id, Ticket: t.Ticket})
			}
		}
		slices.SortFunc(out, func(a, b queue.PushEntry) int { return cmp.Compare(a.Ticket, b.Ticket) })
		return out, nil
	})
	if complete := limit <= 0 || len(out) <= limit; !complete {
		return out[:limit], false, err
	}
	return out, true, err
}

// ClaimPush implements queue.PushStore.
func (s *Store) ClaimPush(ctx context.Context, id string, stage queue.PushStage, owner string, at, staleBefore time.Time) (queue.Token, error) {
	return s.update(ctx, id, func(cur queue.Token) bool {
		free := cur.PushStage < stage || cur.PushStage == stage && (cur.PushOwner == owner || cur.PushedAt.Before(staleBefore))
		return cur.Pending() && cur.Push.Endpoint != "" && cur.PushTold < stage && free && cur.PushTries[stage] < queue.MaxPushTries
	}, func(cur *queue.Token) {
		cur.PushStage, cur.PushOwner, cur.PushedAt = stage, owner, at.Truncate(time.Millisecond)
		cur.PushTries[stage]++
	})
}

// PushTold implements queue.PushStore.
func (s *Store) PushTold(ctx context.Context, id string, stage queue.PushStage, owner string) error {
	_, err := s.update(ctx, id, func(cur queue.Token) bool { return cur.PushOwner == owner && cur.PushStage == stage },
		func(cur *queue.Token) { cur.PushTold = stage })
	if err == queue.ErrNotFound {
		return nil
	}
	return err
}

// VAPIDKey implements notify.KeyStore.
func (s *Store) VAPIDKey(ctx context.Context) (admissionpass.StoredKey, error) {
	return locked(ctx, s, func() (admissionpass.StoredKey, error) {
		if s.vapid == nil {
			return admissionpass.StoredKey{}, queue.ErrNotFound
		}
		return *s.vapid, nil
	})
}

// PutVAPIDKey implements notify.KeyStore.
func (s *Store) PutVAPIDKey(ctx context.Context, k admissionpass.StoredKey) (admissionpass.StoredKey, error) {
	return locked(ctx, s, func() (admissionpass.StoredKey, error) {
		if s.vapid == nil {
			k.Created = k.Created.Truncate(time.Millisecond)
			s.vapid = &k
		}
		return *s.vapid, nil
	})
}
