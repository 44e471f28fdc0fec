package admissionpass

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

// ParseLocalKey reads a P-256 private key from the first PEM block of
// data: PKCS#8 ("PRIVATE KEY") or SEC 1 ("EC PRIVATE KEY").
func ParseLocalKey(data []byte) (*LocalKey, error) {
	block, _ := pem.Decode(data)
	if block == nil {
		return nil, errors.New("admissionpass: no PEM block found")
	}
	var priv any
	var err error
	switch block.Type {
	case "PRIVATE KEY":
		priv, err = x509.ParsePKCS8PrivateKey(block.Bytes)
	case "EC PRIVATE KEY":
		priv, err = x509.ParseECPrivateKey(block.Bytes)
	default:
		return nil, fmt.Errorf("admissionpass: PEM block %q: want PRIVATE KEY or EC PRIVATE KEY", block.Type)
	}
	if err != nil {
		return nil, fmt.Errorf("admissionpass: parse %s: %w", block.Type, err)
	}
	ec, ok := priv.(*ecdsa.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("admissionpass: %T is not an ECDSA key", priv)
	}
	return NewLocalKey(ec)
}

// ReadLocalKeyFile reads a key with ParseLocalKey from the file at path.
func ReadLocalKeyFile(path string) (*LocalKey, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("admissionpass: read key: %w", err)
	}
	k, err := ParseLocalKey(data)
	if err != nil {
		return nil, fmt.Errorf("%w (in %s)", err, path)
	}
	return k, nil
}

// PEM returns the private key as a PKCS#8 PEM block, which ParseLocalKey
// reads back.
func (k *LocalKey) PEM() ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(k.priv)
	if err != nil {
		return nil, fmt.Errorf("admissionpass: marshal key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// PublicKey returns the public half of k.
func (k *LocalKey) PublicKey(context.Context) (*ecdsa.PublicKey, error) {
	return &k.priv.PublicKey, nil
}

// PrivateKey returns k.
func (k *LocalKey) PrivateKey(context.Context) (*ecdsa.PrivateKey, error) { return k.priv, nil }
