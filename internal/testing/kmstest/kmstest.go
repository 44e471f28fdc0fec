// Package kmstest makes KMS keys for tests on dynamotest's moto_server
// (dynamotest.Moto, whichever DynamoDB API the binary tests on), in packages
// whose TestMain calls dynamotest.Main.
package kmstest

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/kms/types"

	"github.com/example/waitingroom/internal/admissionpass"
	"github.com/example/waitingroom/internal/testing/dynamotest"
	"github.com/example/waitingroom/internal/tools/localkms"
)

// Client returns a KMS client for the tests' moto_server.
func Client(t testing.TB) *kms.Client {
	t.Helper()
	client := ClientFor(t, dynamotest.Moto(t)) // KMS is moto's, whichever DynamoDB API the binary tests
	// moto loads its KMS backend at the first KMS call: make it once, in one patient attempt.
	warm.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), warmUpTimeout)
		defer cancel()
		_, warm.err = client.ListKeys(ctx, &kms.ListKeysInput{}, func(o *kms.Options) {
			o.HTTPClient = &http.Client{Timeout: warmUpTimeout}
			o.RetryMaxAttempts = 1
		})
	})
	if warm.err != nil {
		t.Fatalf("kmstest: first KMS call: %v", warm.err)
	}
	return client
}

// warm is the first KMS call on the test binary's moto_server.
var warm struct {
	sync.Once
	err error
}

// warmUpTimeout is a hang guard on moto's first KMS call.
const warmUpTimeout = 2 * time.Minute

// NewSigningKey creates an ECC_NIST_P256 SIGN_VERIFY key; see createKey.
func NewSigningKey(t testing.TB, client *kms.Client) string {
	t.Helper()
	return createKey(t, client, types.KeySpecEccNistP256, types.KeyUsageTypeSignVerify, "test admission pass key: ")
}

// NewShuffleKey creates the RSA_2048 SIGN_VERIFY shuffle key of template.yaml; see createKey.
func NewShuffleKey(t testing.TB, client *kms.Client) string {
	t.Helper()
	return createKey(t, client, types.KeySpecRsa2048, types.KeyUsageTypeSignVerify, "test shuffle key: ")
}

// createKey creates a key, returns its id, and schedules its deletion when t ends.
func createKey(t testing.TB, client *kms.Client, spec types.KeySpec, usage types.KeyUsageType, description string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := client.CreateKey(ctx, &kms.CreateKeyInput{KeySpec: spec, KeyUsage: usage, Description: aws.String(description + t.Name())})
	if err != nil {
		t.Fatalf("kmstest: create key: %v", err)
	}
	id := aws.ToString(out.KeyMetadata.KeyId)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := client.ScheduleKeyDeletion(ctx, &kms.ScheduleKeyDeletionInput{KeyId: aws.String(id), PendingWindowInDays: aws.Int32(7)}); err != nil {
			t.Logf("kmstest: schedule deletion of %s: %v", id, err)
		}
	})
	return id
}

// Proxy is a localkms.Proxy: it adds kms:GenerateDataKeyPair, which moto lacks.
type Proxy = localkms.Proxy

// NewProxy starts a Proxy in front of the tests' moto_server, closed when t
// ends.
func NewProxy(t testing.TB) *Proxy {
	t.Helper()
	Client(t) // moto's KMS is warm
	p, err := localkms.Start(dynamotest.Moto(t))
	if err != nil {
		t.Fatalf("kmstest: %v", err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// ClientFor returns admissionpass.NewKMSClient for endpoint with attempts of
// a minute, so that a slow moto causes no retry (tests count KMS calls).
func ClientFor(t testing.TB, endpoint string) *kms.Client {
	t.Helper()
	client, err := admissionpass.NewKMSClient(t.Context(), endpoint)
	if err != nil {
		t.Fatalf("kmstest: %v", err)
	}
	return kms.New(client.Options(), func(o *kms.Options) {
		o.HTTPClient = awshttp.NewBuildableClient().WithTimeout(time.Minute)
	})
}

// NewWrapKey creates the SYMMETRIC_DEFAULT ENCRYPT_DECRYPT PassWrapKey of template.yaml; see createKey.
func NewWrapKey(t testing.TB, client *kms.Client) string {
	t.Helper()
	return createKey(t, client, types.KeySpecSymmetricDefault, types.KeyUsageTypeEncryptDecrypt, "test signing key wrapping key: ")
}
