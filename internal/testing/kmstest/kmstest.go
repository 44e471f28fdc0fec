// Package kmstest makes KMS signing keys (admission passes, shuffle
// seeds) for tests on the test binary's
// moto_server, the one internal/testing/dynamotest starts (moto serves
// KMS and DynamoDB on one endpoint). Import it from _test.go files only,
// in a package whose TestMain calls dynamotest.Main.
package kmstest

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/kms/types"

	"github.com/example/waitingroom/internal/admissionpass"
	"github.com/example/waitingroom/internal/testing/dynamotest"
)

// Client returns a KMS client for the test binary's moto_server. Under
// DYNAMODB_TEST_SERVER=dynalite, which has no KMS, it skips t.
func Client(t testing.TB) *kms.Client {
	t.Helper()
	if os.Getenv("DYNAMODB_TEST_SERVER") == "dynalite" {
		t.Skip("kmstest: dynalite has no KMS; run with moto_server")
	}
	client, err := admissionpass.NewKMSClient(t.Context(), dynamotest.Endpoint(t))
	if err != nil {
		t.Fatalf("kmstest: %v", err)
	}
	return client
}

// NewSigningKey creates an asymmetric signing key (KeySpec ECC_NIST_P256,
// KeyUsage SIGN_VERIFY), as template.yaml declares it, returns its id, and
// schedules its deletion when t ends.
func NewSigningKey(t testing.TB, client *kms.Client) string {
	t.Helper()
	return newKey(t, client, types.KeySpecEccNistP256, "test admission pass key: ")
}

// NewShuffleKey creates the key whose signature seeds a shuffled opening
// (KeySpec RSA_2048, KeyUsage SIGN_VERIFY), as template.yaml declares it,
// returns its id, and schedules its deletion when t ends.
func NewShuffleKey(t testing.TB, client *kms.Client) string {
	t.Helper()
	return newKey(t, client, types.KeySpecRsa2048, "test shuffle key: ")
}

func newKey(t testing.TB, client *kms.Client, spec types.KeySpec, description string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := client.CreateKey(ctx, &kms.CreateKeyInput{
		KeySpec:     spec,
		KeyUsage:    types.KeyUsageTypeSignVerify,
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
