package kmstest

import (
	"testing"
	"time"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/kms/types"

	"github.com/example/waitingroom/internal/admissionpass"
	"github.com/example/waitingroom/internal/testing/dynamotest"
	"github.com/example/waitingroom/internal/tools/localkms"
)

// Proxy is a localkms.Proxy in front of the test binary's moto_server: it
// adds kms:GenerateDataKeyPair, which moto 5.2 lacks, and counts the
// requests it receives per operation.
type Proxy = localkms.Proxy

// NewProxy starts a Proxy on 127.0.0.1 in front of the test binary's
// moto_server and closes it when t ends. Under DYNAMODB_TEST_SERVER=dynalite,
// which has no KMS, it skips t.
func NewProxy(t testing.TB) *Proxy {
	t.Helper()
	Client(t) // skips under dynalite; moto's KMS is warm
	p, err := localkms.Start(dynamotest.Endpoint(t))
	if err != nil {
		t.Fatalf("kmstest: %v", err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// ClientFor returns a KMS client (admissionpass.NewKMSClient) for endpoint,
// such as a Proxy's URL, whose attempts may take a minute rather than the
// production second: on a busy machine moto can take longer, and a retried
// call would count twice where tests count KMS calls.
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

// NewWrapKey creates a symmetric key (KeySpec SYMMETRIC_DEFAULT, KeyUsage
// ENCRYPT_DECRYPT) that wraps signing keys, as template.yaml declares
// PassWrapKey, returns its id, and schedules its deletion when t ends.
func NewWrapKey(t testing.TB, client *kms.Client) string {
	t.Helper()
	return createKey(t, client, types.KeySpecSymmetricDefault, types.KeyUsageTypeEncryptDecrypt, "test signing key wrapping key: ")
}
