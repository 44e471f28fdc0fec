package localkeys

import (
	"bytes"
	"context"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/example/waitingroom/internal/admissionpass"
)

// KeyStore is an admissionpass.KeyStore in this process's memory, safe for concurrent use.
type KeyStore struct {
	mu    sync.Mutex
	slots map[int64]memorySlot // by SignFrom, Unix ms
}

var _ admissionpass.KeyStore = (*KeyStore)(nil)

// memorySlot is a signing slot: the claim of its maker and, once put, its key.
type memorySlot struct {
	claim     string
	claimedAt time.Time
	key       *admissionpass.StoredKey // nil: no key yet
}

// NewKeyStore returns an empty KeyStore.
func NewKeyStore() *KeyStore {
	return &KeyStore{slots: map[int64]memorySlot{}}
}

// locked returns f's results, called with s.mu held, unless ctx is done.
func locked[T any](ctx context.Context, s *KeyStore, f func() (T, error)) (T, error) {
	if err := ctx.Err(); err != nil {
		var zero T
		return zero, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return f()
}

// PassKeys implements admissionpass.KeyStore.
func (s *KeyStore) PassKeys(ctx context.Context) ([]admissionpass.StoredKey, error) {
	return locked(ctx, s, func() ([]admissionpass.StoredKey, error) {
		keys := []admissionpass.StoredKey{}
		for _, ms := range slices.Sorted(maps.Keys(s.slots)) {
			if k := s.slots[ms].key; k != nil {
				keys = append(keys, copyKey(*k))
			}
		}
		return keys, nil
	})
}

// ClaimPassKey implements admissionpass.KeyStore.
func (s *KeyStore) ClaimPassKey(ctx context.Context, signFrom time.Time, claim string, now, staleBefore time.Time) (bool, error) {
	return locked(ctx, s, func() (bool, error) {
		slot, ok := s.slots[signFrom.UnixMilli()]
		if ok && (slot.key != nil || slot.claim != claim && !slot.claimedAt.Before(staleBefore)) {
			return false, nil
		}
		s.slots[signFrom.UnixMilli()] = memorySlot{claim: claim, claimedAt: now}
		return true, nil
	})
}

// PutPassKey implements admissionpass.KeyStore.
func (s *KeyStore) PutPassKey(ctx context.Context, k admissionpass.StoredKey, claim string) (bool, error) {
	return locked(ctx, s, func() (bool, error) {
		slot, ok := s.slots[k.SignFrom.UnixMilli()]
		switch {
		case !ok:
			return false, nil
		case slot.key != nil:
			return slot.key.KeyID == k.KeyID, nil // the same key: a retry
		case slot.claim != claim:
			return false, nil
		}
		k = copyKey(k)
		slot.key = &k
		s.slots[k.SignFrom.UnixMilli()] = slot
		return true, nil
	})
}

// RevokePassKey implements admissionpass.KeyStore.
func (s *KeyStore) RevokePassKey(ctx context.Context, kid string, at time.Time) (admissionpass.StoredKey, error) {
	return locked(ctx, s, func() (admissionpass.StoredKey, error) {
		for _, slot := range s.slots {
			if k := slot.key; k != nil && k.KeyID == kid {
				if k.Revoked.IsZero() {
					k.Revoked = at
				}
				return copyKey(*k), nil
			}
		}
		return admissionpass.StoredKey{}, admissionpass.ErrKeyNotFound
	})
}

// DropExpired deletes the keys whose Expires has passed at now, as a store's TTL does.
func (s *KeyStore) DropExpired(now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	maps.DeleteFunc(s.slots, func(_ int64, slot memorySlot) bool {
		return slot.key != nil && !slot.key.Expires.IsZero() && now.After(slot.key.Expires)
	})
}

func copyKey(k admissionpass.StoredKey) admissionpass.StoredKey {
	k.Public, k.Wrapped = bytes.Clone(k.Public), bytes.Clone(k.Wrapped)
	return k
}
