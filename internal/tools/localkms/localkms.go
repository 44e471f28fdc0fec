// Package localkms puts kms:GenerateDataKeyPair, which moto_server 5.2 lacks, in front of a local KMS API,
// for the tests (internal/testing/kmstest) and `make invoke`.
package localkms

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
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/kms/types"

	"github.com/example/waitingroom/internal/tools/dynamowire"
)

// Proxy is an HTTP proxy on loopback in front of a local KMS API (moto) that counts requests per
// operation and forwards them, but for kms:GenerateDataKeyPair (ECC_NIST_P256 only): it answers that
// itself, wrapping a new key with the upstream's kms:Encrypt, so the upstream's kms:Decrypt opens it.
type Proxy struct {
	srv      *http.Server
	url      string
	upstream string // the KMS API's URL, without a trailing slash
	done     chan struct{}

	mu    sync.Mutex
	calls map[string]int64 // by operation
}

// Start starts a Proxy on 127.0.0.1 in front of the KMS API at the URL upstream. Stop it with Close.
func Start(upstream string) (*Proxy, error) {
	u, err := url.Parse(upstream)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return nil, fmt.Errorf("localkms: upstream %q is not a URL", upstream)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("localkms: listen: %w", err)
	}
	p := &Proxy{
		url:      "http://" + ln.Addr().String(),
		upstream: strings.TrimSuffix(upstream, "/"),
		done:     make(chan struct{}),
		calls:    map[string]int64{},
	}
	// Failures reach the caller as KMS errors, never as log lines.
	quiet := log.New(io.Discard, "", 0)
	forward := httputil.NewSingleHostReverseProxy(u)
	forward.ErrorLog = quiet
	forward.ErrorHandler = func(w http.ResponseWriter, _ *http.Request, err error) {
		writeError(w, http.StatusBadGateway, "KMSInternalException", "localkms: upstream "+p.upstream+": "+err.Error())
	}
	p.srv = &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			op := dynamowire.Operation(r)
			p.mu.Lock()
			p.calls[op]++
			p.mu.Unlock()
			if op == "GenerateDataKeyPair" && strings.HasPrefix(r.Header.Get("X-Amz-Target"), "TrentService.") {
				p.generateDataKeyPair(w, r)
				return
			}
			forward.ServeHTTP(w, r)
		}),
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          quiet,
	}
	go func() {
		defer close(p.done)
		_ = p.srv.Serve(ln) // ErrServerClosed after Close
	}()
	return p, nil
}

// URL returns the proxy's endpoint, for KMS_ENDPOINT.
func (p *Proxy) URL() string { return p.url }

// Close stops the proxy and the requests it is serving.
func (p *Proxy) Close() error {
	err := p.srv.Close()
	<-p.done
	return err
}

// Calls returns how many requests for operation op (X-Amz-Target after the dot, such as "Decrypt") it received.
func (p *Proxy) Calls(op string) int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.calls[op]
}

// Total returns how many requests the proxy has received.
func (p *Proxy) Total() (n int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.calls {
		n += c
	}
	return n
}

const jsonContentType = "application/x-amz-json-1.1" // the AWS JSON 1.1 protocol's

// generateDataKeyPair answers kms:GenerateDataKeyPair as AWS documents it, wrapping the private key
// with the upstream's kms:Encrypt; the upstream's errors are passed on as it answered them.
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
		writeError(w, http.StatusBadRequest, "SerializationException", err.Error())
		return
	}
	switch {
	case in.KeyPairSpec != string(types.DataKeyPairSpecEccNistP256):
		writeError(w, http.StatusBadRequest, "ValidationException", fmt.Sprintf("localkms: the GenerateDataKeyPair shim makes %s key pairs only, not %q", types.DataKeyPairSpecEccNistP256, in.KeyPairSpec))
		return
	case in.DryRun || in.Recipient != nil:
		writeError(w, http.StatusBadRequest, "ValidationException", "localkms: the GenerateDataKeyPair shim supports neither DryRun nor Recipient")
		return
	}
	// None of these fails: a P-256 key from crypto/rand, and JSON of strings and bytes.
	priv, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	plain, _ := x509.MarshalPKCS8PrivateKey(priv)
	pub, _ := x509.MarshalPKIXPublicKey(&priv.PublicKey)
	encIn, _ := json.Marshal(struct {
		KeyId             string
		Plaintext         []byte
		EncryptionContext map[string]string `json:",omitempty"`
		GrantTokens       []string          `json:",omitempty"`
	}{in.KeyId, plain, in.EncryptionContext, in.GrantTokens})
	resp, body, err := p.encrypt(r, encIn)
	var enc struct {
		CiphertextBlob []byte
		KeyId          string
	}
	if err == nil && resp.StatusCode == http.StatusOK {
		err = json.Unmarshal(body, &enc)
	}
	switch {
	case err != nil:
		writeError(w, http.StatusInternalServerError, "KMSInternalException", "localkms: upstream kms:Encrypt: "+err.Error())
		return
	case resp.StatusCode != http.StatusOK:
		w.Header().Set("Content-Type", resp.Header.Get("Content-Type"))
		w.WriteHeader(resp.StatusCode)
		_, _ = w.Write(body)
		return
	}
	out, _ := json.Marshal(struct {
		KeyId                    string
		KeyPairSpec              string
		PrivateKeyCiphertextBlob []byte
		PrivateKeyPlaintext      []byte
		PublicKey                []byte
	}{enc.KeyId, in.KeyPairSpec, enc.CiphertextBlob, plain, pub})
	w.Header().Set("Content-Type", jsonContentType)
	_, _ = w.Write(out)
}

const encryptTimeout = 30 * time.Second // bounds the shim's kms:Encrypt call upstream

// encrypt sends the upstream the TrentService.Encrypt request body with r's credentials headers
// (moto takes the account and region from them) and returns its answer.
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
	return resp, out, err
}

// writeError answers an AWS JSON 1.1 error of type code.
func writeError(w http.ResponseWriter, status int, code, message string) {
	w.Header().Set("Content-Type", jsonContentType)
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"__type": code, "message": message})
}
