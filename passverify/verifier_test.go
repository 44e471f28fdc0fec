package passverify_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/lestrrat-go/jwx/v3/jwa"
	"github.com/lestrrat-go/jwx/v3/jwk"
	"github.com/lestrrat-go/jwx/v3/jws"

	"github.com/example/waitingroom/internal/admissionpass"
	"github.com/example/waitingroom/internal/testing/await"
	"github.com/example/waitingroom/internal/testing/passtest"
	"github.com/example/waitingroom/passverify"
)

var b64 = base64.RawURLEncoding

// claimsOf are the claims of a pass for passtest.Admission.
func claimsOf() map[string]any {
	a := passtest.Admission
	return map[string]any{
		"iss": passtest.Issuer, "aud": a.ProgramID, "sub": a.TokenID, "jti": "pass-1",
		"iat": a.AdmittedAt.Unix(), "nbf": a.AdmittedAt.Unix(), "exp": a.ExpiresAt.Unix(), "ticket": a.Ticket,
	}
}

// signJWX signs claims with jwx, an implementation independent of the
// package's, under the protected header hdr.
func signJWX(t *testing.T, alg jwa.SignatureAlgorithm, key any, hdr map[string]any, claims map[string]any) string {
	t.Helper()
	payload, err := json.Marshal(claims)
	if err != nil {
		t.Fatal(err)
	}
	h := jws.NewHeaders()
	for k, v := range hdr {
		if err := h.Set(k, v); err != nil {
			t.Fatal(err)
		}
	}
	out, err := jws.Sign(payload, jws.WithKey(alg, key, jws.WithProtectedHeaders(h)))
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// unsigned builds a compact JWS by hand from hdr, claims and sig.
func unsigned(t *testing.T, hdr, claims map[string]any, sig []byte) string {
	t.Helper()
	h, _ := json.Marshal(hdr)
	c, _ := json.Marshal(claims)
	return b64.EncodeToString(h) + "." + b64.EncodeToString(c) + "." + b64.EncodeToString(sig)
}

// hs256 signs hdr.claims with HMAC-SHA256 keyed with key.
func hs256(t *testing.T, hdr, claims map[string]any, key []byte) string {
	t.Helper()
	tok := unsigned(t, hdr, claims, nil)
	input := tok[:len(tok)-1]
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(input))
	return input + "." + b64.EncodeToString(mac.Sum(nil))
}

func wantClaims() passverify.Claims {
	a := passtest.Admission
	return passverify.Claims{
		Issuer: passtest.Issuer, ProgramID: a.ProgramID, TokenID: a.TokenID, Ticket: a.Ticket,
		AdmittedAt: a.AdmittedAt.Truncate(time.Second), ExpiresAt: a.ExpiresAt.Truncate(time.Second),
	}
}

