package admissionpass

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/x509"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/kms/types"

	"github.com/example/waitingroom/internal/awsconfig"
)

// KMSAPI is the part of the KMS client that KMSKey uses.
type KMSAPI interface {
	Sign(ctx context.Context, in *kms.SignInput, optFns ...func(*kms.Options)) (*kms.SignOutput, error)
	GetPublicKey(ctx context.Context, in *kms.GetPublicKeyInput, optFns ...func(*kms.Options)) (*kms.GetPublicKeyOutput, error)
}

// maxRawMessage is the largest message kms:Sign accepts with MessageType
// RAW.
const maxRawMessage = 4096

// KMSKey is an asymmetric KMS key (KeySpec ECC_NIST_P256, KeyUsage
// SIGN_VERIFY). Its public key is fetched on first use and kept.
type KMSKey struct {
	client KMSAPI
	keyID  string

	mu  sync.Mutex
	pub *ecdsa.PublicKey // nil until fetched
}

var _ Key = (*KMSKey)(nil)

// NewKMSKey returns the KMS key keyID (a key id, ARN or alias) reached
// through client. It calls nothing yet.
func NewKMSKey(client KMSAPI, keyID string) *KMSKey {
	return &KMSKey{client: client, keyID: keyID}
}

// PublicKey returns the key's public half from kms:GetPublicKey, fetched
// on the first successful call and kept; it fails if the key is not an
// ECC_NIST_P256 SIGN_VERIFY key that signs with ECDSA_SHA_256.
func (k *KMSKey) PublicKey(ctx context.Context) (*ecdsa.PublicKey, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.pub != nil {
		return k.pub, nil
	}
	parsed, err := SigningPublicKey(ctx, k.client, k.keyID, types.KeySpecEccNistP256, types.SigningAlgorithmSpecEcdsaSha256)
	if err != nil {
		return nil, fmt.Errorf("admissionpass: %w", err)
	}
	pub, ok := parsed.(*ecdsa.PublicKey)
	if !ok || pub.Curve != elliptic.P256() {
		return nil, fmt.Errorf("admissionpass: KMS key %s: public key is %T, want a P-256 key", k.keyID, parsed)
	}
	k.pub = pub
	return pub, nil
}

// SignASN1 signs message with kms:Sign (ECDSA_SHA_256, MessageType RAW:
// KMS computes the SHA-256).
func (k *KMSKey) SignASN1(ctx context.Context, message []byte) ([]byte, error) {
	if len(message) > maxRawMessage {
		return nil, fmt.Errorf("admissionpass: %d bytes to sign, KMS takes at most %d", len(message), maxRawMessage)
	}
	out, err := k.client.Sign(ctx, &kms.SignInput{
		KeyId:            aws.String(k.keyID),
		Message:          message,
		MessageType:      types.MessageTypeRaw,
		SigningAlgorithm: types.SigningAlgorithmSpecEcdsaSha256,
	})
	if err != nil {
		return nil, fmt.Errorf("admissionpass: kms:Sign %s: %w", k.keyID, err)
	}
	if len(out.Signature) == 0 {
		return nil, errors.New("admissionpass: kms:Sign returned no signature")
	}
	return out.Signature, nil
}

// The KMS client's time budget per call.
const (
	kmsMaxAttempts    = 3
	kmsMaxBackoff     = 200 * time.Millisecond
	kmsAttemptTimeout = time.Second
	// KMSDeadlineReserve: a KMS call whose context has a deadline gives up
	// this long before it (at most a quarter of the time left).
	KMSDeadlineReserve = 500 * time.Millisecond
)

// NewKMSClient returns a KMS client loaded by awsconfig.Load for endpoint
// ("" for AWS), with at most 3 attempts of 1 s each per call and every call
// giving up KMSDeadlineReserve before its context's deadline.
func NewKMSClient(ctx context.Context, endpoint string) (*kms.Client, error) {
	opts := []func(*config.LoadOptions) error{
		config.WithRetryer(func() aws.Retryer {
			return retry.NewStandard(func(so *retry.StandardOptions) {
				so.MaxAttempts = kmsMaxAttempts
				so.MaxBackoff = kmsMaxBackoff
			})
		}),
		config.WithHTTPClient(awshttp.NewBuildableClient().WithTimeout(kmsAttemptTimeout)),
	}
	cfg, err := awsconfig.Load(ctx, endpoint, opts...)
	if err != nil {
		return nil, fmt.Errorf("admissionpass: %w", err)
	}
	return kms.NewFromConfig(cfg, func(o *kms.Options) {
		if endpoint != "" {
			o.BaseEndpoint = aws.String(endpoint)
		}
		o.APIOptions = append(o.APIOptions, awsconfig.ReserveBeforeDeadline(KMSDeadlineReserve))
	}), nil
}

// SigningPublicKey returns the public half of KMS key keyID from
// kms:GetPublicKey, parsed (an *ecdsa.PublicKey or *rsa.PublicKey); it
// fails unless the key is a SIGN_VERIFY key of spec that signs with alg.
func SigningPublicKey(ctx context.Context, client KMSAPI, keyID string, spec types.KeySpec, alg types.SigningAlgorithmSpec) (any, error) {
	out, err := client.GetPublicKey(ctx, &kms.GetPublicKeyInput{KeyId: aws.String(keyID)})
	if err != nil {
		return nil, fmt.Errorf("kms:GetPublicKey %s: %w", keyID, err)
	}
	got := out.KeySpec
	if got == "" {
		//lint:ignore SA1019 moto_server fills only this deprecated twin of KeySpec.
		got = types.KeySpec(out.CustomerMasterKeySpec)
	}
	switch {
	case got != spec:
		return nil, fmt.Errorf("KMS key %s has KeySpec %s, want %s", keyID, got, spec)
	case out.KeyUsage != types.KeyUsageTypeSignVerify:
		return nil, fmt.Errorf("KMS key %s has KeyUsage %s, want %s", keyID, out.KeyUsage, types.KeyUsageTypeSignVerify)
	case !slices.Contains(out.SigningAlgorithms, alg):
		return nil, fmt.Errorf("KMS key %s cannot sign with %s", keyID, alg)
	}
	parsed, err := x509.ParsePKIXPublicKey(out.PublicKey)
	if err != nil {
		return nil, fmt.Errorf("KMS key %s: parse public key: %w", keyID, err)
	}
	return parsed, nil
}
