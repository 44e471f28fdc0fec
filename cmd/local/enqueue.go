package main

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/example/waitingroom/internal/waitpage"
	"github.com/example/waitingroom/passverify/enqueue"
)

// The demo site's enqueue token routes: the local server plays a site
// whose signed-in visitors enter a program with its enqueue tokens
// (docs/api.md), as passverify/enqueue shows a site how.
const (
	demoIssuerPrefix = "/demo/"
	demoJWKSPath     = "/demo/.well-known/enqueue-jwks.json" // the program's enqueueJwksUrl
	demoTokenPath    = "/demo/enqueue-token"                 // ?program=ID&account=SUB: a token, as text
	demoEnterPath    = "/demo/enter"                         // the same query: 303 to the waiting page with it
	demoTokenTTL     = 5 * time.Minute
)

// demoIssuer signs enqueue tokens with an ES256 key made at start, under a
// kid of this process.
type demoIssuer struct {
	key         *ecdsa.PrivateKey
	kid, issuer string
	jwks        []byte
}

// newDemoIssuer makes the demo site's key; its issuer is base's /demo.
func newDemoIssuer(base string) (*demoIssuer, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("demo site's enqueue key: %w", err)
	}
	d := &demoIssuer{key: key, kid: "demo-" + strings.ToLower(rand.Text()[:8]), issuer: base + "/demo"}
	if d.jwks, err = enqueue.JWKS(map[string]crypto.PublicKey{d.kid: key.Public()}); err != nil {
		return nil, fmt.Errorf("demo site's enqueue JWKS: %w", err)
	}
	return d, nil
}

// ServeHTTP answers GET demoJWKSPath with the JWKS, GET demoTokenPath with a
// token for the query's account on its program, valid 5 minutes, and GET
// demoEnterPath with a redirect to the waiting page carrying such a token.
func (d *demoIssuer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	plain := func(status int, msg string) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(status)
		fmt.Fprintln(w, msg)
	}
	switch {
	case r.URL.Path != demoJWKSPath && r.URL.Path != demoTokenPath && r.URL.Path != demoEnterPath:
		plain(http.StatusNotFound, "404 page not found")
	case r.Method != http.MethodGet && r.Method != http.MethodHead:
		w.Header().Set("Allow", "GET, HEAD")
		plain(http.StatusMethodNotAllowed, "405 method not allowed")
	case r.URL.Path == demoJWKSPath:
		w.Header().Set("Content-Type", "application/jwk-set+json")
		w.Header().Set("Cache-Control", "public, max-age=300")
		_, _ = w.Write(d.jwks)
	default:
		q := r.URL.Query()
		// A real site signs the account of its signed-in visitor; the demo takes it from the query.
		tok, err := enqueue.Sign(d.key, d.kid, d.issuer, q.Get("program"), q.Get("account"), demoTokenTTL)
		if err != nil {
			plain(http.StatusBadRequest, "want ?program=ID&account=SUB: "+err.Error())
			return
		}
		if r.URL.Path == demoEnterPath { // as a site sends its signed-in visitor to the queue
			http.Redirect(w, r, waitpage.PathPrefix+url.PathEscape(q.Get("program"))+"#enqueue="+tok, http.StatusSeeOther)
			return
		}
		plain(http.StatusOK, tok)
	}
}
