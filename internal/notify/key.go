package notify

import (
	"context"
	"crypto/ecdsa"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"time"

	"github.com/example/waitingroom/internal/admissionpass"
	"github.com/example/waitingroom/internal/queue"
)

// KeyStore keeps a stack's one VAPID key, made once (dynamostore, memstore).
type KeyStore interface {
	// VAPIDKey returns the stored key; queue.ErrNotFound if none.
	VAPIDKey(ctx context.Context) (admissionpass.StoredKey, error)
	// PutVAPIDKey stores k unless a key is stored, and returns the key stored.
	PutVAPIDKey(ctx context.Context, k admissionpass.StoredKey) (admissionpass.StoredKey, error)
}

// EncryptionPurpose is the KMS encryption context's purpose of the VAPID
// key, which the IAM policies name.
const EncryptionPurpose = "web-push-vapid"

var encryptionContext = map[string]string{"purpose": EncryptionPurpose}

// Key returns the stack's VAPID key, opened by wrap; the first caller
// makes it (a race keeps the first stored).
func Key(ctx context.Context, ks KeyStore, wrap admissionpass.KeyWrapper, now time.Time) (*ecdsa.PrivateKey, error) {
	k, err := ks.VAPIDKey(ctx)
	if errors.Is(err, queue.ErrNotFound) {
		priv, wrapped, err := wrap.NewKeyPair(ctx, encryptionContext)
		if err != nil {
			return nil, fmt.Errorf("notify: make the VAPID key: %w", err)
		}
		pub, err := x509.MarshalPKIXPublicKey(&priv.PublicKey)
		if err != nil {
			return nil, fmt.Errorf("notify: VAPID key: %w", err)
		}
		if k, err = ks.PutVAPIDKey(ctx, admissionpass.StoredKey{Public: pub, Wrapped: wrapped, Created: now}); err != nil {
			return nil, fmt.Errorf("notify: store the VAPID key: %w", err)
		}
		if string(k.Public) == string(pub) {
			return priv, nil
		}
	} else if err != nil {
		return nil, fmt.Errorf("notify: read the VAPID key: %w", err)
	}
	priv, err := wrap.Unwrap(ctx, k.Wrapped, encryptionContext)
	if err != nil {
		return nil, fmt.Errorf("notify: open the VAPID key: %w", err)
	}
	return priv, nil
}

// PublicKey is the stored VAPID key's public half as a page subscribes
// with it (base64url, uncompressed); "" while there is none.
func PublicKey(ctx context.Context, ks KeyStore) (string, error) {
	k, err := ks.VAPIDKey(ctx)
	if errors.Is(err, queue.ErrNotFound) {
		return "", nil
	} else if err != nil {
		return "", fmt.Errorf("notify: read the VAPID key: %w", err)
	}
	pub, err := x509.ParsePKIXPublicKey(k.Public)
	ec, ok := pub.(*ecdsa.PublicKey)
	if err != nil || !ok {
		return "", fmt.Errorf("notify: the stored VAPID key is not an ECDSA key: %v", err)
	}
	return ApplicationServerKey(ec)
}

// ApplicationServerKey is pub as PushManager.subscribe takes it.
func ApplicationServerKey(pub *ecdsa.PublicKey) (string, error) {
	e, err := pub.ECDH()
	if err != nil {
		return "", fmt.Errorf("notify: VAPID key: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(e.Bytes()), nil
}