func TestVerify(t *testing.T) {
	room := passtest.NewRoom(t)
	clock := passtest.NewClock(passtest.Admission.AdmittedAt.Add(time.Minute))
	v := room.Verifier(t, clock, nil)
	kid := room.Key.KeyID(t)
	a := passtest.Admission
	valid := room.Pass(t, a)
	segments := strings.Split(valid, ".")
	hdr := map[string]any{"alg": "ES256", "kid": kid, "typ": "JWT"}

	otherKey := passtest.NewKey(t)
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	p384, err := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	spki, _ := x509.MarshalPKIXPublicKey(&room.Key.Private.PublicKey)
	pubPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: spki})
	pubPoint, _ := room.Key.Private.PublicKey.Bytes()
	jwksDoc, _ := json.Marshal(map[string]any{"kty": "EC", "crv": "P-256"})

	without := func(name string) map[string]any {
		c := claimsOf()
		delete(c, name)
		return c
	}
	with := func(name string, value any) map[string]any {
		c := claimsOf()
		c[name] = value
		return c
	}
	tamperedSig := func() string {
		sig, _ := b64.DecodeString(segments[2])
		sig[10] ^= 1
		return segments[0] + "." + segments[1] + "." + b64.EncodeToString(sig)
	}
	tamperedPayload := func() string {
		raw, _ := b64.DecodeString(segments[1])
		forged := strings.Replace(string(raw), `"ticket":4242`, `"ticket":1`, 1)
		if forged == string(raw) {
			t.Fatalf("no ticket in %s", raw)
		}
		return segments[0] + "." + b64.EncodeToString([]byte(forged)) + "." + segments[2]
	}

	tests := []struct {
		name    string
		pass    string
		wantErr error // nil: valid
	}{
		{"Valid", valid, nil},
		{"ValidFromJWX", signJWX(t, jwa.ES256(), room.Key.Private, hdr, claimsOf()), nil},
		{"TamperedPayload", tamperedPayload(), passverify.ErrSignature},
		{"TamperedSignature", tamperedSig(), passverify.ErrSignature},
		{"TamperedHeader", b64.EncodeToString([]byte(`{"alg":"ES256","kid":"`+kid+`","typ":"JWS"}`)) + "." + segments[1] + "." + segments[2], passverify.ErrSignature},
		{"SignedByAnotherKeyUnderTheKid", signJWX(t, jwa.ES256(), otherKey.Private, hdr, claimsOf()), passverify.ErrSignature},
		{"OtherProgram", room.Pass(t, admissionpass.Admission{ProgramID: "other", TokenID: a.TokenID, Ticket: 1, AdmittedAt: a.AdmittedAt, ExpiresAt: a.ExpiresAt}), passverify.ErrAudience},
		{"OtherIssuer", passtest.IssuePass(t, "https://evil.example.com", room.Key, a), passverify.ErrIssuer},
		{"Expired", room.Pass(t, admissionpass.Admission{ProgramID: "gala", TokenID: a.TokenID, AdmittedAt: a.AdmittedAt.Add(-time.Hour), ExpiresAt: a.AdmittedAt.Add(-time.Minute)}), passverify.ErrExpired},
		{"NotYetValid", room.Pass(t, admissionpass.Admission{ProgramID: "gala", TokenID: a.TokenID, AdmittedAt: a.AdmittedAt.Add(time.Hour), ExpiresAt: a.AdmittedAt.Add(2 * time.Hour)}), passverify.ErrNotYetValid},
		{"IssuedInTheFuture", signJWX(t, jwa.ES256(), room.Key.Private, hdr, with("iat", a.AdmittedAt.Add(time.Hour).Unix())), passverify.ErrNotYetValid},
		{"AlgNone", unsigned(t, map[string]any{"alg": "none", "kid": kid, "typ": "JWT"}, claimsOf(), nil), passverify.ErrAlgorithm},
		{"HS256KeyedWithPublicKeyPEM", hs256(t, map[string]any{"alg": "HS256", "kid": kid}, claimsOf(), pubPEM), passverify.ErrAlgorithm},
		{"HS256KeyedWithPublicPoint", hs256(t, map[string]any{"alg": "HS256", "kid": kid}, claimsOf(), pubPoint), passverify.ErrAlgorithm},
		{"HS256KeyedWithJWK", hs256(t, map[string]any{"alg": "HS256", "kid": kid}, claimsOf(), jwksDoc), passverify.ErrAlgorithm},
		{"RS256", signJWX(t, jwa.RS256(), rsaKey, map[string]any{"kid": kid}, claimsOf()), passverify.ErrAlgorithm},
		{"ES384", signJWX(t, jwa.ES384(), p384, map[string]any{"kid": kid}, claimsOf()), passverify.ErrAlgorithm},
		{"UnknownKid", room.Pass(t, a, otherKey), passverify.ErrUnknownKey},
		{"NoKid", signJWX(t, jwa.ES256(), room.Key.Private, map[string]any{"typ": "JWT"}, claimsOf()), passverify.ErrUnknownKey},
		{"NoTicket", signJWX(t, jwa.ES256(), room.Key.Private, hdr, without("ticket")), passverify.ErrMalformed},
		{"NoExp", signJWX(t, jwa.ES256(), room.Key.Private, hdr, without("exp")), passverify.ErrMalformed},
		{"NoJTI", signJWX(t, jwa.ES256(), room.Key.Private, hdr, without("jti")), passverify.ErrMalformed},
		{"TicketNotANumber", signJWX(t, jwa.ES256(), room.Key.Private, hdr, with("ticket", "many")), passverify.ErrMalformed},
		{"Garbage", "not.a.pass", passverify.ErrMalformed},
		{"Empty", "", passverify.ErrMalformed},
		{"TooLong", strings.Repeat("a", 5000), passverify.ErrMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := v.Verify(t.Context(), tt.pass)
			if tt.wantErr == nil {
				if err != nil {
					t.Fatalf("Verify: %v", err)
				}
				if diff := cmp.Diff(wantClaims(), got, cmpopts.IgnoreFields(passverify.Claims{}, "JTI")); diff != "" || got.JTI == "" {
					t.Errorf("claims (-want +got):\n%s", diff)
				}
				return
			}
			if !errors.Is(err, tt.wantErr) || !errors.Is(err, passverify.ErrInvalid) {
				t.Errorf("Verify: got %v, want %v (and ErrInvalid)", err, tt.wantErr)
			}
			if !cmp.Equal(got, passverify.Claims{}) {
				t.Errorf("a refused pass gave claims %+v", got)
			}
		})
	}
}

