package admissionpass

import (
	"context"
	"crypto/ecdsa"
	"errors"
	"time"
)

// Key is a P-256 key that signs passes: a keyring's key, or a local one
// (internal/tools/localkeys).
type Key interface {
	// PublicKey returns the key's public half, a P-256 key.
	PublicKey(ctx context.Context) (*ecdsa.PublicKey, error)
	// PrivateKey returns the key's private half, which signs, opened on first use.
	PrivateKey(ctx context.Context) (*ecdsa.PrivateKey, error)
}

// StoredKey is one signing key of a keyring as its store keeps it
// (docs/design.md, "Pass signing keys").
type StoredKey struct {
	// SignFrom is when the key starts signing, and its slot: a store
	// holds at most one key per SignFrom (to the millisecond).
	SignFrom time.Time
	KeyID    string // the RFC 7638 thumbprint of the public key
	Public   []byte // PKIX DER
	Wrapped  []byte // the private key (PKCS#8 DER) as KMS encrypted it
	// Created is when the key was made; Revoked when it was revoked (zero:
	// not); Expires when the store may forget it (its TTL).
	Created, Revoked, Expires time.Time
}

// KeyStore keeps a keyring's keys. MemoryKeyStore, memstore and
// dynamostore implement it; storetest.PassKeys holds its contract.
type KeyStore interface {
	// PassKeys returns every stored key (not the bare claims), oldest SignFrom first.
	PassKeys(ctx context.Context) ([]StoredKey, error)
	// ClaimPassKey makes claim, at now, the maker of slot signFrom's key if the slot holds
	// no key and no other claim made at or after staleBefore (the same claim wins again).
	ClaimPassKey(ctx context.Context, signFrom time.Time, claim string, now, staleBefore time.Time) (bool, error)
	// PutPassKey stores k in its slot if claim still holds it; true also when the slot holds
	// k already (a retry), false when it holds another key or another claim.
	PutPassKey(ctx context.Context, k StoredKey, claim string) (bool, error)
	// RevokePassKey marks the key kid revoked at at (a second revoke keeps the first
	// instant) and returns it; ErrKeyNotFound when no key has that kid.
	RevokePassKey(ctx context.Context, kid string, at time.Time) (StoredKey, error)
}

// ErrKeyNotFound is KeyStore.RevokePassKey's error for an unknown kid.
var ErrKeyNotFound = errors.New("admissionpass: no such signing key")

// KeyWrapper makes signing keys and wraps their private half under a key it never reveals.
type KeyWrapper interface {
	// NewKeyPair returns a new P-256 key and its private half wrapped under encCtx.
	NewKeyPair(ctx context.Context, encCtx map[string]string) (*ecdsa.PrivateKey, []byte, error)
	// Unwrap returns the private key wrapped under encCtx.
	Unwrap(ctx context.Context, wrapped []byte, encCtx map[string]string) (*ecdsa.PrivateKey, error)
}
