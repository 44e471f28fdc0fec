package admissionpass_test

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/kms/types"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/lestrrat-go/jwx/v3/jwk"
	"github.com/lestrrat-go/jwx/v3/jws"
	"github.com/lestrrat-go/jwx/v3/jwt"

	"github.com/example/waitingroom/internal/admissionpass"
	"github.com/example/waitingroom/internal/testing/dynamotest"
	"github.com/example/waitingroom/internal/testing/kmstest"
	"github.com/example/waitingroom/internal/testing/passtest"
	"github.com/example/waitingroom/internal/tools/localkeys"
	"github.com/example/waitingroom/internal/tools/simclock"
	"github.com/example/waitingroom/passverify"
)

func TestMain(m *testing.M) { dynamotest.Main(m) }

const issuerURL = "https://queue.example.com"

var admission = admissionpass.Admission{
	ProgramID:  "gala",
	TokenID:    "qa2AFEZ5uMUwGcoY2YV5zg",
	Ticket:     4242,
	AdmittedAt: time.Date(2026, 5, 19, 10, 12, 1, 456e6, time.UTC),
	ExpiresAt:  time.Date(2026, 5, 19, 10, 22, 1, 456e6, time.UTC),
}

// passView is a pass as an independent JOSE implementation (jwx) reads
// it.
type passView struct {
	Alg, Kid, Typ          string
	Iss, Sub, Jti          string
	Aud                    []string
	Iat, Nbf, Exp          time.Time
	Ticket                 float64
	Bypass                 bool // the bypass claim, if present
	OtherClaims, OtherHdrs []string
}

// wantView is what a pass for admission signed by key kid must say.
func wantView(kid string) passView {
	return passView{
		Alg: "ES256", Kid: kid, Typ: "JWT",
		Iss: issuerURL, Sub: admission.TokenID, Aud: []string{admission.ProgramID},
		Iat: admission.AdmittedAt.Truncate(time.Second), Nbf: admission.AdmittedAt.Truncate(time.Second), Exp: admission.ExpiresAt.Truncate(time.Second),
		Ticket: float64(admission.Ticket),
	}
}

// verifyWithJWX verifies pass against the JWKS document with jwx, at now,
// and returns what it reads.
func verifyWithJWX(t *testing.T, jwksDoc []byte, pass string, now time.Time) passView {
	t.Helper()
	set, err := jwk.Parse(jwksDoc)
	if err != nil {
		t.Fatalf("jwx cannot parse the JWKS: %v\n%s", err, jwksDoc)
	}
	tok, err := jwt.ParseString(pass, jwt.WithKeySet(set), jwt.WithValidate(true),
		jwt.WithIssuer(issuerURL), jwt.WithAudience(admission.ProgramID), jwt.WithClock(jwt.ClockFunc(func() time.Time { return now })))
	if err != nil {
		t.Fatalf("jwx refuses the pass: %v", err)
	}
	msg, err := jws.Parse([]byte(pass))
	if err != nil {
		t.Fatalf("jws.Parse: %v", err)
	}
	var v passView
	hdr := msg.Signatures()[0].ProtectedHeaders()
	alg, _ := hdr.Algorithm()
	v.Alg = alg.String()
	v.Kid, _ = hdr.KeyID()
	v.Typ, _ = hdr.Type()
	for _, k := range hdr.Keys() {
		if k != "alg" && k != "kid" && k != "typ" {
			v.OtherHdrs = append(v.OtherHdrs, k)
		}
	}
	v.Iss, _ = tok.Issuer()
	v.Sub, _ = tok.Subject()
	v.Jti, _ = tok.JwtID()
	v.Aud, _ = tok.Audience()
	v.Iat, _ = tok.IssuedAt()
	v.Nbf, _ = tok.NotBefore()
	v.Exp, _ = tok.Expiration()
	if err := tok.Get("ticket", &v.Ticket); err != nil {
		t.Errorf("no ticket claim: %v", err)
	}
	if tok.Has("bypass") {
		if err := tok.Get("bypass", &v.Bypass); err != nil {
			t.Errorf("bypass claim: %v", err)
		}
	}
	for _, k := range tok.Keys() {
		switch k {
		case "iss", "sub", "aud", "jti", "iat", "nbf", "exp", "ticket", "bypass":
		default:
			v.OtherClaims = append(v.OtherClaims, k)
		}
	}
	v.Iat, v.Nbf, v.Exp = v.Iat.UTC(), v.Nbf.UTC(), v.Exp.UTC()
	return v
}

