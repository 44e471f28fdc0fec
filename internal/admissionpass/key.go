package admissionpass

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"errors"
	"fmt"
)

// Key is a P-256 key that signs passes: a LocalKey, or a keyring's key.
type Key interface {
	// PublicKey returns the key's public half, a P-256 key.
	PublicKey(ctx context.Context) (*ecdsa.PublicKey, error)
	// PrivateKey returns the key's private half, which signs: a
	// keyring's key is opened (through KMS, under ctx) on its first use.
	PrivateKey(ctx context.Context) (*ecdsa.PrivateKey, error)
}

// LocalKey is a P-256 private key held in memory: for the local server and
// tests.
type LocalKey struct {
	priv *ecdsa.PrivateKey
}

var _ Key = (*LocalKey)(nil)

// GenerateLocalKey returns a new random P-256 key.
func GenerateLocalKey() (*LocalKey, error) {
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("admissionpass: generate key: %w", err)
	}
	return &LocalKey{priv: priv}, nil
}

// NewLocalKey wraps priv, which must be on P-256.
func NewLocalKey(priv *ecdsa.PrivateKey) (*LocalKey, error) {
	if priv == nil || priv.Curve != elliptic.P256() {
		return nil, errors.New("admissionpass: the key must be an ECDSA P-256 key")
	}
	return &LocalKey{priv: priv}, nil
}

// PublicKey returns the public half of k.
func (k *LocalKey) PublicKey(context.Context) (*ecdsa.PublicKey, error) {
	return &k.priv.PublicKey, nil
}

// PrivateKey returns k.
func (k *LocalKey) PrivateKey(context.Context) (*ecdsa.PrivateKey, error) { return k.priv, nil }
