package enqueue_test

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/example/waitingroom/passverify/enqueue"
)

func TestSignRefuses(t *testing.T) {
	p256, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	p384, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	rsa1024, _ := rsa.GenerateKey(rand.Reader, 1024)
	tests := []struct {
		name    string
		key     crypto.Signer
		account string
		ttl     time.Duration
	}{
		{"P384", p384, "a", time.Minute},
		{"RSA1024", rsa1024, "a", time.Minute},
		{"NoAccount", p256, "", time.Minute},
		{"TTLTooLong", p256, "a", enqueue.MaxTTL + time.Second},
		{"NoTTL", p256, "a", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tok, err := enqueue.Sign(tt.key, "k", "https://shop.example.com", "gala", tt.account, tt.ttl); err == nil {
				t.Errorf("got %q, want an error", tok)
			}
		})
	}
}

func TestJWKS(t *testing.T) {
	p256, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	rsa2048, _ := rsa.GenerateKey(rand.Reader, 2048)
	doc, err := enqueue.JWKS(map[string]crypto.PublicKey{"r": &rsa2048.PublicKey, "e": &p256.PublicKey})
	if err != nil {
		t.Fatal(err)
	}
	var set struct {
		Keys []map[string]any `json:"keys"`
	}
	if err := json.Unmarshal(doc, &set); err != nil {
		t.Fatal(err)
	}
	var got [][]any
	for _, k := range set.Keys {
		_, private := k["d"]
		got = append(got, []any{k["kid"], k["kty"], k["alg"], k["use"], private})
	}
	want := [][]any{{"e", "EC", "ES256", "sig", false}, {"r", "RSA", "RS256", "sig", false}}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("JWKS keys (-want +got):\n%s", d)
	}
	// A private key given by mistake is refused, not published.
	if _, err := enqueue.JWKS(map[string]crypto.PublicKey{"e": p256}); err == nil {
		t.Error("a private key: no error")
	}
}