func TestVerifyLeeway(t *testing.T) {
	room := passtest.NewRoom(t)
	a := passtest.Admission
	pass := room.Pass(t, a)
	nbf, exp := a.AdmittedAt.Truncate(time.Second), a.ExpiresAt.Truncate(time.Second)
	tests := []struct {
		name    string
		leeway  time.Duration
		now     time.Time
		wantErr error
	}{
		{"DefaultBeforeExpiry", 0, exp.Add(29 * time.Second), nil},
		{"DefaultAfterExpiry", 0, exp.Add(31 * time.Second), passverify.ErrExpired},
		{"DefaultBeforeNbf", 0, nbf.Add(-29 * time.Second), nil},
		{"DefaultLongBeforeNbf", 0, nbf.Add(-31 * time.Second), passverify.ErrNotYetValid},
		{"LongerLeeway", 2 * time.Minute, exp.Add(time.Minute), nil},
		{"NoLeeway", -1, exp.Add(time.Second), passverify.ErrExpired},
		{"NoLeewayAtExpiry", -1, exp, nil},
		{"NoLeewayBeforeNbf", -1, nbf.Add(-time.Second), passverify.ErrNotYetValid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := room.Verifier(t, passtest.NewClock(tt.now), func(c *passverify.Config) { c.Leeway = tt.leeway })
			_, err := v.Verify(t.Context(), pass)
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil && err != nil) {
				t.Errorf("Verify at %v: got %v, want %v", tt.now, err, tt.wantErr)
			}
		})
	}
}

func TestNewRefusesBadConfig(t *testing.T) {
	ok := passverify.Config{JWKSURL: "https://queue.example.com/.well-known/jwks.json", Issuer: passtest.Issuer, ProgramID: "gala"}
	tests := []struct {
		name   string
		change func(*passverify.Config)
	}{
		{"NoURL", func(c *passverify.Config) { c.JWKSURL = "" }},
		{"RelativeURL", func(c *passverify.Config) { c.JWKSURL = "/.well-known/jwks.json" }},
		{"FileURL", func(c *passverify.Config) { c.JWKSURL = "file:///etc/jwks.json" }},
		{"NoIssuer", func(c *passverify.Config) { c.Issuer = "" }},
		{"NoProgram", func(c *passverify.Config) { c.ProgramID = "" }},
		{"TTLBoundsCrossed", func(c *passverify.Config) { c.MinCacheTTL, c.MaxCacheTTL = time.Hour, time.Minute }},
	}
	if _, err := passverify.New(ok); err != nil {
		t.Fatalf("New(%+v): %v", ok, err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := ok
			tt.change(&cfg)
			if _, err := passverify.New(cfg); err == nil {
				t.Errorf("New took %+v", cfg)
			}
		})
	}
}

// TestJWKSCache: a fetched JWKS is kept for its max-age, within the
// bounds.
func TestJWKSCache(t *testing.T) {
	tests := []struct {
		name         string
		cacheControl string
		wantTTL      time.Duration
	}{
		{"MaxAge", "public, max-age=120", 2 * time.Minute},
		{"QuotedMaxAge", `max-age="90"`, 90 * time.Second},
		{"MaxAgeBelowMinimum", "max-age=1", passverify.DefaultMinCacheTTL},
		{"MaxAgeAboveMaximum", "max-age=99999999999", passverify.DefaultMaxCacheTTL},
		{"NoHeader", "", passverify.DefaultCacheTTL},
		{"NoMaxAge", "no-cache", passverify.DefaultCacheTTL},
		{"EmptyMaxAge", "max-age=", passverify.DefaultCacheTTL},
		{"BadMaxAge", "max-age=soon", passverify.DefaultCacheTTL},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			room := passtest.NewRoom(t)
			room.SetCacheControl(tt.cacheControl)
			clock := passtest.NewClock(passtest.Admission.AdmittedAt)
			v := room.Verifier(t, clock, func(c *passverify.Config) { c.Leeway = 24 * time.Hour })
			pass := room.Pass(t, passtest.Admission)
			verify := func(wantFetches int) {
				t.Helper()
				if _, err := v.Verify(t.Context(), pass); err != nil {
					t.Fatal(err)
				}
				if got := room.Fetches(); got != wantFetches {
					t.Errorf("after %v: %d fetches, want %d", clock.Now().Sub(passtest.Admission.AdmittedAt), got, wantFetches)
				}
			}
			verify(1)
			clock.Advance(tt.wantTTL - time.Second)
			verify(1)
			clock.Advance(2 * time.Second)
			verify(2)
		})
	}
}

