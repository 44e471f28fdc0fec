package localkeys

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"errors"
	"fmt"

	"github.com/example/waitingroom/internal/admissionpass"
)

// Key is a P-256 private key held in memory: for the local server, the
// tools and tests.
type Key struct {
	priv *ecdsa.PrivateKey
}

var _ admissionpass.Key = (*Key)(nil)

// Generate returns a new random P-256 key.
func Generate() (*Key, error) {
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("localkeys: generate key: %w", err)
	}
	return &Key{priv: priv}, nil
}

// NewKey wraps priv, which must be on P-256.
func NewKey(priv *ecdsa.PrivateKey) (*Key, error) {
	if priv == nil || priv.Curve != elliptic.P256() {
		return nil, errors.New("localkeys: the key must be an ECDSA P-256 key")
	}
	return &Key{priv: priv}, nil
}

// PublicKey returns the public half of k.
func (k *Key) PublicKey(context.Context) (*ecdsa.PublicKey, error) { return &k.priv.PublicKey, nil }

// PrivateKey returns k.
func (k *Key) PrivateKey(context.Context) (*ecdsa.PrivateKey, error) { return k.priv, nil }

// fixedKeys is a KeySet of keys that never change, the signing key first.
type fixedKeys []admissionpass.Key

func (f fixedKeys) SigningKey(context.Context) (admissionpass.Key, error)      { return f[0], nil }
func (f fixedKeys) PublishedKeys(context.Context) ([]admissionpass.Key, error) { return f, nil }

// FixedIssuer returns an Issuer whose passes have issuer as their iss,
// signed with signing; others are only published in the JWKS (keys of a
// rotation). An empty issuer works as admissionpass.NewSetIssuer's.
func FixedIssuer(issuer string, signing admissionpass.Key, others ...admissionpass.Key) (*admissionpass.Issuer, error) {
	if signing == nil {
		return nil, errors.New("localkeys: no signing key")
	}
	keys := fixedKeys{signing}
	for _, k := range others {
		if k != nil {
			keys = append(keys, k)
		}
	}
	return admissionpass.NewSetIssuer(issuer, keys), nil
}
