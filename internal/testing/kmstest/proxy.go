package kmstest

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/kms/types"

	"github.com/example/waitingroom/internal/admissionpass"
	"github.com/example/waitingroom/internal/testing/dynamotest"
)

// Proxy is an HTTP proxy in front of the test binary's moto_server that
// adds kms:GenerateDataKeyPair, which moto 5.2 lacks, and counts the
// requests it receives per operation. It forwards every other request
// unchanged.
//
// It answers GenerateDataKeyPair itself, ECC_NIST_P256 only: it makes a
// P-256 key and wraps its PKCS#8 encoding with moto's own kms:Encrypt, with
// the request's KeyId and EncryptionContext. The blob is thus moto's
// ciphertext, and kms:Decrypt is moto's own: it refuses another encryption
// context or, given a KeyId, another key.
type Proxy struct {
	srv      *httptest.Server
	upstream string // moto_server's URL

	total atomic.Int64
	mu    sync.Mutex
	calls map[string]int64 // by operation
}

// NewProxy starts a Proxy on 127.0.0.1 in front of the test binary's
// moto_server and closes it when t ends. Under DYNAMODB_TEST_SERVER=dynalite,
// which has no KMS, it skips t.
func NewProxy(t testing.TB) *Proxy {
	t.Helper()
	Client(t) // skips under dynalite; moto's KMS is warm
	upstream := dynamotest.Endpoint(t)
	u, err := url.Parse(upstream)
	if err != nil {
		t.Fatalf("kmstest: %v", err)
	}
	p := &Proxy{upstream: strings.TrimSuffix(upstream, "/"), calls: map[string]int64{}}
	forward := httputil.NewSingleHostReverseProxy(u)
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		op := operation(r)
		p.count(op)
		if op == "GenerateDataKeyPair" && strings.HasPrefix(r.Header.Get("X-Amz-Target"), "TrentService.") {
			p.generateDataKeyPair(w, r)
			return
		}
		forward.ServeHTTP(w, r)
	}))
	t.Cleanup(p.srv.Close)
	return p
}

// URL returns the proxy's endpoint.
func (p *Proxy) URL() string { return p.srv.URL }

// Calls returns how many requests for operation op (X-Amz-Target's name
// after the dot, such as "Decrypt") the proxy has received.
func (p *Proxy) Calls(op string) int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.calls[op]
}

// Total returns how many requests the proxy has received.
func (p *Proxy) Total() int64 { return p.total.Load() }

func (p *Proxy) count(op string) {
	p.total.Add(1)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls[op]++
}

// operation is r's operation: X-Amz-Target after its last dot ("" without
// one).
func operation(r *http.Request) string {
	target := r.Header.Get("X-Amz-Target")
	return target[strings.LastIndexByte(target, '.')+1:]
}

// jsonContentType is the content type of the AWS JSON 1.1 protocol.
const jsonContentType = "application/x-amz-json-1.1"

