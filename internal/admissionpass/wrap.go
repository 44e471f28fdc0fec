package admissionpass

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/x509"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/kms/types"
)

// KMSWrapAPI is the part of the KMS client that KMSWrapper uses.
type KMSWrapAPI interface {
	GenerateDataKeyPair(ctx context.Context, in *kms.GenerateDataKeyPairInput, optFns ...func(*kms.Options)) (*kms.GenerateDataKeyPairOutput, error)
	Decrypt(ctx context.Context, in *kms.DecryptInput, optFns ...func(*kms.Options)) (*kms.DecryptOutput, error)
}

// KMSWrapper is a KeyWrapper whose key pairs KMS makes under a symmetric KMS key, which
// alone unwraps them.
type KMSWrapper struct {
	client KMSWrapAPI
	keyID  string
}

var _ KeyWrapper = (*KMSWrapper)(nil)

// NewKMSWrapper returns the wrapper of the symmetric KMS key keyID (id, ARN or alias).
func NewKMSWrapper(client KMSWrapAPI, keyID string) *KMSWrapper {
	return &KMSWrapper{client: client, keyID: keyID}
}

// NewKeyPair returns a P-256 key from kms:GenerateDataKeyPair and its private half as KMS
// wrapped it under encCtx, checking that both halves match.
func (w *KMSWrapper) NewKeyPair(ctx context.Context, encCtx map[string]string) (*ecdsa.PrivateKey, []byte, error) {
	out, err := w.client.GenerateDataKeyPair(ctx, &kms.GenerateDataKeyPairInput{
		KeyId:             aws.String(w.keyID),
		KeyPairSpec:       types.DataKeyPairSpecEccNistP256,
		EncryptionContext: encCtx,
	})
	if err != nil {
		return nil, nil, w.errorf("GenerateDataKeyPair", "%w", err)
	}
	defer clear(out.PrivateKeyPlaintext)
	priv, err := parseP256PKCS8(out.PrivateKeyPlaintext)
	pub, perr := x509.ParsePKIXPublicKey(out.PublicKey)
	switch {
	case err != nil:
		return nil, nil, w.errorf("GenerateDataKeyPair", "private key: %w", err)
	case perr != nil:
		return nil, nil, w.errorf("GenerateDataKeyPair", "parse public key: %w", perr)
	case !priv.PublicKey.Equal(pub):
		return nil, nil, w.errorf("GenerateDataKeyPair", "the public key does not match the private key")
	case len(out.PrivateKeyCiphertextBlob) == 0:
		return nil, nil, w.errorf("GenerateDataKeyPair", "no wrapped private key")
	}
	return priv, out.PrivateKeyCiphertextBlob, nil
}

// Unwrap returns the private key of wrapped from kms:Decrypt, pinned to the wrapper's KMS
// key and to encCtx.
func (w *KMSWrapper) Unwrap(ctx context.Context, wrapped []byte, encCtx map[string]string) (*ecdsa.PrivateKey, error) {
	out, err := w.client.Decrypt(ctx, &kms.DecryptInput{
		KeyId:             aws.String(w.keyID),
		CiphertextBlob:    wrapped,
		EncryptionContext: encCtx,
	})
	if err != nil {
		return nil, w.errorf("Decrypt", "%w", err)
	}
	defer clear(out.Plaintext)
	priv, err := parseP256PKCS8(out.Plaintext)
	if err != nil {
		return nil, w.errorf("Decrypt", "private key: %w", err)
	}
	return priv, nil
}

// errorf is an error of the KMS call op on the wrapper's key.
func (w *KMSWrapper) errorf(op, format string, args ...any) error {
	return fmt.Errorf("admissionpass: kms:%s %s: %w", op, w.keyID, fmt.Errorf(format, args...))
}

// parseP256PKCS8 parses der, a PKCS#8 ECDSA P-256 private key; its errors never quote der.
func parseP256PKCS8(der []byte) (*ecdsa.PrivateKey, error) {
	parsed, err := x509.ParsePKCS8PrivateKey(der)
	if err != nil {
		return nil, errors.New("not a PKCS#8 private key")
	}
	priv, ok := parsed.(*ecdsa.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("%T, want an ECDSA P-256 key", parsed)
	}
	if priv.Curve != elliptic.P256() {
		return nil, fmt.Errorf("ECDSA key on %s, want P-256", priv.Curve.Params().Name)
	}
	return priv, nil
}
