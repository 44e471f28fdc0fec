package enqueue_test

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/example/waitingroom/internal/enqueue"
	"github.com/example/waitingroom/internal/tools/simclock"
	site "github.com/example/waitingroom/passverify/enqueue"
)

const (
	issuer  = "https://shop.example.com"
	program = "gala"
	account = "customer-8812"
)

var b64 = base64.RawURLEncoding

// keys made once: RSA key generation is slow.
var (
	ecKey     = must(ecdsa.GenerateKey(elliptic.P256(), rand.Reader))
	rsaKey    = must(rsa.GenerateKey(rand.Reader, 2048))
	rsa1024   = must(rsa.GenerateKey(rand.Reader, 1024))
	p384Key   = must(ecdsa.GenerateKey(elliptic.P384(), rand.Reader))
	foreignEC = must(ecdsa.GenerateKey(elliptic.P256(), rand.Reader))
)

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// jwksServer is a site's JWKS over TLS that a test controls and counts.
type jwksServer struct {
	srv     *httptest.Server
	fetches atomic.Int64

	mu     sync.Mutex
	doc    []byte
	status int
}

// newJWKS serves the site's keys: "ec" and "rsa" by passverify/enqueue.JWKS,
// "rsa1024" and "p384" beside them by hand.
func newJWKS(t *testing.T) *jwksServer {
	t.Helper()
	s := &jwksServer{status: http.StatusOK}
	s.publish(t, map[string]crypto.PublicKey{"ec": &ecKey.PublicKey, "rsa": &rsaKey.PublicKey})
	s.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		s.fetches.Add(1)
		s.mu.Lock()
		doc, status := s.doc, s.status
		s.mu.Unlock()
		w.WriteHeader(status)
		_, _ = w.Write(doc)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *jwksServer) publish(t *testing.T, keys map[string]crypto.PublicKey) {
	t.Helper()
	doc, err := site.JWKS(keys)
	if err != nil {
		t.Fatal(err)
	}
	var set jose.JSONWebKeySet
	_ = json.Unmarshal(doc, &set)
	set.Keys = append(set.Keys,
		jose.JSONWebKey{Key: &rsa1024.PublicKey, KeyID: "rsa1024", Use: "sig"},
		jose.JSONWebKey{Key: &p384Key.PublicKey, KeyID: "p384", Use: "sig"})
	s.mu.Lock()
	defer s.mu.Unlock()
	s.doc = must(json.Marshal(set))
}

func (s *jwksServer) setStatus(status int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.status = status
}

func (s *jwksServer) url() string { return s.srv.URL + "/.well-known/enqueue-jwks.json" }

// claims are a valid token's claims at now.
func claims(now time.Time) map[string]any {
	return map[string]any{"iss": issuer, "aud": program, "sub": account, "iat": now.Unix(), "exp": now.Add(5 * time.Minute).Unix()}
}

// with returns c changed by kv (a nil value deletes).
func with(c map[string]any, kv ...any) map[string]any {
	for i := 0; i < len(kv); i += 2 {
		if kv[i+1] == nil {
			delete(c, kv[i].(string))
		} else {
			c[kv[i].(string)] = kv[i+1]
		}
	}
	return c
}

// signed signs c with key by go-jose under kid.
func signed(t *testing.T, alg jose.SignatureAlgorithm, key any, kid string, c map[string]any) string {
	t.Helper()
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: jose.JSONWebKey{Key: key, KeyID: kid}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	obj, err := signer.Sign(must(json.Marshal(c)))
	if err != nil {
		t.Fatal(err)
	}
	return must(obj.CompactSerialize())
}

// byHand builds a compact JWS from hdr and c, its signature made by sign from the signing input.
func byHand(hdr, c map[string]any, sign func(input []byte) []byte) string {
	input := b64.EncodeToString(must(json.Marshal(hdr))) + "." + b64.EncodeToString(must(json.Marshal(c)))
	return input + "." + b64.EncodeToString(sign([]byte(input)))
}

