package admissionpass

import (
	"context"
	"crypto/x509"
	"fmt"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/kms/types"

	"github.com/example/waitingroom/internal/awsconfig"
)

// KMSAPI is the part of the KMS client that signs with an asymmetric KMS key.
type KMSAPI interface {
	Sign(ctx context.Context, in *kms.SignInput, optFns ...func(*kms.Options)) (*kms.SignOutput, error)
	GetPublicKey(ctx context.Context, in *kms.GetPublicKeyInput, optFns ...func(*kms.Options)) (*kms.GetPublicKeyOutput, error)
}

// KMSDeadlineReserve is how long before its context's deadline a KMS call gives up.
const KMSDeadlineReserve = 500 * time.Millisecond

// NewKMSClient returns a KMS client for endpoint ("" for AWS): at most 3 attempts of 1 s
// each per call, each call giving up KMSDeadlineReserve before its deadline.
func NewKMSClient(ctx context.Context, endpoint string) (*kms.Client, error) {
	cfg, err := awsconfig.Load(ctx, endpoint,
		config.WithRetryer(func() aws.Retryer {
			return retry.NewStandard(func(so *retry.StandardOptions) {
				so.MaxAttempts = 3
				so.MaxBackoff = 200 * time.Millisecond
			})
		}),
		config.WithHTTPClient(awshttp.NewBuildableClient().WithTimeout(time.Second)))
	if err != nil {
		return nil, fmt.Errorf("admissionpass: %w", err)
	}
	return kms.NewFromConfig(cfg, func(o *kms.Options) {
		o.APIOptions = append(o.APIOptions, awsconfig.ReserveBeforeDeadline(KMSDeadlineReserve))
	}), nil
}

// SigningPublicKey returns the parsed public half of KMS key keyID; it fails unless the key
// is a SIGN_VERIFY key of spec that signs with alg.
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