// generateDataKeyPair answers kms:GenerateDataKeyPair as AWS documents it,
// wrapping the private key with moto's kms:Encrypt; moto's errors are passed
// on as moto answered them.
func (p *Proxy) generateDataKeyPair(w http.ResponseWriter, r *http.Request) {
	var in struct {
		KeyId             string
		KeyPairSpec       string
		EncryptionContext map[string]string `json:",omitempty"`
		GrantTokens       []string          `json:",omitempty"`
		DryRun            bool
		Recipient         json.RawMessage
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&in); err != nil {
		writeError(w, "SerializationException", err.Error())
		return
	}
	switch {
	case in.KeyPairSpec != string(types.DataKeyPairSpecEccNistP256):
		writeError(w, "ValidationException", fmt.Sprintf("kmstest: the GenerateDataKeyPair shim makes %s key pairs only, not %q", types.DataKeyPairSpecEccNistP256, in.KeyPairSpec))
		return
	case in.DryRun || in.Recipient != nil:
		writeError(w, "ValidationException", "kmstest: the GenerateDataKeyPair shim supports neither DryRun nor Recipient")
		return
	}
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		writeError(w, "KMSInternalException", err.Error())
		return
	}
	plain, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		writeError(w, "KMSInternalException", err.Error())
		return
	}
	pub, err := x509.MarshalPKIXPublicKey(&priv.PublicKey)
	if err != nil {
		writeError(w, "KMSInternalException", err.Error())
		return
	}
	encIn, err := json.Marshal(struct {
		KeyId             string
		Plaintext         []byte
		EncryptionContext map[string]string `json:",omitempty"`
		GrantTokens       []string          `json:",omitempty"`
	}{in.KeyId, plain, in.EncryptionContext, in.GrantTokens})
	if err != nil {
		writeError(w, "KMSInternalException", err.Error())
		return
	}
	resp, body, err := p.encrypt(r, encIn)
	if err != nil {
		writeError(w, "KMSInternalException", "kmstest: moto kms:Encrypt: "+err.Error())
		return
	}
	if resp.StatusCode != http.StatusOK {
		w.Header().Set("Content-Type", resp.Header.Get("Content-Type"))
		w.WriteHeader(resp.StatusCode)
		_, _ = w.Write(body)
		return
	}
	var enc struct {
		CiphertextBlob []byte
		KeyId          string
	}
	if err := json.Unmarshal(body, &enc); err != nil {
		writeError(w, "KMSInternalException", "kmstest: moto kms:Encrypt: "+err.Error())
		return
	}
	out, err := json.Marshal(struct {
		KeyId                    string
		KeyPairSpec              string
		PrivateKeyCiphertextBlob []byte
		PrivateKeyPlaintext      []byte
		PublicKey                []byte
	}{enc.KeyId, in.KeyPairSpec, enc.CiphertextBlob, plain, pub})
	if err != nil {
		writeError(w, "KMSInternalException", err.Error())
		return
	}
	w.Header().Set("Content-Type", jsonContentType)
	_, _ = w.Write(out)
}

// encryptTimeout bounds the shim's kms:Encrypt call on moto.
const encryptTimeout = 30 * time.Second

// encrypt sends moto the TrentService.Encrypt request body, with the
// caller's Authorization header, from which moto takes the account and
// region (moto checks no signature), and returns its answer.
func (p *Proxy) encrypt(r *http.Request, body []byte) (*http.Response, []byte, error) {
	ctx, cancel := context.WithTimeout(r.Context(), encryptTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.upstream+"/", bytes.NewReader(body))
	if err != nil {
		return nil, nil, err
	}
	for _, h := range []string{"Authorization", "X-Amz-Date", "X-Amz-Security-Token"} {
		if v := r.Header.Get(h); v != "" {
			req.Header.Set(h, v)
		}
	}
	req.Header.Set("Content-Type", jsonContentType)
	req.Header.Set("X-Amz-Target", "TrentService.Encrypt")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, nil, err
	}
	return resp, out, nil
}

// writeError answers an AWS JSON 1.1 client error of type code.
func writeError(w http.ResponseWriter, code, message string) {
	w.Header().Set("Content-Type", jsonContentType)
	w.WriteHeader(http.StatusBadRequest)
	_ = json.NewEncoder(w).Encode(map[string]string{"__type": code, "message": message})
}

// ClientFor returns a KMS client (admissionpass.NewKMSClient) for endpoint,
// such as a Proxy's URL.
func ClientFor(t testing.TB, endpoint string) *kms.Client {
	t.Helper()
	client, err := admissionpass.NewKMSClient(t.Context(), endpoint)
	if err != nil {
		t.Fatalf("kmstest: %v", err)
	}
	return client
}

// NewWrapKey creates a symmetric key (KeySpec SYMMETRIC_DEFAULT, KeyUsage
// ENCRYPT_DECRYPT) that wraps signing keys, returns its id, and schedules
// its deletion when t ends.
func NewWrapKey(t testing.TB, client *kms.Client) string {
	t.Helper()
	return createKey(t, client, types.KeySpecSymmetricDefault, types.KeyUsageTypeEncryptDecrypt, "test signing key wrapping key: ")
}