// es256P384 signs input as ES256 would, but with the P-384 key.
func es256P384(input []byte) []byte {
	sum := sha256.Sum256(input)
	r, s := must2(ecdsa.Sign(rand.Reader, p384Key, sum[:]))
	return append(r.FillBytes(make([]byte, 48)), s.FillBytes(make([]byte, 48))...)
}

func must2[A, B any](a A, b B, err error) (A, B) {
	if err != nil {
		panic(err)
	}
	return a, b
}

func TestVerify(t *testing.T) {
	start := time.Now()
	pubDER := must(x509.MarshalPKIXPublicKey(&ecKey.PublicKey))
	signSite := func(key crypto.Signer, kid string) func(t *testing.T, now time.Time) string {
		return func(t *testing.T, _ time.Time) string {
			tok, err := site.Sign(key, kid, issuer, program, account, 5*time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			return tok
		}
	}
	es := func(change ...any) func(t *testing.T, now time.Time) string {
		return func(t *testing.T, now time.Time) string {
			return signed(t, jose.ES256, ecKey, "ec", with(claims(now), change...))
		}
	}
	tests := []struct {
		name    string
		token   func(t *testing.T, now time.Time) string
		later   time.Duration // the verifier's clock past start
		wantErr error         // nil: account is accepted
	}{
		{"ES256BySign", signSite(ecKey, "ec"), 0, nil},
		{"RS256BySign", signSite(rsaKey, "rsa"), 0, nil},
		{"ES256AtTheEnd", signSite(ecKey, "ec"), 5*time.Minute + 29*time.Second, nil},
		{"AudienceArray", es("aud", []string{"other", program}), 0, nil},
		{"AlgNone", func(t *testing.T, now time.Time) string {
			return byHand(map[string]any{"alg": "none", "kid": "ec"}, claims(now), func([]byte) []byte { return nil })
		}, 0, enqueue.ErrInvalid},
		{"HS256WithThePublicKey", func(t *testing.T, now time.Time) string {
			return byHand(map[string]any{"alg": "HS256", "kid": "ec"}, claims(now), func(in []byte) []byte {
				m := hmac.New(sha256.New, pubDER)
				m.Write(in)
				return m.Sum(nil)
			})
		}, 0, enqueue.ErrInvalid},
		{"ForeignKeyWithTheSiteKid", func(t *testing.T, now time.Time) string {
			return signed(t, jose.ES256, foreignEC, "ec", claims(now))
		}, 0, enqueue.ErrInvalid},
		{"ES256UnderTheRSAKid", func(t *testing.T, now time.Time) string {
			return signed(t, jose.ES256, ecKey, "rsa", claims(now))
		}, 0, enqueue.ErrInvalid},
		{"RSA1024", func(t *testing.T, now time.Time) string {
			return signed(t, jose.RS256, rsa1024, "rsa1024", claims(now))
		}, 0, enqueue.ErrInvalid},
		{"ES256WithP384Key", func(t *testing.T, now time.Time) string {
			return byHand(map[string]any{"alg": "ES256", "kid": "p384"}, claims(now), es256P384)
		}, 0, enqueue.ErrInvalid},
		{"NoKid", func(t *testing.T, now time.Time) string {
			return signed(t, jose.ES256, ecKey, "", claims(now))
		}, 0, enqueue.ErrInvalid},
		{"Expired", signSite(ecKey, "ec"), 5*time.Minute + 31*time.Second, enqueue.ErrInvalid},
		{"WrongAudience", es("aud", "other"), 0, enqueue.ErrInvalid},
		{"WrongIssuer", es("iss", "https://evil.example.com"), 0, enqueue.ErrInvalid},
		{"ExpTooFarAhead", es("exp", start.Add(10*time.Minute+31*time.Second).Unix()), 0, enqueue.ErrInvalid},
		{"NoExp", es("exp", nil), 0, enqueue.ErrInvalid},
		{"NoSub", es("sub", nil), 0, enqueue.ErrInvalid},
		{"SubWithControl", es("sub", "a\nb"), 0, enqueue.ErrInvalid},
		{"SubTooLong", es("sub", strings.Repeat("é", 257)), 0, enqueue.ErrInvalid},
		{"NotYetValid", es("nbf", start.Add(time.Minute).Unix()), 0, enqueue.ErrInvalid},
		{"TooLarge", es("pad", strings.Repeat("x", enqueue.MaxTokenSize)), 0, enqueue.ErrInvalid},
		{"Garbage", func(*testing.T, time.Time) string { return "not.a.jwt" }, 0, enqueue.ErrInvalid},
	}
	jwks := newJWKS(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock := simclock.NewFake(start)
			v := enqueue.NewVerifier(jwks.srv.Client(), clock.Now)
			tok := tt.token(t, start)
			clock.Advance(tt.later)
			got, err := v.Verify(t.Context(), jwks.url(), issuer, program, tok)
			switch {
			case tt.wantErr == nil && (err != nil || got != account):
				t.Errorf("got %q, %v; want %q", got, err, account)
			case tt.wantErr != nil && !errors.Is(err, tt.wantErr):
				t.Errorf("got %q, %v; want %v", got, err, tt.wantErr)
			}
		})
	}
	t.Run("NoJWKSURL", func(t *testing.T) {
		v := enqueue.NewVerifier(jwks.srv.Client(), nil)
		if _, err := v.Verify(t.Context(), "", issuer, program, signSite(ecKey, "ec")(t, start)); !errors.Is(err, enqueue.ErrInvalid) {
			t.Errorf("got %v, want ErrInvalid", err)
		}
	})
}