// TestJWKSRotation: a new key is fetched when its passes arrive; a key
// gone from the JWKS stops verifying once the cached copy expires.
func TestJWKSRotation(t *testing.T) {
	room := passtest.NewRoom(t)
	clock := passtest.NewClock(passtest.Admission.AdmittedAt.Add(time.Minute))
	v := room.Verifier(t, clock, nil)
	old, next := room.Key, passtest.NewKey(t)
	oldPass, nextPass := room.Pass(t, passtest.Admission), room.Pass(t, passtest.Admission, next)

	if _, err := v.Verify(t.Context(), oldPass); err != nil {
		t.Fatal(err)
	}
	// Rotation: next signs, old is still published. Right after a fetch
	// the new kid does not cause another one.
	room.Publish(t, next, old)
	if _, err := v.Verify(t.Context(), nextPass); !errors.Is(err, passverify.ErrUnknownKey) {
		t.Errorf("a pass of the new key right after a fetch: got %v, want ErrUnknownKey", err)
	}
	clock.Advance(passverify.DefaultMinRefreshInterval)
	if _, err := v.Verify(t.Context(), nextPass); err != nil {
		t.Errorf("a pass of the new key: %v", err)
	}
	if got := room.Fetches(); got != 2 {
		t.Errorf("%d fetches, want 2 (the new kid caused one)", got)
	}
	if _, err := v.Verify(t.Context(), oldPass); err != nil {
		t.Errorf("a pass of the previous key during the rotation: %v", err)
	}
	// The previous key is dropped; once the cached JWKS expires, its
	// passes are refused.
	room.Publish(t, next)
	clock.Advance(admissionpass.JWKSMaxAge + time.Second)
	if _, err := v.Verify(t.Context(), oldPass); !errors.Is(err, passverify.ErrUnknownKey) {
		t.Errorf("a pass of a key no longer in the JWKS: got %v, want ErrUnknownKey", err)
	}
	if _, err := v.Verify(t.Context(), nextPass); err != nil {
		t.Errorf("a pass of the current key: %v", err)
	}
}

// TestUnknownKidFlood: passes with forged kids fetch the JWKS at most once
// per MinRefreshInterval.
func TestUnknownKidFlood(t *testing.T) {
	room := passtest.NewRoom(t)
	clock := passtest.NewClock(passtest.Admission.AdmittedAt.Add(time.Minute))
	v := room.Verifier(t, clock, nil)
	if _, err := v.Verify(t.Context(), room.Pass(t, passtest.Admission)); err != nil {
		t.Fatal(err)
	}
	forged := func() string {
		return signJWX(t, jwa.ES256(), room.Key.Private, map[string]any{"kid": rand.Text()}, claimsOf())
	}
	flood := func() {
		t.Helper()
		for range 50 {
			if _, err := v.Verify(t.Context(), forged()); !errors.Is(err, passverify.ErrUnknownKey) {
				t.Fatalf("forged kid: got %v, want ErrUnknownKey", err)
			}
		}
	}
	// Within MinRefreshInterval of the last fetch: none.
	clock.Advance(time.Second)
	flood()
	if got := room.Fetches(); got != 1 {
		t.Errorf("after a flood right after a fetch: %d fetches, want 1", got)
	}
	clock.Advance(passverify.DefaultMinRefreshInterval)
	flood()
	if got := room.Fetches(); got != 2 {
		t.Errorf("after a flood past the interval: %d fetches, want 2", got)
	}
	clock.Advance(passverify.DefaultMinRefreshInterval / 2)
	flood()
	if got := room.Fetches(); got != 2 {
		t.Errorf("after a second flood within the interval: %d fetches, want 2", got)
	}
	clock.Advance(passverify.DefaultMinRefreshInterval / 2)
	flood()
	if got := room.Fetches(); got != 3 {
		t.Errorf("after a flood past the interval again: %d fetches, want 3", got)
	}
}

