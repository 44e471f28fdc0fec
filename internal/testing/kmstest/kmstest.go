// Package kmstest makes KMS keys (admission passes, shuffle seeds, the
// wrapping of signing keys) for tests on the test binary's moto_server, the
// one internal/testing/dynamotest starts (moto serves KMS and DynamoDB on
// one endpoint). Its Proxy (internal/tools/localkms) adds kms:GenerateDataKeyPair,
// which moto lacks.
// Import it from _test.go files only, in a package whose TestMain calls
// dynamotest.Main.
package kmstest

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/kms/types"

	"github.com/example/waitingroom/internal/testing/dynamotest"
)

// Client returns a KMS client for the test binary's moto_server. Under
// DYNAMODB_TEST_SERVER=dynalite, which has no KMS, it skips t.
func Client(t testing.TB) *kms.Client {
	t.Helper()
	if os.Getenv("DYNAMODB_TEST_SERVER") == "dynalite" {
		t.Skip("kmstest: dynalite has no KMS; run with moto_server")
	}
	client := ClientFor(t, dynamotest.Endpoint(t))
	warm.Do(func() { warm.err = warmUp(client) })
	if warm.err != nil {
		t.Fatalf("kmstest: %v", warm.err)
	}
	return client
}

// warm is the first KMS call on the test binary's moto_server.
var warm struct {
	sync.Once
	err error
}

// warmUpTimeout bounds moto's first KMS call: a hang guard.
const warmUpTimeout = 2 * time.Minute

// warmUp makes moto's first KMS call with a patient attempt: moto loads its
// KMS backend on the first call, which takes seconds, and on a busy
// machine longer than NewKMSClient gives an attempt (1 s, 3 attempts).
func warmUp(client *kms.Client) error {
	ctx, cancel := context.WithTimeout(context.Background(), warmUpTimeout)
	defer cancel()
	_, err := client.ListKeys(ctx, &kms.ListKeysInput{}, func(o *kms.Options) {
		o.HTTPClient = &http.Client{Timeout: warmUpTimeout}
		o.RetryMaxAttempts = 1
	})
	if err != nil {
		return fmt.Errorf("first KMS call: %w", err)
	}
	return nil
}

// NewSigningKey creates an asymmetric signing key (KeySpec ECC_NIST_P256,
// KeyUsage SIGN_VERIFY), a key of the wrong kind for the shuffle, returns
// its id, and schedules its deletion when t ends.
func NewSigningKey(t testing.TB, client *kms.Client) string {
	t.Helper()
	return createKey(t, client, types.KeySpecEccNistP256, types.KeyUsageTypeSignVerify, "test admission pass key: ")
}

// NewShuffleKey creates the key whose signature seeds a shuffled opening
// (KeySpec RSA_2048, KeyUsage SIGN_VERIFY), as template.yaml declares it,
// returns its id, and schedules its deletion when t ends.
func NewShuffleKey(t testing.TB, client *kms.Client) string {
	t.Helper()
	return createKey(t, client, types.KeySpecRsa2048, types.KeyUsageTypeSignVerify, "test shuffle key: ")
}

// createKey creates a key of spec and usage, returns its id, and schedules
// its deletion when t ends.
func createKey(t testing.TB, client *kms.Client, spec types.KeySpec, usage types.KeyUsageType, description string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := client.CreateKey(ctx, &kms.CreateKeyInput{
		KeySpec:     spec,
		KeyUsage:    usage,
		Description: aws.String(description + t.Name()),
	})
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
