package memstore

import (
	"bytes"
	"cmp"
	"context"
	"slices"
	"time"

	"github.com/example/waitingroom/internal/admissionpass"
)

var _ admissionpass.KeyStore = (*Store)(nil)

// passKeySlot is a signing slot (admissionpass.KeyStore): the claim of
// its maker and, once put, its key.
type passKeySlot struct {
	claim     string
	claimedAt time.Time
	key       *admissionpass.StoredKey // nil: no key yet
}

// PassKeys implements admissionpass.KeyStore.
func (s *Store) PassKeys(ctx context.Context) ([]admissionpass.StoredKey, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	keys := make([]admissionpass.StoredKey, 0, len(s.passKeys))
	for _, slot := range s.passKeys {
		if slot.key != nil {
			keys = append(keys, copyKey(*slot.key))
		}
	}
	s.mu.Unlock()
	slices.SortFunc(keys, func(a, b admissionpass.StoredKey) int {
		return cmp.Compare(a.SignFrom.UnixMilli(), b.SignFrom.UnixMilli())
	})
	return keys, nil
}

// ClaimPassKey implements admissionpass.KeyStore.
func (s *Store) ClaimPassKey(ctx context.Context, signFrom time.Time, claim string, now, staleBefore time.Time) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	slot, ok := s.passKeys[signFrom.UnixMilli()]
	if ok && (slot.key != nil || slot.claim != claim && !slot.claimedAt.Before(staleBefore)) {
		return false, nil
	}
	s.passKeys[signFrom.UnixMilli()] = passKeySlot{claim: claim, claimedAt: now}
	return true, nil
}

// PutPassKey implements admissionpass.KeyStore.
func (s *Store) PutPassKey(ctx context.Context, k admissionpass.StoredKey, claim string) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	slot, ok := s.passKeys[k.SignFrom.UnixMilli()]
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
	s.passKeys[k.SignFrom.UnixMilli()] = slot
	return true, nil
}

// RevokePassKey implements admissionpass.KeyStore.
func (s *Store) RevokePassKey(ctx context.Context, kid string, at time.Time) (admissionpass.StoredKey, error) {
	if err := ctx.Err(); err != nil {
		return admissionpass.StoredKey{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, slot := range s.passKeys {
		if k := slot.key; k != nil && k.KeyID == kid {
			if k.Revoked.IsZero() {
				k.Revoked = at
			}
			return copyKey(*k), nil
		}
	}
	return admissionpass.StoredKey{}, admissionpass.ErrKeyNotFound
}

// sweepPassKeys deletes the keys past their expiry; s.mu is held.
func (s *Store) sweepPassKeys(now time.Time) {
	for ms, slot := range s.passKeys {
		if k := slot.key; k != nil && !k.Expires.IsZero() && now.After(k.Expires) {
			delete(s.passKeys, ms)
		}
	}
}

// copyKey is k with slices of its own.
func copyKey(k admissionpass.StoredKey) admissionpass.StoredKey {
	k.Public, k.Wrapped = bytes.Clone(k.Public), bytes.Clone(k.Wrapped)
	return k
}