// TestJWKSUnavailable: without a JWKS, passes cannot be checked
// (ErrKeysUnavailable, not a refusal); a stale copy is used while the JWKS
// is down; failed fetches are retried at most once per
// MinRefreshInterval.
func TestJWKSUnavailable(t *testing.T) {
	room := passtest.NewRoom(t)
	clock := passtest.NewClock(passtest.Admission.AdmittedAt.Add(time.Minute))
	v := room.Verifier(t, clock, nil)
	pass := room.Pass(t, passtest.Admission)
	check := func(wantErr error, wantFetches int) {
		t.Helper()
		_, err := v.Verify(t.Context(), pass)
		if (wantErr == nil && err != nil) || !errors.Is(err, wantErr) {
			t.Errorf("Verify: got %v, want %v", err, wantErr)
		}
		if wantErr == passverify.ErrKeysUnavailable && errors.Is(err, passverify.ErrInvalid) {
			t.Errorf("%v counts as a refusal", err)
		}
		if got := room.Fetches(); got != wantFetches {
			t.Errorf("%d fetches, want %d", got, wantFetches)
		}
	}
	room.SetStatus(http.StatusInternalServerError)
	check(passverify.ErrKeysUnavailable, 1)
	check(passverify.ErrKeysUnavailable, 1)
	clock.Advance(passverify.DefaultMinRefreshInterval)
	room.SetStatus(http.StatusOK)
	check(nil, 2)

	// Down again once the copy expired: the stale copy still serves.
	room.SetStatus(http.StatusServiceUnavailable)
	clock.Advance(admissionpass.JWKSMaxAge + time.Second)
	check(nil, 3)
	check(nil, 3)
	clock.Advance(passverify.DefaultMinRefreshInterval)
	check(nil, 4)

	// A JWKS that is not JSON is a failed fetch too.
	other := passtest.NewRoom(t)
	other.PublishDocument([]byte("<html>"))
	if _, err := other.Verifier(t, clock, nil).Verify(t.Context(), other.Pass(t, passtest.Admission)); !errors.Is(err, passverify.ErrKeysUnavailable) {
		t.Errorf("a JWKS that is not JSON: got %v, want ErrKeysUnavailable", err)
	}
}

