// Package enqueue verifies the enqueue tokens a site gives its signed-in
// visitors: JWTs, signed by a key of the site's JWKS, naming the account that
// enters a program's queue.
package enqueue

import (
	"cmp"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/example/waitingroom/internal/settings"
	"github.com/example/waitingroom/passverify/jwks"
)

// Bounds of a token and of the key cache.
const (
	MaxTokenSize   = 4096             // bytes of a raw token
	MaxTTL         = 10 * time.Minute // how far ahead exp may be
	Leeway         = 30 * time.Second // how far exp, nbf and iat may be off
	MaxAccountSize = 256              // characters of sub
	maxSites       = 1024             // JWKS URLs cached at once
)

// ErrInvalid is matched (errors.Is) by every refusal of a token; the error
// wraps it with the reason.
var ErrInvalid = errors.New("enqueue: invalid enqueue token")

// ErrKeysUnavailable means the site's JWKS could not be fetched and no key of
// it is known: the token could not be checked, which says nothing of it.
var ErrKeysUnavailable = errors.New("enqueue: the site's keys are unavailable")

// Verifier checks enqueue tokens; build one per process. It keeps the keys of
// up to 1,024 JWKS URLs and is safe for concurrent use.
type Verifier struct {
	client    *http.Client
	now       func() time.Time
	allowHTTP bool

	mu     sync.Mutex
	caches map[string]*jwks.Cache // by JWKS URL
}

// Option adjusts a Verifier.
type Option func(*Verifier)

// AllowHTTP lets the Verifier fetch a JWKS over plain http from a loopback
// host, as the local dev server's sites serve it.
func AllowHTTP() Option { return func(v *Verifier) { v.allowHTTP = true } }

// NewVerifier returns a Verifier fetching with client (nil: a default one)
// by the clock now (nil: time.Now). It never follows a redirect.
func NewVerifier(client *http.Client, now func() time.Time, opts ...Option) *Verifier {
	c := *cmp.Or(client, &http.Client{Timeout: 5 * time.Second})
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	if now == nil {
		now = time.Now
	}
	v := &Verifier{client: &c, now: now, caches: make(map[string]*jwks.Cache)}
	for _, o := range opts {
		o(v)
	}
	return v
}

// Verify checks raw against the site's keys at jwksURL and returns its sub.
// raw must be an ES256 (P-256) or RS256 (RSA >= 2048 bits) JWT with a kid, from
// issuer, for programID, expiring within MaxTTL. Its error matches ErrInvalid or
// ErrKeysUnavailable.
func (v *Verifier) Verify(ctx context.Context, jwksURL, issuer, programID, raw string) (account string, err error) {
	if jwksURL == "" || issuer == "" {
		return "", fmt.Errorf("%w: the program takes no enqueue tokens", ErrInvalid)
	}
	if len(raw) > MaxTokenSize {
		return "", fmt.Errorf("%w: %d bytes", ErrInvalid, len(raw))
	}
	tok, err := jwt.ParseSigned(raw, []jose.SignatureAlgorithm{jose.ES256, jose.RS256})
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if len(tok.Headers) != 1 || tok.Headers[0].KeyID == "" {
		return "", fmt.Errorf("%w: no kid", ErrInvalid)
	}
	cache, err := v.cache(jwksURL)
	if err != nil {
		return "", err
	}
	hdr := tok.Headers[0]
	key, err := cache.Key(ctx, hdr.KeyID)
	switch {
	case errors.Is(err, jwks.ErrUnknownKey):
		return "", fmt.Errorf("%w: %w", ErrInvalid, err)
	case err != nil:
		return "", fmt.Errorf("%w: %w", ErrKeysUnavailable, err)
	}
	if err := fits(key, hdr.Algorithm); err != nil {
		return "", fmt.Errorf("%w: kid %q: %w", ErrInvalid, hdr.KeyID, err)
	}
	var c jwt.Claims
	if err := tok.Claims(key.Key, &c); err != nil {
		return "", fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if err := check(c, issuer, programID, v.now()); err != nil {
		return "", fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return c.Subject, nil
}

// fits reports why key may not verify alg, if it may not.
func fits(key jose.JSONWebKey, alg string) error {
	if key.Algorithm != "" && key.Algorithm != alg {
		return fmt.Errorf("key for %s, token signed with %s", key.Algorithm, alg)
	}
	switch k := key.Key.(type) {
	case *ecdsa.PublicKey:
		if alg != string(jose.ES256) || k.Curve != elliptic.P256() {
			return fmt.Errorf("%s with an EC key on %s, want ES256 on P-256", alg, k.Curve.Params().Name)
		}
	case *rsa.PublicKey:
		if alg != string(jose.RS256) || k.N.BitLen() < 2048 {
			return fmt.Errorf("%s with an RSA key of %d bits, want RS256 with at least 2048", alg, k.N.BitLen())
		}
	default:
		return fmt.Errorf("%s with a %T", alg, k)
	}
	return nil
}

// check reports why c is not a token of issuer for programID valid at now, if it is not.
func check(c jwt.Claims, issuer, programID string, now time.Time) error {
	switch {
	case c.Issuer != issuer:
		return fmt.Errorf("iss %q, want %q", c.Issuer, issuer)
	case !c.Audience.Contains(programID):
		return fmt.Errorf("aud %q, want %q", []string(c.Audience), programID)
	case c.Expiry == nil:
		return errors.New("no exp")
	case c.Expiry.Time().After(now.Add(MaxTTL + Leeway)):
		return fmt.Errorf("exp %v more than %v ahead", c.Expiry.Time().UTC(), MaxTTL)
	case !validAccount(c.Subject):
		return fmt.Errorf("sub %.64q is not 1 to %d printable characters", c.Subject, MaxAccountSize)
	}
	return c.ValidateWithLeeway(jwt.Expected{Time: now}, Leeway)
}

// validAccount reports whether sub is 1 to MaxAccountSize printable characters.
func validAccount(sub string) bool {
	return sub != "" && utf8.ValidString(sub) && utf8.RuneCountInString(sub) <= MaxAccountSize &&
		!strings.ContainsFunc(sub, func(r rune) bool { return !unicode.IsPrint(r) })
}

// cache returns the key cache of jwksURL, making it (and evicting another when
// full) if need be; its error matches ErrInvalid for a URL it may not fetch.
func (v *Verifier) cache(jwksURL string) (*jwks.Cache, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if c, ok := v.caches[jwksURL]; ok {
		return c, nil
	}
	u, err := url.Parse(jwksURL)
	if err != nil || u.Host == "" || u.Scheme != "https" && !(v.allowHTTP && settings.SecureURL(u)) {
		return nil, fmt.Errorf("%w: the program's JWKS URL %q is not https (http only for a loopback host when allowed)", ErrInvalid, jwksURL)
	}
	if len(v.caches) >= maxSites {
		for old := range v.caches { // any one: the map's order is random enough
			delete(v.caches, old)
			break
		}
	}
	c := jwks.New(jwks.Config{
		URL: jwksURL, Client: v.client, FetchTimeout: 5 * time.Second, Now: v.now,
		DefaultTTL: 5 * time.Minute, MinTTL: time.Minute, MaxTTL: 24 * time.Hour, MinRefresh: 10 * time.Second,
		Usable: usable,
	})
	v.caches[jwksURL] = c
	return c, nil
}

// usable reports whether k may sign tokens: an EC or RSA public key for signatures.
func usable(k jose.JSONWebKey) bool {
	switch k.Key.(type) {
	case *ecdsa.PublicKey, *rsa.PublicKey:
		return k.Use == "" || k.Use == "sig"
	}
	return false
}
