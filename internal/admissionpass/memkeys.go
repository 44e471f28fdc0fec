package admissionpass

import (
	"bytes"
	"cmp"
	"context"
	"slices"
	"sync"
	"time"
)

// MemoryKeyStore is a KeyStore in this process's memory: for keys that
// only this process can open (the local server's), for the in-memory
// store and for tests. It is safe for concurrent use.
type MemoryKeyStore struct {
	mu    sync.Mutex
	slots map[int64]memorySlot // by SignFrom, Unix ms
}

var _ KeyStore = (*MemoryKeyStore)(nil)

// memorySlot is a signing slot: the claim of its maker and, once put,
// its key.
type memorySlot struct {
	claim     string
	claimedAt time.Time
	key       *StoredKey // nil: no key yet
}

// NewMemoryKeyStore returns an empty MemoryKeyStore.
func NewMemoryKeyStore() *MemoryKeyStore {
	return &MemoryKeyStore{slots: map[int64]memorySlot{}}
}

// PassKeys implements KeyStore.
func (s *MemoryKeyStore) PassKeys(ctx context.Context) ([]StoredKey, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	keys := make([]StoredKey, 0, len(s.slots))
	for _, slot := range s.slots {
		if slot.key != nil {
			keys = append(keys, copyKey(*slot.key))
		}
	}
	s.mu.Unlock()
	slices.SortFunc(keys, func(a, b StoredKey) int {
		return cmp.Compare(a.SignFrom.UnixMilli(), b.SignFrom.UnixMilli())
	})
	return keys, nil
}

// ClaimPassKey implements KeyStore.
func (s *MemoryKeyStore) ClaimPassKey(ctx context.Context, signFrom time.Time, claim string, now, staleBefore time.Time) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	slot, ok := s.slots[signFrom.UnixMilli()]
	if ok && (slot.key != nil || slot.claim != claim && !slot.claimedAt.Before(staleBefore)) {
		return false, nil
	}
	s.slots[signFrom.UnixMilli()] = memorySlot{claim: claim, claimedAt: now}
	return true, nil
}

// PutPassKey implements KeyStore.
func (s *MemoryKeyStore) PutPassKey(ctx context.Context, k StoredKey, claim string) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
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
}

// RevokePassKey implements KeyStore.
func (s *MemoryKeyStore) RevokePassKey(ctx context.Context, kid string, at time.Time) (StoredKey, error) {
	if err := ctx.Err(); err != nil {
		return StoredKey{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, slot := range s.slots {
		if k := slot.key; k != nil && k.KeyID == kid {
			if k.Revoked.IsZero() {
				k.Revoked = at
			}
			return copyKey(*k), nil
		}
	}
	return StoredKey{}, ErrKeyNotFound
}

// DropExpired deletes the keys whose Expires has passed at now, as a
// store's TTL does.
func (s *MemoryKeyStore) DropExpired(now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for ms, slot := range s.slots {
		if k := slot.key; k != nil && !k.Expires.IsZero() && now.After(k.Expires) {
			delete(s.slots, ms)
		}
	}
}

// copyKey is k with slices of its own.
func copyKey(k StoredKey) StoredKey {
	k.Public, k.Wrapped = bytes.Clone(k.Public), bytes.Clone(k.Wrapped)
	return k
}
