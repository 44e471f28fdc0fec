// Package shufflekey holds the RSA key whose signature seeds a shuffled
// opening: a KMSKey on AWS, a LocalKey locally and in tests. Both sign with
// RSASSA-PKCS1-v1_5 over SHA-256, so one message has one signature.
package shufflekey

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"errors"
	"fmt"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/kms/types"

	"github.com/example/waitingroom/internal/admissionpass"
)

// Bits is the size of the key: KMS's RSA_2048.
const Bits = 2048

// LocalKey is an RSA private key held in memory.
type LocalKey struct{ priv *rsa.PrivateKey }

// GenerateLocalKey returns a new random 2048-bit RSA key.
func GenerateLocalKey() (*LocalKey, error) {
	priv, err := rsa.GenerateKey(rand.Reader, Bits)
	if err != nil {
		return nil, fmt.Errorf("shufflekey: generate key: %w", err)
	}
	return &LocalKey{priv: priv}, nil
}

// PublicKey returns the public half of k.
func (k *LocalKey) PublicKey(context.Context) (*rsa.PublicKey, error) { return &k.priv.PublicKey, nil }

// SignPKCS1v15 signs SHA-256(message) with RSASSA-PKCS1-v1_5.
func (k *LocalKey) SignPKCS1v15(_ context.Context, message []byte) ([]byte, error) {
	digest := sha256.Sum256(message)
	return rsa.SignPKCS1v15(nil, k.priv, crypto.SHA256, digest[:])
}

// KMSKey is an asymmetric KMS key (KeySpec RSA_2048, KeyUsage
// SIGN_VERIFY). Its public key is fetched on first use and kept.
type KMSKey struct {
	client admissionpass.KMSAPI
	keyID  string

	mu  sync.Mutex
	pub *rsa.PublicKey
}

// NewKMSKey returns the KMS key keyID (id, ARN or alias) through client.
func NewKMSKey(client admissionpass.KMSAPI, keyID string) *KMSKey {
	return &KMSKey{client: client, keyID: keyID}
}

// PublicKey returns the key's public half from kms:GetPublicKey, if it is
// an RSA_2048 key signing with RSASSA_PKCS1_V1_5_SHA_256.
func (k *KMSKey) PublicKey(ctx context.Context) (*rsa.PublicKey, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.pub != nil {
		return k.pub, nil
	}
	parsed, err := admissionpass.SigningPublicKey(ctx, k.client, k.keyID, types.KeySpecRsa2048, types.SigningAlgorithmSpecRsassaPkcs1V15Sha256)
	if err != nil {
		return nil, fmt.Errorf("shufflekey: %w", err)
	}
	pub, ok := parsed.(*rsa.PublicKey)
	if !ok {
		return nil, fmt.Errorf("shufflekey: KMS key %s: public key is %T, want RSA", k.keyID, parsed)
	}
	k.pub = pub
	return pub, nil
}

// SignPKCS1v15 signs message with kms:Sign (RSASSA_PKCS1_V1_5_SHA_256,
// MessageType RAW: KMS computes the SHA-256).
func (k *KMSKey) SignPKCS1v15(ctx context.Context, message []byte) ([]byte, error) {
	out, err := k.client.Sign(ctx, &kms.SignInput{
		KeyId:            aws.String(k.keyID),
		Message:          message,
		MessageType:      types.MessageTypeRaw,
		SigningAlgorithm: types.SigningAlgorithmSpecRsassaPkcs1V15Sha256,
	})
	if err != nil {
		return nil, fmt.Errorf("shufflekey: kms:Sign %s: %w", k.keyID, err)
	}
	if len(out.Signature) == 0 {
		return nil, errors.New("shufflekey: kms:Sign returned no signature")
	}
	return out.Signature, nil
}