// thumbprint is the RFC 7638 thumbprint of pub, computed by jwx.
func thumbprint(t *testing.T, pub *ecdsa.PublicKey) string {
	t.Helper()
	k, err := jwk.Import(pub)
	if err != nil {
		t.Fatal(err)
	}
	b, err := k.Thumbprint(crypto.SHA256)
	if err != nil {
		t.Fatal(err)
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

func checkJTI(t *testing.T, jti string) {
	t.Helper()
	if b, err := base64.RawURLEncoding.DecodeString(jti); err != nil || len(b) != 16 {
		t.Errorf("jti %q is not 128 bits in base64url", jti)
	}
}

func get(t *testing.T, url string) []byte {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s %v", url, resp.Status, err)
	}
	return body
}

// TestKeyringKMSRoundTrip signs passes with a keyring whose keys KMS on
// moto_server makes and wraps (through kmstest's GenerateDataKeyPair shim),
// publishes the JWKS over HTTP and verifies them with passverify and with
// jwx; a second instance opens the key once, and a cancelled context
// reaches KMS.
func TestKeyringKMSRoundTrip(t *testing.T) {
	proxy := kmstest.NewProxy(t)
	client := kmstest.ClientFor(t, proxy.URL())
	wrap := admissionpass.NewKMSWrapper(client, kmstest.NewWrapKey(t, client))
	store := localkeys.NewKeyStore()
	// The keyrings' clock is fixed at the admission, mid-slot: the slot's
	// key alone exists, whatever the time of day the test runs at.
	clk := simclock.NewFake(admission.AdmittedAt)
	maker := admissionpass.NewSetIssuer(issuerURL, admissionpass.NewKeyring(store, wrap, admissionpass.WithKeyringClock(clk)))
	if _, err := maker.KeyID(t.Context()); err != nil {
		t.Fatal(err)
	}
	ring := admissionpass.NewKeyring(store, wrap, admissionpass.WithKeyringClock(clk)) // another instance
	issuer := admissionpass.NewSetIssuer(issuerURL, ring)
	before := proxy.Total()
	srv := httptest.NewServer(issuer.JWKSHandler(nil, nil))
	defer srv.Close()
	now := admission.AdmittedAt.Add(time.Minute)
	v, err := passverify.New(passverify.Config{JWKSURL: srv.URL, Issuer: issuerURL, ProgramID: "gala", Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	keys, err := ring.Keys(t.Context())
	if err != nil || len(keys) != 1 {
		t.Fatalf("Keys: %+v %v, want the one key", keys, err)
	}
	pub, err := x509.ParsePKIXPublicKey(keys[0].Public)
	if err != nil {
		t.Fatal(err)
	}
	for range 20 {
		pass, err := issuer.Issue(t.Context(), admission)
		if err != nil {
			t.Fatalf("Issue: %v", err)
		}
		got, err := v.Verify(t.Context(), pass)
		if err != nil {
			t.Fatalf("passverify refuses the pass: %v", err)
		}
		want := passverify.Claims{
			Issuer: issuerURL, ProgramID: "gala", TokenID: admission.TokenID, Ticket: admission.Ticket,
			AdmittedAt: admission.AdmittedAt.Truncate(time.Second), ExpiresAt: admission.ExpiresAt.Truncate(time.Second),
		}
		if diff := cmp.Diff(want, got, cmpopts.IgnoreFields(passverify.Claims{}, "JTI")); diff != "" {
			t.Errorf("claims (-want +got):\n%s", diff)
		}
		checkJTI(t, got.JTI)
		view := verifyWithJWX(t, get(t, srv.URL), pass, now)
		if diff := cmp.Diff(wantView(thumbprint(t, pub.(*ecdsa.PublicKey))), view, cmpopts.IgnoreFields(passView{}, "Jti")); diff != "" {
			t.Errorf("pass as jwx reads it (-want +got):\n%s", diff)
		}
	}
	if got := proxy.Total() - before; got != 1 || proxy.Calls("Decrypt") != 1 {
		t.Errorf("%d KMS calls for 20 passes on the second instance (%d Decrypt), want its one Decrypt", got, proxy.Calls("Decrypt"))
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	cold := admissionpass.NewSetIssuer(issuerURL, admissionpass.NewKeyring(store, wrap, admissionpass.WithKeyringClock(clk)))
	if _, err := cold.Issue(ctx, admission); !errors.Is(err, context.Canceled) {
		t.Errorf("Issue with a cancelled context: got %v, want context.Canceled", err)
	}
}

func newLocalKey(t *testing.T) (*localkeys.Key, *ecdsa.PrivateKey) {
	t.Helper()
	k := passtest.NewKey(t)
	return k.Key, k.Private
}

// issuerOf is an issuer signing with key, its JWKS and its kid.
func issuerOf(t *testing.T, key admissionpass.Key) (*admissionpass.Issuer, []byte, string) {
	t.Helper()
	issuer, err := localkeys.FixedIssuer(issuerURL, key)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := issuer.JWKS(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	kid, err := issuer.KeyID(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return issuer, doc, kid
}

func TestIssue(t *testing.T) {
	key, priv := newLocalKey(t)
	issuer, doc, kid := issuerOf(t, key)
	if want := thumbprint(t, &priv.PublicKey); kid != want {
		t.Errorf("kid %q, want the RFC 7638 thumbprint %q", kid, want)
	}
	a, err := issuer.Issue(t.Context(), admission)
	if err != nil {
		t.Fatal(err)
	}
	b, err := issuer.Issue(t.Context(), admission)
	if err != nil {
		t.Fatal(err)
	}
	now := admission.AdmittedAt.Add(time.Second)
	va, vb := verifyWithJWX(t, doc, a, now), verifyWithJWX(t, doc, b, now)
	if diff := cmp.Diff(wantView(kid), va, cmpopts.IgnoreFields(passView{}, "Jti")); diff != "" {
		t.Errorf("pass (-want +got):\n%s", diff)
	}
	checkJTI(t, va.Jti)
	if va.Jti == vb.Jti {
		t.Errorf("two passes share the jti %q", va.Jti)
	}
	// The signature is JWS's 64-byte R||S, not DER.
	if sig, err := base64.RawURLEncoding.DecodeString(a[strings.LastIndexByte(a, '.')+1:]); err != nil || len(sig) != 64 {
		t.Errorf("signature: %d bytes, %v; want 64", len(sig), err)
	}
}

// TestIssueBypass: a bypass pass has an admission's claims, ticket 0 and
// "bypass": true, as jwx reads it; an admission's pass has no bypass claim.
func TestIssueBypass(t *testing.T) {
	key, _ := newLocalKey(t)
	issuer, doc, kid := issuerOf(t, key)
	a := admission
	a.Ticket, a.Bypass = 0, true
	pass, err := issuer.Issue(t.Context(), a)
	if err != nil {
		t.Fatal(err)
	}
	want := wantView(kid)
	want.Ticket, want.Bypass = 0, true
	got := verifyWithJWX(t, doc, pass, a.AdmittedAt.Add(time.Second))
	if diff := cmp.Diff(want, got, cmpopts.IgnoreFields(passView{}, "Jti")); diff != "" {
		t.Errorf("bypass pass (-want +got):\n%s", diff)
	}
	plain, err := issuer.Issue(t.Context(), admission)
	if err != nil {
		t.Fatal(err)
	}
	if v := verifyWithJWX(t, doc, plain, a.AdmittedAt.Add(time.Second)); v.Bypass {
		t.Error("an admission's pass says bypass")
	}
}

func TestIssueRefusesBadAdmissions(t *testing.T) {
	key, _ := newLocalKey(t)
	issuer, err := localkeys.FixedIssuer(issuerURL, key)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		change func(*admissionpass.Admission)
	}{
		{"NoProgram", func(a *admissionpass.Admission) { a.ProgramID = "" }},
		{"NoToken", func(a *admissionpass.Admission) { a.TokenID = "" }},
		{"EmptyWindow", func(a *admissionpass.Admission) { a.ExpiresAt = a.AdmittedAt }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := admission
			tt.change(&a)
			if pass, err := issuer.Issue(t.Context(), a); err == nil {
				t.Errorf("Issue signed %q", pass)
			}
		})
	}
	if _, err := localkeys.FixedIssuer(issuerURL, nil); err == nil {
		t.Error("NewIssuer took no key")
	}
}

// TestIssuerFromContext: an Issuer without an issuer takes the context's.
func TestIssuerFromContext(t *testing.T) {
	key, _ := newLocalKey(t)
	issuer, err := localkeys.FixedIssuer("", key)
	if err != nil {
		t.Fatal(err)
	}
	if pass, err := issuer.Issue(t.Context(), admission); err == nil {
		t.Errorf("Issue without an issuer signed %q", pass)
	}
	doc, err := issuer.JWKS(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	pass, err := issuer.Issue(admissionpass.WithIssuer(t.Context(), issuerURL), admission)
	if err != nil {
		t.Fatal(err)
	}
	if got := verifyWithJWX(t, doc, pass, admission.AdmittedAt).Iss; got != issuerURL {
		t.Errorf("iss %q, want the context's %q", got, issuerURL)
	}
	// A configured issuer wins over the context's.
	configured, err := localkeys.FixedIssuer("https://configured.example.com", key)
	if err != nil {
		t.Fatal(err)
	}
	if pass, err = configured.Issue(admissionpass.WithIssuer(t.Context(), issuerURL), admission); err != nil {
		t.Fatal(err)
	}
	if _, err := jwt.ParseString(pass, jwt.WithVerify(false), jwt.WithValidate(true), jwt.WithIssuer("https://configured.example.com"),
		jwt.WithClock(jwt.ClockFunc(func() time.Time { return admission.AdmittedAt }))); err != nil {
		t.Errorf("the configured issuer is not the pass's: %v", err)
	}
}

// fakeKey is a Key whose calls are counted and can be made to fail.
type fakeKey struct {
	*localkeys.Key
	publicCalls atomic.Int32
	fail        atomic.Bool
}

var errFake = errors.New("key unavailable")

func (k *fakeKey) PublicKey(ctx context.Context) (*ecdsa.PublicKey, error) {
	k.publicCalls.Add(1)
	if k.fail.Load() {
		return nil, errFake
	}
	return k.Key.PublicKey(ctx)
}

func (k *fakeKey) PrivateKey(ctx context.Context) (*ecdsa.PrivateKey, error) {
	if k.fail.Load() {
		return nil, errFake
	}
	return k.Key.PrivateKey(ctx)
}

// jwksView is a JWKS as JSON says it.
type jwksView struct {
	Keys []struct {
		Kty, Crv, Kid, Alg, Use, X, Y, D string
	}
}

func TestJWKS(t *testing.T) {
	current, currentPriv := newLocalKey(t)
	previous, previousPriv := newLocalKey(t)
	counted := &fakeKey{Key: current}
	issuer, err := localkeys.FixedIssuer(issuerURL, counted, previous, current)
	if err != nil {
		t.Fatal(err)
	}
	var docs [][]byte
	for range 3 {
		doc, err := issuer.JWKS(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, doc)
	}
	if _, err := issuer.Issue(t.Context(), admission); err != nil {
		t.Fatal(err)
	}
	if n := counted.publicCalls.Load(); n != 1 {
		t.Errorf("the public key was read %d times, want once per instance", n)
	}
	if !cmp.Equal(docs[0], docs[2]) {
		t.Error("the JWKS changed between calls")
	}
	var got jwksView
	if err := json.Unmarshal(docs[0], &got); err != nil {
		t.Fatal(err)
	}
	coord := func(pub *ecdsa.PublicKey) (string, string) {
		b, err := pub.Bytes() // uncompressed point: 0x04 || X || Y
		if err != nil {
			t.Fatal(err)
		}
		return base64.RawURLEncoding.EncodeToString(b[1:33]), base64.RawURLEncoding.EncodeToString(b[33:])
	}
	var want jwksView
	for _, priv := range []*ecdsa.PrivateKey{currentPriv, previousPriv} { // current first; the duplicate once
		x, y := coord(&priv.PublicKey)
		want.Keys = append(want.Keys, struct{ Kty, Crv, Kid, Alg, Use, X, Y, D string }{
			Kty: "EC", Crv: "P-256", Kid: thumbprint(t, &priv.PublicKey), Alg: "ES256", Use: "sig", X: x, Y: y,
		})
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("JWKS (-want +got):\n%s", diff)
	}
	if set, err := jwk.Parse(docs[0]); err != nil || set.Len() != 2 {
		t.Errorf("jwx reads the JWKS as %v keys, %v", set, err)
	}

	// A pass of the previous key still verifies against this JWKS.
	old, err := localkeys.FixedIssuer(issuerURL, previous)
	if err != nil {
		t.Fatal(err)
	}
	pass, err := old.Issue(t.Context(), admission)
	if err != nil {
		t.Fatal(err)
	}
	verifyWithJWX(t, docs[0], pass, admission.AdmittedAt)
}

func TestJWKSHandler(t *testing.T) {
	local, _ := newLocalKey(t)
	key := &fakeKey{Key: local}
	key.fail.Store(true)
	issuer, err := localkeys.FixedIssuer(issuerURL, key)
	if err != nil {
		t.Fatal(err)
	}
	serve := func(h http.Handler) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/.well-known/jwks.json", nil))
		return rec
	}
	type answer struct {
		Status  int
		Headers map[string]string
		Body    string
	}
	view := func(rec *httptest.ResponseRecorder) answer {
		a := answer{Status: rec.Code, Headers: map[string]string{}, Body: rec.Body.String()}
		for k := range rec.Header() {
			a.Headers[k] = rec.Header().Get(k)
		}
		return a
	}

	// The key cannot be read: 503, and the next call tries again.
	want := answer{Status: 503, Headers: map[string]string{
		"Content-Type": "application/json; charset=utf-8", "Cache-Control": "no-store", "Retry-After": "1",
	}, Body: `{"code":"KEYS_UNAVAILABLE","message":"The signing keys are briefly unavailable; retry shortly."}`}
	if diff := cmp.Diff(want, view(serve(issuer.JWKSHandler(nil, nil)))); diff != "" {
		t.Errorf("failing key (-want +got):\n%s", diff)
	}
	var seen error
	rec := serve(issuer.JWKSHandler(func(w http.ResponseWriter, _ *http.Request, err error) {
		seen = err
		w.WriteHeader(http.StatusTeapot)
	}, nil))
	if rec.Code != http.StatusTeapot || !errors.Is(seen, errFake) {
		t.Errorf("onError: status %d, error %v", rec.Code, seen)
	}

	key.fail.Store(false)
	got := view(serve(issuer.JWKSHandler(nil, nil)))
	doc, _ := issuer.JWKS(t.Context())
	want = answer{Status: 200, Headers: map[string]string{
		"Content-Type": "application/jwk-set+json", "Cache-Control": "public, max-age=300", "Access-Control-Allow-Origin": "*",
	}, Body: string(doc)}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("JWKS answer (-want +got):\n%s", diff)
	}
}

func TestIssueFailsWithItsKey(t *testing.T) {
	local, _ := newLocalKey(t)
	key := &fakeKey{Key: local}
	issuer, err := localkeys.FixedIssuer(issuerURL, key)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := issuer.KeyID(t.Context()); err != nil {
		t.Fatal(err)
	}
	key.fail.Store(true)
	if _, err := issuer.Issue(t.Context(), admission); !errors.Is(err, errFake) {
		t.Errorf("Issue with a failing key: got %v, want its error", err)
	}
}

func TestLocalKeyFiles(t *testing.T) {
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	pkcs8, _ := x509.MarshalPKCS8PrivateKey(priv)
	sec1, _ := x509.MarshalECPrivateKey(priv)
	p384, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	p384DER, _ := x509.MarshalPKCS8PrivateKey(p384)
	rsaKey, _ := rsa.GenerateKey(rand.Reader, 2048)
	rsaDER, _ := x509.MarshalPKCS8PrivateKey(rsaKey)
	block := func(typ string, der []byte) []byte { return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}) }
	tests := []struct {
		name    string
		data    []byte
		wantErr bool
	}{
		{"PKCS8", block("PRIVATE KEY", pkcs8), false},
		{"SEC1", block("EC PRIVATE KEY", sec1), false},
		{"P384", block("PRIVATE KEY", p384DER), true},
		{"RSA", block("PRIVATE KEY", rsaDER), true},
		{"WrongBlock", block("CERTIFICATE", pkcs8), true},
		{"SEC1InPKCS8Block", block("PRIVATE KEY", sec1), true},
		{"NotPEM", []byte("not a key"), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "key.pem")
			if err := os.WriteFile(path, tt.data, 0o600); err != nil {
				t.Fatal(err)
			}
			k, err := localkeys.ReadFile(path)
			if tt.wantErr {
				if err == nil {
					t.Error("read a key that is not a P-256 private key")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			pub, _ := k.PublicKey(t.Context())
			if !pub.Equal(&priv.PublicKey) {
				t.Error("read another key")
			}
			// PEM writes it back as PKCS#8.
			out, err := localkeys.PEM(k)
			if err != nil {
				t.Fatal(err)
			}
			again, err := localkeys.Parse(out)
			if err != nil {
				t.Fatal(err)
			}
			if pub2, _ := again.PublicKey(t.Context()); !pub2.Equal(pub) {
				t.Error("PEM round trip changed the key")
			}
		})
	}
	if _, err := localkeys.ReadFile(filepath.Join(t.TempDir(), "missing.pem")); err == nil {
		t.Error("read a missing file")
	}
	if _, err := localkeys.NewKey(p384); err == nil {
		t.Error("NewLocalKey took a P-384 key")
	}
	if k, err := localkeys.Generate(); err != nil || k == nil {
		t.Errorf("GenerateKey: %v", err)
	}
}

// TestKMSClientReservesBeforeDeadline: kms:Decrypt gives up before the
// caller's deadline, leaving it time to answer: each attempt's deadline is
// the caller's less a quarter of the time left, at most
// KMSDeadlineReserve. The attempts are read by value from a transport that
// records them and answers like a KMS that never answers.
func TestKMSClientReservesBeforeDeadline(t *testing.T) {
	client, err := admissionpass.NewKMSClient(t.Context(), "http://127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var deadlines []time.Time
	client = kms.New(client.Options(), func(o *kms.Options) {
		o.Retryer = retry.AddWithMaxAttempts(o.Retryer, 1) // one attempt: no backoff to wait
		o.HTTPClient = &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
			d, _ := r.Context().Deadline()
			mu.Lock()
			deadlines = append(deadlines, d)
			mu.Unlock()
			return nil, context.DeadlineExceeded // as if it never answered
		})}
	})
	wrap := admissionpass.NewKMSWrapper(client, "alias/pass")
	for _, tc := range []struct {
		left, reserve time.Duration
	}{
		{time.Hour, admissionpass.KMSDeadlineReserve},    // min(500 ms, 15 min)
		{800 * time.Millisecond, 200 * time.Millisecond}, // min(500 ms, 800 ms / 4)
	} {
		deadline := time.Now().Add(tc.left)
		ctx, cancel := context.WithDeadline(t.Context(), deadline)
		deadlines = nil
		before := time.Now()
		_, err = wrap.Unwrap(ctx, []byte("blob"), map[string]string{"purpose": admissionpass.EncryptionPurpose})
		after := time.Now()
		cancel()
		if err == nil {
			t.Fatal("kms:Decrypt on a KMS that never answers succeeded")
		}
		if len(deadlines) == 0 {
			t.Fatalf("%v left: no attempt reached the transport", tc.left)
		}
		// The quarter is of the time left when the call started, which
		// was between before and after.
		most, least := min(tc.reserve, deadline.Sub(before)/4), min(tc.reserve, deadline.Sub(after)/4)
		for _, d := range deadlines {
			if kept := deadline.Sub(d); kept > most || kept < least {
				t.Errorf("%v left: an attempt's deadline keeps %v before the caller's, want %v (between %v and %v)", tc.left, kept, tc.reserve, least, most)
			}
		}
	}
}