// fixture is a site's JWKS, a Verifier of it on a settable clock and a valid token.
func fixture(t *testing.T) (*jwksServer, *enqueue.Verifier, *simclock.Fake, func(kid string, key crypto.Signer) string) {
	t.Helper()
	s := newJWKS(t)
	clock := simclock.NewFake(time.Now())
	v := enqueue.NewVerifier(s.srv.Client(), clock.Now)
	token := func(kid string, key crypto.Signer) string {
		tok, err := site.Sign(key, kid, issuer, program, account, 10*time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	return s, v, clock, token
}

func verify(t *testing.T, v *enqueue.Verifier, url, tok string, want error) {
	t.Helper()
	if _, err := v.Verify(t.Context(), url, issuer, program, tok); !errors.Is(err, want) {
		t.Errorf("got %v, want %v", err, want)
	}
}

// TestUnknownKid: unknown kids cause one refetch per 10 s, no more.
func TestUnknownKid(t *testing.T) {
	s, v, clock, token := fixture(t)
	verify(t, v, s.url(), token("ec", ecKey), nil)
	for i := range 5 {
		verify(t, v, s.url(), token(fmt.Sprint("forged-", i), ecKey), enqueue.ErrInvalid)
	}
	if got := s.fetches.Load(); got != 1 {
		t.Errorf("right after a fetch: %d fetches, want 1", got)
	}
	clock.Advance(10 * time.Second)
	for i := range 5 {
		verify(t, v, s.url(), token(fmt.Sprint("forged-", i), ecKey), enqueue.ErrInvalid)
	}
	if got := s.fetches.Load(); got != 2 {
		t.Errorf("past the floor: %d fetches, want 2", got)
	}
}

// TestRotation: a new key is found once the floor has passed.
func TestRotation(t *testing.T) {
	s, v, clock, token := fixture(t)
	verify(t, v, s.url(), token("ec", ecKey), nil)
	next := must(ecdsa.GenerateKey(elliptic.P256(), rand.Reader))
	s.publish(t, map[string]crypto.PublicKey{"ec": &ecKey.PublicKey, "next": &next.PublicKey})
	verify(t, v, s.url(), token("next", next), enqueue.ErrInvalid)
	clock.Advance(10 * time.Second)
	verify(t, v, s.url(), token("next", next), nil)
	if got := s.fetches.Load(); got != 2 {
		t.Errorf("%d fetches, want 2", got)
	}
}

// TestKeysUnavailable: a JWKS that cannot be fetched, with no key known.
func TestKeysUnavailable(t *testing.T) {
	_, _, _, token := fixture(t)
	tok := token("ec", ecKey)
	real := newJWKS(t)
	tests := []struct {
		name    string
		handler http.HandlerFunc
	}{
		{"Down", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusServiceUnavailable) }},
		{"Redirect", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, real.url(), http.StatusFound) }},
		{"NotJSON", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("<html>")) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewTLSServer(tt.handler)
			defer srv.Close()
			v := enqueue.NewVerifier(srv.Client(), nil)
			verify(t, v, srv.URL+"/jwks", tok, enqueue.ErrKeysUnavailable)
		})
	}
	if got := real.fetches.Load(); got != 0 {
		t.Errorf("the redirect was followed: %d fetches of its target", got)
	}
	t.Run("Closed", func(t *testing.T) {
		srv := httptest.NewTLSServer(http.NotFoundHandler())
		srv.Close()
		verify(t, enqueue.NewVerifier(srv.Client(), nil), srv.URL+"/jwks", tok, enqueue.ErrKeysUnavailable)
	})
}