// TestJWKSFetch: the fetch goes through the given client and gives up at
// FetchTimeout; concurrent first lookups share one fetch.
func TestJWKSFetch(t *testing.T) {
	t.Run("Timeout", func(t *testing.T) {
		// The fetch carries a deadline FetchTimeout away; a transport that
		// finds it passed at once stands for a JWKS that never answers.
		room := passtest.NewRoom(t)
		var deadline time.Time
		expired := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			deadline, _ = r.Context().Deadline()
			return nil, context.DeadlineExceeded
		})
		const timeout = 100 * time.Millisecond
		v := room.Verifier(t, passtest.NewClock(passtest.Admission.AdmittedAt), func(c *passverify.Config) {
			c.FetchTimeout, c.HTTPClient = timeout, &http.Client{Transport: expired}
		})
		before := time.Now()
		_, err := v.Verify(t.Context(), room.Pass(t, passtest.Admission))
		after := time.Now()
		if !errors.Is(err, passverify.ErrKeysUnavailable) {
			t.Errorf("got %v, want ErrKeysUnavailable", err)
		}
		if deadline.Before(before.Add(timeout)) || deadline.After(after.Add(timeout)) {
			t.Errorf("the fetch's deadline %v after the call began, want FetchTimeout (%v)", deadline.Sub(before), timeout)
		}
	})
	t.Run("Client", func(t *testing.T) {
		room := passtest.NewRoom(t)
		client := &http.Client{Transport: headerTransport{"X-Site", "box-office"}}
		v := room.Verifier(t, passtest.NewClock(passtest.Admission.AdmittedAt), func(c *passverify.Config) { c.HTTPClient = client })
		if _, err := v.Verify(t.Context(), room.Pass(t, passtest.Admission)); err != nil {
			t.Fatal(err)
		}
		if got := room.LastRequestHeader().Get("X-Site"); got != "box-office" {
			t.Errorf("the JWKS request did not go through the given client (X-Site %q)", got)
		}
	})
	t.Run("ConcurrentFirstLookups", func(t *testing.T) {
		// The first lookup's fetch is held until the other 19 wait for it.
		room := passtest.NewRoom(t)
		arrived, release := room.Hold()
		defer release()
		v := room.Verifier(t, passtest.NewClock(passtest.Admission.AdmittedAt), nil)
		var waiting await.Counter
		passverify.OnFetchWait(v, waiting.Add)
		pass := room.Pass(t, passtest.Admission)
		var wg sync.WaitGroup
		go func() {
			<-arrived
			if err := waiting.Wait(t.Context(), 19); err == nil {
				release()
			}
		}()
		for range 20 {
			wg.Go(func() {
				if _, err := v.Verify(t.Context(), pass); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		if got := room.Fetches(); got != 1 {
			t.Errorf("%d fetches for 20 concurrent lookups, want 1", got)
		}
	})
}

type headerTransport struct{ key, value string }

func (h headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set(h.key, h.value)
	return http.DefaultTransport.RoundTrip(r)
}

// TestJWKSKeyFilter: only public EC P-256 signing keys with a kid and alg
// ES256 (or none) verify; other entries are skipped, not fatal.
func TestJWKSKeyFilter(t *testing.T) {
	room := passtest.NewRoom(t)
	clock := passtest.NewClock(passtest.Admission.AdmittedAt)
	good, enc, rs, priv, nokid := passtest.NewKey(t), passtest.NewKey(t), passtest.NewKey(t), passtest.NewKey(t), passtest.NewKey(t)
	p384, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	entry := func(raw any, fields map[string]any) json.RawMessage {
		k, err := jwk.Import(raw)
		if err != nil {
			t.Fatal(err)
		}
		for name, value := range fields {
			if err := k.Set(name, value); err != nil {
				t.Fatal(err)
			}
		}
		b, err := json.Marshal(k)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	doc, _ := json.Marshal(map[string]any{"keys": []json.RawMessage{
		entry(&good.Private.PublicKey, map[string]any{"kid": "good", "alg": "ES256", "use": "sig"}),
		entry(&enc.Private.PublicKey, map[string]any{"kid": "enc", "use": "enc"}),
		entry(&rs.Private.PublicKey, map[string]any{"kid": "rs", "alg": "RS256"}),
		entry(priv.Private, map[string]any{"kid": "priv"}),
		entry(&nokid.Private.PublicKey, nil),
		entry(&p384.PublicKey, map[string]any{"kid": "p384"}),
		json.RawMessage(`{"kty":"EC","crv":"P-256","kid":"broken","x":"AAAA","y":"AAAA"}`),
		json.RawMessage(`{"kty":"OKP","crv":"Ed448","kid":"ed448","x":"AAAA"}`),
	}})
	room.PublishDocument(doc)
	v := room.Verifier(t, clock, nil)
	pass := func(kid string, key *ecdsa.PrivateKey) string {
		return signJWX(t, jwa.ES256(), key, map[string]any{"kid": kid}, claimsOf())
	}
	if _, err := v.Verify(t.Context(), pass("good", good.Private)); err != nil {
		t.Errorf("the good key: %v", err)
	}
	for kid, key := range map[string]*ecdsa.PrivateKey{"enc": enc.Private, "rs": rs.Private, "priv": priv.Private, "broken": good.Private, "ed448": good.Private} {
		if _, err := v.Verify(t.Context(), pass(kid, key)); !errors.Is(err, passverify.ErrUnknownKey) {
			t.Errorf("kid %q: got %v, want ErrUnknownKey", kid, err)
		}
	}
}

// TestVerifyBypass: a bypass pass (ticket 0, "bypass": true), signed by
// the waiting room's issuer or by jwx, verifies like any pass and says
// so in Claims.Bypass, also through a Gate's cookie; a bypass claim that
// is not a boolean is malformed.
func TestVerifyBypass(t *testing.T) {
	room := passtest.NewRoom(t)
	clock := passtest.NewClock(passtest.Admission.AdmittedAt.Add(time.Minute))
	v := room.Verifier(t, clock, nil)
	hdr := map[string]any{"alg": "ES256", "kid": room.Key.KeyID(t), "typ": "JWT"}
	a := passtest.Admission
	a.Ticket, a.Bypass = 0, true
	jwxClaims := claimsOf()
	jwxClaims["ticket"], jwxClaims["bypass"] = 0, true
	want := wantClaims()
	want.Ticket, want.Bypass = 0, true
	for name, pass := range map[string]string{"Issuer": room.Pass(t, a), "JWX": signJWX(t, jwa.ES256(), room.Key.Private, hdr, jwxClaims)} {
		got, err := v.Verify(t.Context(), pass)
		if err != nil {
			t.Fatalf("%s: Verify: %v", name, err)
		}
		if diff := cmp.Diff(want, got, cmpopts.IgnoreFields(passverify.Claims{}, "JTI")); diff != "" {
			t.Errorf("%s: claims (-want +got):\n%s", name, diff)
		}
	}
	jwxClaims["bypass"] = "yes"
	if _, err := v.Verify(t.Context(), signJWX(t, jwa.ES256(), room.Key.Private, hdr, jwxClaims)); !errors.Is(err, passverify.ErrMalformed) {
		t.Errorf("bypass \"yes\": %v, want ErrMalformed", err)
	}

	gate, err := passverify.NewGate(v, passverify.GateConfig{WaitingRoomURL: passtest.WaitingRoomURL, CookieSecrets: [][]byte{newSecret(t)}})
	if err != nil {
		t.Fatal(err)
	}
	var seen []passverify.Claims
	h := gate.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, _ := passverify.FromContext(r.Context())
		seen = append(seen, c)
	}))
	ex := httptest.NewRecorder()
	h.ServeHTTP(ex, httptest.NewRequest(http.MethodGet, passtest.WithPass("https://shop.example.com/", room.Pass(t, a)), nil))
	cookies := ex.Result().Cookies()
	if len(cookies) != 1 {
		t.Fatalf("exchange: %d cookies, want 1", len(cookies))
	}
	r := httptest.NewRequest(http.MethodGet, "https://shop.example.com/", nil)
	r.AddCookie(cookies[0])
	h.ServeHTTP(httptest.NewRecorder(), r)
	if len(seen) != 1 || !seen[0].Bypass || seen[0].Ticket != 0 {
		t.Errorf("claims through the cookie: %+v, want one with Bypass and ticket 0", seen)
	}
}