// roundTripFunc is an http.RoundTripper made of a function.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// BenchmarkIssue is one pass signed by each kind of issuer (issue 22): a
// fixed key in memory (the baseline), a keyring over a MemoryKeyStore
// whose keys this process wraps (the local server's default), the same
// keyring with keys KMS makes and opens (moto behind kmstest's proxy).
// kms-calls/op is what the proxy received over the loop. (The Before, a
// kms:Sign per pass, was its key=kms-sign case until PASS_KMS_KEY_ID was
// retired.)
func BenchmarkIssue(b *testing.B) {
	a := passAdmission(1, time.Now())
	bench := func(b *testing.B, iss *admissionpass.Issuer, proxy *kmstest.Proxy) {
		if _, err := iss.Issue(b.Context(), a); err != nil { // the first key, made outside the loop
			b.Fatal(err)
		}
		var calls0 int64
		if proxy != nil {
			calls0 = proxy.Total()
		}
		for b.Loop() {
			if _, err := iss.Issue(b.Context(), a); err != nil {
				b.Fatal(err)
			}
		}
		if proxy != nil {
			b.ReportMetric(float64(proxy.Total()-calls0)/float64(b.N), "kms-calls/op")
		}
	}
	b.Run("key=fixed", func(b *testing.B) {
		k, err := localkeys.Generate()
		if err != nil {
			b.Fatal(err)
		}
		iss, err := localkeys.FixedIssuer(issuerURL, k)
		if err != nil {
			b.Fatal(err)
		}
		bench(b, iss, nil)
	})
	b.Run("key=keyring-local", func(b *testing.B) {
		w, err := localkeys.NewWrapper()
		if err != nil {
			b.Fatal(err)
		}
		bench(b, admissionpass.NewSetIssuer(issuerURL, admissionpass.NewKeyring(localkeys.NewKeyStore(), w)), nil)
	})
	b.Run("key=keyring-kms", func(b *testing.B) {
		proxy := kmstest.NewProxy(b)
		client := kmstest.ClientFor(b, proxy.URL())
		w := admissionpass.NewKMSWrapper(client, kmstest.NewWrapKey(b, client))
		bench(b, admissionpass.NewSetIssuer(issuerURL, admissionpass.NewKeyring(localkeys.NewKeyStore(), w)), proxy)
	})
}

