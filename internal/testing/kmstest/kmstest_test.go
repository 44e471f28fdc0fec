package kmstest_test

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/x509"
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/kms/types"
	"github.com/aws/smithy-go"
	"github.com/google/go-cmp/cmp"

	"github.com/example/waitingroom/internal/testing/dynamotest"
	"github.com/example/waitingroom/internal/testing/kmstest"
)

func TestMain(m *testing.M) { dynamotest.Main(m) }

// TestProxyGenerateDataKeyPair: the shim answers GenerateDataKeyPair as
// AWS does, with a blob that moto's own Decrypt opens under the same
// context only, and the proxy counts what it received.
func TestProxyGenerateDataKeyPair(t *testing.T) {
	proxy := kmstest.NewProxy(t)
	client := kmstest.ClientFor(t, proxy.URL())
	keyID := kmstest.NewWrapKey(t, client)
	encCtx := map[string]string{"keyring": "passes"}

	out, err := client.GenerateDataKeyPair(t.Context(), &kms.GenerateDataKeyPairInput{
		KeyId: aws.String(keyID), KeyPairSpec: types.DataKeyPairSpecEccNistP256, EncryptionContext: encCtx,
	})
	if err != nil {
		t.Fatalf("GenerateDataKeyPair: %v", err)
	}
	if arn := aws.ToString(out.KeyId); !strings.HasPrefix(arn, "arn:aws:kms:") || !strings.HasSuffix(arn, ":key/"+keyID) {
		t.Errorf("KeyId %q, want the ARN of %s", arn, keyID)
	}
	if out.KeyPairSpec != types.DataKeyPairSpecEccNistP256 {
		t.Errorf("KeyPairSpec %q, want %q", out.KeyPairSpec, types.DataKeyPairSpecEccNistP256)
	}
	parsed, err := x509.ParsePKCS8PrivateKey(out.PrivateKeyPlaintext)
	if err != nil {
		t.Fatalf("PrivateKeyPlaintext: %v", err)
	}
	priv, ok := parsed.(*ecdsa.PrivateKey)
	if !ok || priv.Curve != elliptic.P256() {
		t.Fatalf("PrivateKeyPlaintext is a %T, want a P-256 key", parsed)
	}
	pub, err := x509.ParsePKIXPublicKey(out.PublicKey)
	if err != nil {
		t.Fatalf("PublicKey: %v", err)
	}
	if !priv.PublicKey.Equal(pub) {
		t.Error("PublicKey is not the public half of PrivateKeyPlaintext")
	}

	dec, err := client.Decrypt(t.Context(), &kms.DecryptInput{
		KeyId: aws.String(keyID), CiphertextBlob: out.PrivateKeyCiphertextBlob, EncryptionContext: encCtx,
	})
	if err != nil {
		t.Fatalf("moto's Decrypt: %v", err)
	}
	if !bytes.Equal(dec.Plaintext, out.PrivateKeyPlaintext) {
		t.Error("moto's Decrypt does not give back PrivateKeyPlaintext")
	}
	_, err = client.Decrypt(t.Context(), &kms.DecryptInput{
		KeyId: aws.String(keyID), CiphertextBlob: out.PrivateKeyCiphertextBlob, EncryptionContext: map[string]string{"keyring": "other"},
	})
	if err == nil {
		t.Error("moto's Decrypt opened the blob under another encryption context")
	}

	got := map[string]int64{}
	for _, op := range []string{"CreateKey", "GenerateDataKeyPair", "Decrypt", "Encrypt"} {
		got[op] = proxy.Calls(op)
	}
	want := map[string]int64{"CreateKey": 1, "GenerateDataKeyPair": 1, "Decrypt": 2, "Encrypt": 0}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("calls by operation (-want +got):\n%s", diff)
	}
	if proxy.Total() != 4 {
		t.Errorf("Total() = %d, want 4", proxy.Total())
	}
}

// TestProxyRefuses: the shim refuses a spec it cannot make, and passes on
// moto's error for an unknown key.
func TestProxyRefuses(t *testing.T) {
	proxy := kmstest.NewProxy(t)
	client := kmstest.ClientFor(t, proxy.URL())
	keyID := kmstest.NewWrapKey(t, client)
	tests := []struct {
		name     string
		keyID    string
		spec     types.DataKeyPairSpec
		wantCode string
	}{
		{"RSA", keyID, types.DataKeyPairSpecRsa2048, "ValidationException"},
		{"unknown key", "0b7e43b5-9c3c-4f3a-8a57-6a4f0e3b1d2c", types.DataKeyPairSpecEccNistP256, "NotFoundException"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := client.GenerateDataKeyPair(t.Context(), &kms.GenerateDataKeyPairInput{KeyId: aws.String(tt.keyID), KeyPairSpec: tt.spec})
			var apiErr smithy.APIError
			if !errors.As(err, &apiErr) || apiErr.ErrorCode() != tt.wantCode {
				t.Errorf("GenerateDataKeyPair: got %v, want a %s", err, tt.wantCode)
			}
		})
	}
}
