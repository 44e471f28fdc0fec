// Package localkeys holds admission pass keys without KMS, for the local server, the tools and tests:
// keys, key stores and a key wrapper in memory, PEM key files, and the App option that signs passes
// with them. The Lambdas never link it (deps_test.go).
package localkeys

import (
	"cmp"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/binary"
	"encoding/pem"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"

	"github.com/example/waitingroom/internal/admissionpass"
	"github.com/example/waitingroom/internal/app"
	"github.com/example/waitingroom/internal/config"
)

// Key is a P-256 private key held in memory.
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

// FixedIssuer returns an Issuer whose passes have issuer as their iss (empty: as admissionpass.NewSetIssuer's),
// signed with signing; others are only published in the JWKS (keys of a rotation).
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

// Wrapper is an admissionpass.KeyWrapper without KMS: it makes P-256 keys and wraps them with
// AES-256-GCM under a random key held in this process's memory only, so only it can unwrap them.
type Wrapper struct {
	aead cipher.AEAD
}

var _ admissionpass.KeyWrapper = (*Wrapper)(nil)

// NewWrapper returns a Wrapper with a new random key.
func NewWrapper() (*Wrapper, error) {
	key := make([]byte, 32)
	_, _ = rand.Read(key) // crypto/rand.Read never fails
	block, err := aes.NewCipher(key)
	var aead cipher.AEAD
	if err == nil {
		aead, err = cipher.NewGCMWithRandomNonce(block)
	}
	if err != nil {
		return nil, fmt.Errorf("localkeys: wrapping key: %w", err)
	}
	return &Wrapper{aead: aead}, nil
}

// NewKeyPair returns a new random P-256 key and its PKCS#8 encoding sealed with encCtx as additional data.
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

// encodeContext serialises an encryption context as additional data: its pairs by key, each string
// prefixed with its length, so that two contexts encode alike only if equal (nil and empty are).
func encodeContext(encCtx map[string]string) []byte {
	var b []byte
	for _, k := range slices.Sorted(maps.Keys(encCtx)) {
		for _, s := range []string{k, encCtx[k]} {
			b = append(binary.AppendUvarint(b, uint64(len(s))), s...)
		}
	}
	return b
}

// PassOption returns the App option that signs passes as p describes: app.PassOption's KMS keyring with
// p.WrapKMSKeyID, else NewIssuer's key files, else a keyring in this process's memory (KeyStore, Wrapper).
// The issuer is p.Issuer else iss; opts go to a keyring.
func PassOption(ctx context.Context, p config.Pass, iss string, opts ...admissionpass.KeyringOption) (app.Option, error) {
	switch {
	case p.WrapKMSKeyID != "":
		return app.PassOption(ctx, p, iss, opts...)
	case p.KeyFile != "":
		i, err := NewIssuer(p, iss)
		if err != nil {
			return nil, err
		}
		return app.WithPasses(i), nil
	}
	wrap, err := NewWrapper()
	if err != nil {
		return nil, err
	}
	// Keys this process alone can open live in its memory, whatever the store (a table outlives it).
	return app.KeyringOf(p, iss, NewKeyStore(), wrap, opts...), nil
}

// NewIssuer returns the issuer of fixed keys p describes: PEM key files, else a P-256 key generated
// now. The issuer is p.Issuer, else iss, else (both empty) each request's base URL.
func NewIssuer(p config.Pass, iss string) (*admissionpass.Issuer, error) {
	if p.KeyFile == "" {
		k, err := Generate()
		if err != nil {
			return nil, err
		}
		return FixedIssuer(cmp.Or(p.Issuer, iss), k)
	}
	signing, err := ReadFile(p.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", config.EnvPassKeyFile, err)
	}
	var others []admissionpass.Key
	if p.PublishedKeyFile != "" {
		k, err := ReadFile(p.PublishedKeyFile)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", config.EnvPassPublishedKeyFile, err)
		}
		others = append(others, k)
	}
	return FixedIssuer(cmp.Or(p.Issuer, iss), signing, others...)
}