// TestSizeBound: a JWKS of up to 1 MiB is read, a larger one is not.
func TestSizeBound(t *testing.T) {
	s, _, _, token := fixture(t)
	tok := token("ec", ecKey)
	for _, tt := range []struct {
		size int
		want error
	}{{1 << 20, nil}, {1<<20 + 1, enqueue.ErrKeysUnavailable}} {
		s.mu.Lock()
		doc := s.doc
		s.doc = append(doc[:len(doc)-1:len(doc)-1], append([]byte(strings.Repeat(" ", tt.size-len(doc))), '}')...)
		s.mu.Unlock()
		verify(t, enqueue.NewVerifier(s.srv.Client(), nil), s.url(), tok, tt.want)
	}
}

// TestHTTP: a JWKS over http is fetched only when allowed, and from a loopback host;
// another is refused as invalid, not as keys briefly unavailable (no retry helps).
func TestHTTP(t *testing.T) {
	s, _, _, token := fixture(t)
	tok := token("ec", ecKey)
	plain := httptest.NewServer(s.srv.Config.Handler) // on 127.0.0.1
	defer plain.Close()
	verify(t, enqueue.NewVerifier(nil, nil), plain.URL+"/jwks", tok, enqueue.ErrInvalid)
	if got := s.fetches.Load(); got != 0 {
		t.Errorf("refused http: %d fetches, want 0", got)
	}
	allowed := enqueue.NewVerifier(nil, nil, enqueue.AllowHTTP())
	verify(t, allowed, plain.URL+"/jwks", tok, nil)
	verify(t, allowed, "http://shop.example.com/jwks", tok, enqueue.ErrInvalid)
	if got := s.fetches.Load(); got != 1 {
		t.Errorf("%d fetches, want 1", got)
	}
}

// TestStaleKey: a cached key still verifies while the JWKS is down.
func TestStaleKey(t *testing.T) {
	s, v, clock, token := fixture(t)
	verify(t, v, s.url(), token("ec", ecKey), nil)
	s.setStatus(http.StatusServiceUnavailable)
	clock.Advance(5*time.Minute + time.Second) // past the default max-age
	verify(t, v, s.url(), token("ec", ecKey), nil)
	if got := s.fetches.Load(); got != 2 {
		t.Errorf("%d fetches, want 2 (the failed refetch)", got)
	}
	verify(t, v, s.url(), token("rsa-unknown", rsaKey), enqueue.ErrInvalid)
}

// TestManySites: the Verifier keeps the keys of a bounded number of JWKS URLs.
func TestManySites(t *testing.T) {
	s, v, _, token := fixture(t)
	tok := token("ec", ecKey)
	for i := range enqueue.MaxSites + 6 {
		verify(t, v, fmt.Sprintf("%s/%d", s.url(), i), tok, nil)
	}
	if got := enqueue.Sites(v); got != enqueue.MaxSites {
		t.Errorf("%d JWKS URLs cached, want %d", got, enqueue.MaxSites)
	}
}
