// Package enqueuetest is a site for tests: it serves a JWKS over TLS and
// signs enqueue tokens with its key, as passverify/enqueue shows a site how.
package enqueuetest

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/example/waitingroom/passverify/enqueue"
)

// Issuer is the iss of the Site's tokens.
const Issuer = "https://shop.example.com"

// Site serves its JWKS at JWKSURL (https, trusted by Client).
type Site struct {
	JWKSURL string
	Client  *http.Client
	Key     *ecdsa.PrivateKey
	Kid     string
}

// New starts a Site, closed when t ends.
func New(t testing.TB) *Site {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	s := &Site{Key: key, Kid: "site-1"}
	doc, err := enqueue.JWKS(map[string]crypto.PublicKey{s.Kid: key.Public()})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/jwk-set+json")
		_, _ = w.Write(doc)
	}))
	t.Cleanup(srv.Close)
	s.JWKSURL, s.Client = srv.URL+"/.well-known/jwks.json", srv.Client()
	return s
}

// Token is an enqueue token for account on programID, valid 5 minutes.
func (s *Site) Token(t testing.TB, programID, account string) string {
	t.Helper()
	tok, err := enqueue.Sign(s.Key, s.Kid, Issuer, programID, account, 5*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}
