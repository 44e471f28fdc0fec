package admissionpass

import (
	"context"
	"crypto/ecdsa"
)

// Key is a P-256 key that signs passes: a keyring's key, or a local one
// (internal/tools/localkeys).
type Key interface {
	// PublicKey returns the key's public half, a P-256 key.
	PublicKey(ctx context.Context) (*ecdsa.PublicKey, error)
	// PrivateKey returns the key's private half, which signs: a
	// keyring's key is opened (through KMS, under ctx) on its first use.
	PrivateKey(ctx context.Context) (*ecdsa.PrivateKey, error)
}
