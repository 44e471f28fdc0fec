package localkeys

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/example/waitingroom/internal/admissionpass"
)

// Wrapper is an admissionpass.KeyWrapper without KMS, for the local
// server and tests: it makes P-256 keys itself and wraps them with AES-256-GCM under a
// random key that it holds in memory only, so only it can unwrap them.
type Wrapper struct {
	aead cipher.AEAD
}

var _ admissionpass.KeyWrapper = (*Wrapper)(nil)

// NewWrapper returns a Wrapper with a new random key.
func NewWrapper() (*Wrapper, error) {
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, fmt.Errorf("localkeys: wrapping key: %w", err)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("localkeys: wrapping key: %w", err)
	}
	aead, err := cipher.NewGCMWithRandomNonce(block)
	if err != nil {
		return nil, fmt.Errorf("localkeys: wrapping key: %w", err)
	}
	return &Wrapper{aead: aead}, nil
}

// NewKeyPair returns a new random P-256 key and its PKCS#8 encoding sealed
// with encCtx as additional data.
func (w *Wrapper) NewKeyPair(ctx context.Context, encCtx map[string]string) (*ecdsa.PrivateKey, []byte, error) {
	k, err := Generate()
	if err != nil {
		return nil, nil, err
	}
	der, err := x509.MarshalPKCS8PrivateKey(k.priv)
	if err != nil {
		return nil, nil, fmt.Errorf("localkeys: marshal key: %w", err)
	}
	defer clear(der)
	return k.priv, w.aead.Seal(nil, nil, der, encodeContext(encCtx)), nil
}

// Unwrap opens wrapped, which this wrapper must have sealed under encCtx.
func (w *Wrapper) Unwrap(ctx context.Context, wrapped []byte, encCtx map[string]string) (*ecdsa.PrivateKey, error) {
	der, err := w.aead.Open(nil, nil, wrapped, encodeContext(encCtx))
	if err != nil {
		return nil, errors.New("localkeys: unwrap: not a key this wrapper wrapped under this encryption context")
	}
	defer clear(der)
	// It sealed only P-256 keys of its own making.
	parsed, err := x509.ParsePKCS8PrivateKey(der)
	if err != nil {
		return nil, fmt.Errorf("localkeys: unwrap: %w", err)
	}
	return parsed.(*ecdsa.PrivateKey), nil
}

// encodeContext serialises an encryption context as additional data: its
// pairs by key, each key and value prefixed with its length, so that two
// contexts encode alike only if they are equal (nil and empty are).
func encodeContext(encCtx map[string]string) []byte {
	var b []byte
	for _, k := range slices.Sorted(maps.Keys(encCtx)) {
		b = binary.AppendUvarint(b, uint64(len(k)))
		b = append(b, k...)
		b = binary.AppendUvarint(b, uint64(len(encCtx[k])))
		b = append(b, encCtx[k]...)
	}
	return b
}