// roundTripFunc is an http.RoundTripper of a function.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestVerifyAccount: a pass of an account's place carries the account in
// Claims.Account, also through a Gate's cookie, so that a site refuses it
// from another account; a pass without one has none.
func TestVerifyAccount(t *testing.T) {
	room := passtest.NewRoom(t)
	clock := passtest.NewClock(passtest.Admission.AdmittedAt.Add(time.Minute))
	v := room.Verifier(t, clock, nil)
	a := passtest.Admission
	a.Account = "alice@shop"
	got, err := v.Verify(t.Context(), room.Pass(t, a))
	if err != nil || got.Account != "alice@shop" {
		t.Fatalf("Verify = %+v, %v; want account alice@shop", got, err)
	}
	if plain, err := v.Verify(t.Context(), room.Pass(t, passtest.Admission)); err != nil || plain.Account != "" {
		t.Errorf("a pass without an account: %+v, %v", plain, err)
	}
	gate, err := passverify.NewGate(v, passverify.GateConfig{WaitingRoomURL: passtest.WaitingRoomURL, CookieSecrets: [][]byte{newSecret(t)}})
	if err != nil {
		t.Fatal(err)
	}
	var seen []string
	h := gate.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, _ := passverify.FromContext(r.Context())
		seen = append(seen, c.Account)
	}))
	ex := httptest.NewRecorder()
	h.ServeHTTP(ex, httptest.NewRequest(http.MethodGet, passtest.WithPass("https://shop.example.com/", room.Pass(t, a)), nil))
	r := httptest.NewRequest(http.MethodGet, "https://shop.example.com/", nil)
	for _, c := range ex.Result().Cookies() {
		r.AddCookie(c)
	}
	h.ServeHTTP(httptest.NewRecorder(), r)
	if len(seen) != 1 || seen[0] != "alice@shop" {
		t.Errorf("accounts through the cookie: %q, want [alice@shop]", seen)
	}
}