// pkcs8 is priv's PKCS#8 encoding, to compare keys with cmp.
func pkcs8(t *testing.T, priv *ecdsa.PrivateKey) []byte {
	t.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	return der
}

// TestLocalWrapper: a LocalWrapper unwraps what it wrapped under the same
// encryption context, and nothing else.
func TestLocalWrapper(t *testing.T) {
	w, err := localkeys.NewWrapper()
	if err != nil {
		t.Fatal(err)
	}
	other, err := localkeys.NewWrapper()
	if err != nil {
		t.Fatal(err)
	}
	encCtx := map[string]string{"keyring": "passes", "slot": "2026-05-19T10:00:00Z"}
	tests := []struct {
		name    string
		unwrap  admissionpass.KeyWrapper
		encCtx  map[string]string
		tamper  func([]byte) []byte
		wantErr bool
	}{
		{name: "round trip", unwrap: w, encCtx: map[string]string{"slot": "2026-05-19T10:00:00Z", "keyring": "passes"}},
		{name: "other value", unwrap: w, encCtx: map[string]string{"keyring": "passes", "slot": "2026-05-19T11:00:00Z"}, wantErr: true},
		{name: "pair missing", unwrap: w, encCtx: map[string]string{"keyring": "passes"}, wantErr: true},
		{name: "no context", unwrap: w, wantErr: true},
		// Without lengths, keyring+passes and keyringp+asses would encode alike.
		{name: "boundary moved", unwrap: w, encCtx: map[string]string{"keyringp": "asses", "slot": "2026-05-19T10:00:00Z"}, wantErr: true},
		{name: "tampered", unwrap: w, encCtx: encCtx, tamper: func(b []byte) []byte { b[len(b)/2] ^= 1; return b }, wantErr: true},
		{name: "truncated", unwrap: w, encCtx: encCtx, tamper: func(b []byte) []byte { return b[:len(b)-1] }, wantErr: true},
		{name: "empty", unwrap: w, encCtx: encCtx, tamper: func([]byte) []byte { return nil }, wantErr: true},
		{name: "other wrapper", unwrap: other, encCtx: encCtx, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			priv, wrapped, err := w.NewKeyPair(t.Context(), encCtx)
			if err != nil {
				t.Fatalf("NewKeyPair: %v", err)
			}
			if priv.Curve != elliptic.P256() {
				t.Fatalf("NewKeyPair made a key on %s, want P-256", priv.Curve.Params().Name)
			}
			if tt.tamper != nil {
				wrapped = tt.tamper(wrapped)
			}
			got, err := tt.unwrap.Unwrap(t.Context(), wrapped, tt.encCtx)
			if tt.wantErr {
				if err == nil {
					t.Fatal("Unwrap succeeded, want an error")
				}
				return
			}
			if err != nil {
				t.Fatalf("Unwrap: %v", err)
			}
			if diff := cmp.Diff(pkcs8(t, priv), pkcs8(t, got)); diff != "" {
				t.Errorf("unwrapped key (-made +unwrapped):\n%s", diff)
			}
		})
	}
}

