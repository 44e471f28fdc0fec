// Package localkeys holds admission pass keys without KMS, for the local
// server, the tools and tests: keys in memory and an Issuer of fixed ones,
// a key store in memory, a wrapper whose key lives in this process, PEM key
// files, and the App option that signs passes with them. The Lambdas never
// link it (deps_test.go).
package localkeys

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"

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

// Parse reads a P-256 private key from the first PEM block of data: PKCS#8 ("PRIVATE KEY") or SEC 1 ("EC PRIVATE KEY").
func Parse(data []byte) (*Key, error) {
	block, _ := pem.Decode(data)
	if block == nil {
		return nil, errors.New("localkeys: no PEM block found")
	}
	var priv any
	var err error
	switch block.Type {
	case "PRIVATE KEY":
		priv, err = x509.ParsePKCS8PrivateKey(block.Bytes)
	case "EC PRIVATE KEY":
		priv, err = x509.ParseECPrivateKey(block.Bytes)
	default:
		return nil, fmt.Errorf("localkeys: PEM block %q: want PRIVATE KEY or EC PRIVATE KEY", block.Type)
	}
	if err != nil {
		return nil, fmt.Errorf("localkeys: parse %s: %w", block.Type, err)
	}
	ec, ok := priv.(*ecdsa.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("localkeys: %T is not an ECDSA key", priv)
	}
	return NewKey(ec)
}

// ReadFile reads a key with Parse from the file at path.
func ReadFile(path string) (*Key, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("localkeys: read key: %w", err)
	}
	k, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%w (in %s)", err, path)
	}
	return k, nil
}

// PEM returns k as a PKCS#8 PEM block, which Parse reads back.
func PEM(k *Key) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(k.priv)
	if err != nil {
		return nil, fmt.Errorf("localkeys: marshal key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}
