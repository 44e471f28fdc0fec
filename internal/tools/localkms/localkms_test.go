package localkms_test

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/x509"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/kms/types"
	"github.com/aws/smithy-go"

	"github.com/example/waitingroom/internal/admissionpass"
	"github.com/example/waitingroom/internal/tools/localkms"
)

// fakeKMS answers Encrypt with the plaintext reversed as the blob (its
// encryption context recorded), ListKeys with no keys, and anything else
// with NotFoundException. (The tests against moto are kmstest's.)
type fakeKMS struct {
	encCtx map[string]string
}

func (f *fakeKMS) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	switch r.Header.Get("X-Amz-Target") {
	case "TrentService.Encrypt":
		var in struct {
			KeyId             string
			Plaintext         []byte
			EncryptionContext map[string]string
		}
		_ = json.NewDecoder(r.Body).Decode(&in)
		f.encCtx = in.EncryptionContext
		blob := bytes.Clone(in.Plaintext)
		for i, j := 0, len(blob)-1; i < j; i, j = i+1, j-1 {
			blob[i], blob[j] = blob[j], blob[i]
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"KeyId": "arn:aws:kms:us-east-1:123456789012:key/" + in.KeyId, "CiphertextBlob": blob})
	case "TrentService.ListKeys":
		_, _ = io.WriteString(w, `{"Keys":[]}`)
	default:
		w.WriteHeader(http.StatusBadRequest)
		_, _ = io.WriteString(w, `{"__type":"NotFoundException","message":"no such key"}`)
	}
}

func start(t *testing.T, upstream string) (*localkms.Proxy, *kms.Client) {
	t.Helper()
	p, err := localkms.Start(upstream)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	client, err := admissionpass.NewKMSClient(t.Context(), p.URL())
	if err != nil {
		t.Fatal(err)
	}
	return p, client
}

// TestGenerateDataKeyPair: the shim makes a P-256 pair, wraps its private
// half with the upstream's Encrypt under the request's context, forwards
// the rest, and counts every request.
func TestGenerateDataKeyPair(t *testing.T) {
	fake := &fakeKMS{}
	upstream := httptest.NewServer(fake)
	defer upstream.Close()
	p, client := start(t, upstream.URL)
	encCtx := map[string]string{"purpose": admissionpass.EncryptionPurpose}

	out, err := client.GenerateDataKeyPair(t.Context(), &kms.GenerateDataKeyPairInput{
		KeyId: aws.String("k1"), KeyPairSpec: types.DataKeyPairSpecEccNistP256, EncryptionContext: encCtx,
	})
	if err != nil {
		t.Fatalf("GenerateDataKeyPair: %v", err)
	}
	priv, err := x509.ParsePKCS8PrivateKey(out.PrivateKeyPlaintext)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := x509.ParsePKIXPublicKey(out.PublicKey)
	if err != nil || !priv.(*ecdsa.PrivateKey).PublicKey.Equal(pub) {
		t.Errorf("PublicKey is not PrivateKeyPlaintext's (%v)", err)
	}
	if aws.ToString(out.KeyId) != "arn:aws:kms:us-east-1:123456789012:key/k1" || fake.encCtx["purpose"] != admissionpass.EncryptionPurpose {
		t.Errorf("KeyId %q, upstream context %v: want the upstream's Encrypt of k1 under the request's context", aws.ToString(out.KeyId), fake.encCtx)
	}
	if len(out.PrivateKeyCiphertextBlob) != len(out.PrivateKeyPlaintext) || bytes.Equal(out.PrivateKeyCiphertextBlob, out.PrivateKeyPlaintext) {
		t.Error("PrivateKeyCiphertextBlob is not the upstream's blob")
	}

	if _, err := client.ListKeys(t.Context(), &kms.ListKeysInput{}); err != nil {
		t.Errorf("ListKeys, forwarded: %v", err)
	}
	_, err = client.GenerateDataKeyPair(t.Context(), &kms.GenerateDataKeyPairInput{KeyId: aws.String("k1"), KeyPairSpec: types.DataKeyPairSpecRsa2048})
	if code := errorCode(err); code != "ValidationException" {
		t.Errorf("GenerateDataKeyPair RSA_2048: %v, want a ValidationException", err)
	}
	if got := [4]int64{p.Calls("GenerateDataKeyPair"), p.Calls("ListKeys"), p.Calls("Encrypt"), p.Total()}; got != [4]int64{2, 1, 0, 3} {
		t.Errorf("GenerateDataKeyPair, ListKeys, Encrypt, all: %v calls, want [2 1 0 3] (the shim's own Encrypt goes upstream uncounted)", got)
	}
}

// TestUpstreamDown: with the upstream gone, calls fail with a KMS error.
func TestUpstreamDown(t *testing.T) {
	upstream := httptest.NewServer(&fakeKMS{})
	url := upstream.URL
	upstream.Close()
	_, client := start(t, url)
	_, err := client.ListKeys(t.Context(), &kms.ListKeysInput{}, func(o *kms.Options) { o.RetryMaxAttempts = 1 })
	if code := errorCode(err); code != "KMSInternalException" {
		t.Errorf("ListKeys: %v, want a KMSInternalException", err)
	}
}

func TestStartRefusesNonURL(t *testing.T) {
	if p, err := localkms.Start("localhost"); err == nil {
		_ = p.Close()
		t.Error("Start(\"localhost\"): no error")
	}
}

func errorCode(err error) string {
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) {
		return apiErr.ErrorCode()
	}
	return ""
}