// fakeWrapKMS answers GenerateDataKeyPair and Decrypt with its fields and
// keeps the inputs.
type fakeWrapKMS struct {
	genOut *kms.GenerateDataKeyPairOutput
	decOut *kms.DecryptOutput
	genIn  *kms.GenerateDataKeyPairInput
	decIn  *kms.DecryptInput
}

func (f *fakeWrapKMS) GenerateDataKeyPair(_ context.Context, in *kms.GenerateDataKeyPairInput, _ ...func(*kms.Options)) (*kms.GenerateDataKeyPairOutput, error) {
	f.genIn = in
	if f.genOut == nil {
		return nil, errors.New("no answer")
	}
	return f.genOut, nil
}

func (f *fakeWrapKMS) Decrypt(_ context.Context, in *kms.DecryptInput, _ ...func(*kms.Options)) (*kms.DecryptOutput, error) {
	f.decIn = in
	if f.decOut == nil {
		return nil, errors.New("no answer")
	}
	return f.decOut, nil
}

// keyPairDER returns a new key on curve as PKCS#8 and its public half as
// PKIX.
func keyPairDER(t *testing.T, curve elliptic.Curve) (priv, pub []byte) {
	t.Helper()
	k, err := ecdsa.GenerateKey(curve, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	pub, err = x509.MarshalPKIXPublicKey(&k.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	return pkcs8(t, k), pub
}

// TestKMSWrapperCalls: KMSWrapper asks KMS for a P-256 pair under its key
// and context, decrypts pinned to its key, zeroes the plaintext KMS
// answered, and refuses keys that are not P-256 or do not match.
func TestKMSWrapperCalls(t *testing.T) {
	encCtx := map[string]string{"keyring": "passes"}
	blob := []byte("wrapped")
	privDER, pubDER := keyPairDER(t, elliptic.P256())
	_, otherPubDER := keyPairDER(t, elliptic.P256())
	p384DER, p384PubDER := keyPairDER(t, elliptic.P384())
	clone := func(b []byte) []byte { return append([]byte(nil), b...) }
	ignore := cmpopts.IgnoreUnexported(kms.GenerateDataKeyPairInput{}, kms.DecryptInput{})

	t.Run("NewKeyPair", func(t *testing.T) {
		plain := clone(privDER)
		f := &fakeWrapKMS{genOut: &kms.GenerateDataKeyPairOutput{PrivateKeyPlaintext: plain, PublicKey: pubDER, PrivateKeyCiphertextBlob: blob}}
		priv, wrapped, err := admissionpass.NewKMSWrapper(f, "alias/wrap").NewKeyPair(t.Context(), encCtx)
		if err != nil {
			t.Fatal(err)
		}
		wantIn := &kms.GenerateDataKeyPairInput{KeyId: aws.String("alias/wrap"), KeyPairSpec: types.DataKeyPairSpecEccNistP256, EncryptionContext: encCtx}
		if diff := cmp.Diff(wantIn, f.genIn, ignore); diff != "" {
			t.Errorf("GenerateDataKeyPair input (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(privDER, pkcs8(t, priv)); diff != "" {
			t.Errorf("key (-KMS's +returned):\n%s", diff)
		}
		if diff := cmp.Diff(blob, wrapped); diff != "" {
			t.Errorf("wrapped (-KMS's +returned):\n%s", diff)
		}
		if diff := cmp.Diff(make([]byte, len(plain)), plain); diff != "" {
			t.Errorf("PrivateKeyPlaintext not zeroed (-want +got):\n%s", diff)
		}
	})
	t.Run("Unwrap", func(t *testing.T) {
		plain := clone(privDER)
		f := &fakeWrapKMS{decOut: &kms.DecryptOutput{Plaintext: plain}}
		priv, err := admissionpass.NewKMSWrapper(f, "alias/wrap").Unwrap(t.Context(), blob, encCtx)
		if err != nil {
			t.Fatal(err)
		}
		wantIn := &kms.DecryptInput{KeyId: aws.String("alias/wrap"), CiphertextBlob: blob, EncryptionContext: encCtx}
		if diff := cmp.Diff(wantIn, f.decIn, ignore); diff != "" {
			t.Errorf("Decrypt input (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(privDER, pkcs8(t, priv)); diff != "" {
			t.Errorf("key (-KMS's +returned):\n%s", diff)
		}
		if diff := cmp.Diff(make([]byte, len(plain)), plain); diff != "" {
			t.Errorf("Plaintext not zeroed (-want +got):\n%s", diff)
		}
	})

	refusals := []struct {
		name    string
		genOut  *kms.GenerateDataKeyPairOutput
		decOut  *kms.DecryptOutput
		wantErr string
	}{
		{"KMS fails", nil, nil, "no answer"},
		{"P-384", &kms.GenerateDataKeyPairOutput{PrivateKeyPlaintext: p384DER, PublicKey: p384PubDER, PrivateKeyCiphertextBlob: blob},
			&kms.DecryptOutput{Plaintext: p384DER}, "want P-256"},
		{"not PKCS#8", &kms.GenerateDataKeyPairOutput{PrivateKeyPlaintext: []byte("junk"), PublicKey: pubDER, PrivateKeyCiphertextBlob: blob},
			&kms.DecryptOutput{Plaintext: []byte("junk")}, "not a PKCS#8"},
		{"other public key", &kms.GenerateDataKeyPairOutput{PrivateKeyPlaintext: privDER, PublicKey: otherPubDER, PrivateKeyCiphertextBlob: blob},
			nil, "does not match"},
		{"no blob", &kms.GenerateDataKeyPairOutput{PrivateKeyPlaintext: privDER, PublicKey: pubDER},
			nil, "no wrapped private key"},
	}
	for _, tt := range refusals {
		t.Run(tt.name, func(t *testing.T) {
			if tt.genOut != nil {
				tt.genOut.PrivateKeyPlaintext = clone(tt.genOut.PrivateKeyPlaintext)
			}
			w := admissionpass.NewKMSWrapper(&fakeWrapKMS{genOut: tt.genOut}, "alias/wrap")
			if _, _, err := w.NewKeyPair(t.Context(), encCtx); err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("NewKeyPair: got %v, want an error saying %q", err, tt.wantErr)
			}
			if tt.decOut == nil && tt.genOut != nil { // a fault of GenerateDataKeyPair's answer only
				return
			}
			if tt.decOut != nil {
				tt.decOut.Plaintext = clone(tt.decOut.Plaintext)
			}
			w = admissionpass.NewKMSWrapper(&fakeWrapKMS{decOut: tt.decOut}, "alias/wrap")
			if _, err := w.Unwrap(t.Context(), blob, encCtx); err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("Unwrap: got %v, want an error saying %q", err, tt.wantErr)
			}
		})
	}
}

// TestKMSWrapperOnMoto wraps and unwraps a key with KMS on moto_server,
// GenerateDataKeyPair answered by kmstest's shim: the key comes back under
// the same context and key only, for one call of each operation.
func TestKMSWrapperOnMoto(t *testing.T) {
	proxy := kmstest.NewProxy(t)
	client := kmstest.ClientFor(t, proxy.URL())
	keyID := kmstest.NewWrapKey(t, client)
	otherKeyID := kmstest.NewWrapKey(t, client)
	w := admissionpass.NewKMSWrapper(client, keyID)
	encCtx := map[string]string{"keyring": "passes", "slot": "2026-05-19T10:00:00Z"}

	priv, wrapped, err := w.NewKeyPair(t.Context(), encCtx)
	if err != nil {
		t.Fatalf("NewKeyPair: %v", err)
	}
	got, err := w.Unwrap(t.Context(), wrapped, encCtx)
	if err != nil {
		t.Fatalf("Unwrap: %v", err)
	}
	if diff := cmp.Diff(pkcs8(t, priv), pkcs8(t, got)); diff != "" {
		t.Errorf("unwrapped key (-made +unwrapped):\n%s", diff)
	}
	calls := map[string]int64{"GenerateDataKeyPair": proxy.Calls("GenerateDataKeyPair"), "Decrypt": proxy.Calls("Decrypt")}
	if diff := cmp.Diff(map[string]int64{"GenerateDataKeyPair": 1, "Decrypt": 1}, calls); diff != "" {
		t.Errorf("KMS calls for a wrap and an unwrap (-want +got):\n%s", diff)
	}

	if _, err := w.Unwrap(t.Context(), wrapped, map[string]string{"keyring": "passes", "slot": "2026-05-19T11:00:00Z"}); err == nil {
		t.Error("Unwrap under another encryption context succeeded")
	}
	if _, err := admissionpass.NewKMSWrapper(client, otherKeyID).Unwrap(t.Context(), wrapped, encCtx); err == nil {
		t.Error("Unwrap pinned to another KMS key succeeded")
	}
}
