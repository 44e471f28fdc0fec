// Package admissionpass signs admission passes, ES256 JWTs saying a token
// was admitted to a program and until when, and serves the JWKS that
// verifies them (package passverify). docs/admission-pass.md describes them.
package admissionpass

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// Admission is what a pass attests: one token admitted to one program.
type Admission struct {
	ProgramID string
	TokenID   string
	Ticket    int64
	// AdmittedAt is the admission: the pass's iat and nbf.
	AdmittedAt time.Time
	// ExpiresAt is the end of the admission window: the pass's exp.
	ExpiresAt time.Time
	// Bypass marks a pass issued by an admin, not earned in the queue
	// (TokenID is then a fresh id, Ticket 0): the claim "bypass": true.
	Bypass bool
}

// JWKS response headers: the document is public and cacheable for
// JWKSMaxAge, 5 minutes, shorter than the 15-minute lead with which a
// keyring publishes a key before it signs.
const (
	JWKSMaxAge       = 5 * time.Minute
	JWKSCacheControl = "public, max-age=300"
	JWKSContentType  = "application/jwk-set+json"
)

// KeySet is the keys an Issuer signs with and publishes: a Keyring, or
// fixed keys (internal/tools/localkeys).
type KeySet interface {
	// SigningKey is the key that signs now.
	SigningKey(ctx context.Context) (Key, error)
	// PublishedKeys are the keys of the JWKS, the signing key among them.
	PublishedKeys(ctx context.Context) ([]Key, error)
}

// Issuer signs passes with its key set's signing key and publishes the
// set in a JWKS. It is safe for concurrent use.
type Issuer struct {
	issuer string
	keys   KeySet

	mu      sync.Mutex
	jwks    map[Key]*jose.JSONWebKey // each key's public JWK, worked out once
	doc     []byte                   // the JWKS of docKIDs
	docKIDs string
}

// NewSetIssuer returns an Issuer of passes signed with set's signing key,
// with issuer as their iss; with an empty issuer, each pass takes the one
// WithIssuer put in Issue's context.
func NewSetIssuer(issuer string, set KeySet) *Issuer {
	return &Issuer{issuer: issuer, keys: set, jwks: map[Key]*jose.JSONWebKey{}}
}

// Issuer returns the passes' iss, or "" if it comes from the context.
func (i *Issuer) Issuer() string { return i.issuer }

type issuerKey struct{}

// WithIssuer returns a copy of ctx that names iss as the issuer of passes
// that an Issuer built without one signs under it.
func WithIssuer(ctx context.Context, iss string) context.Context {
	return context.WithValue(ctx, issuerKey{}, iss)
}

// passClaims are a pass's claims.
type passClaims struct {
	jwt.Claims
	Ticket int64 `json:"ticket"`
	Bypass bool  `json:"bypass,omitempty"`
}

// Issue signs a new pass for a: a compact ES256 JWS with claims iss, aud
// (the program), sub (the token), a random jti, iat and nbf (AdmittedAt),
// exp (ExpiresAt), ticket, and bypass when a.Bypass. ctx bounds the
// signing.
func (i *Issuer) Issue(ctx context.Context, a Admission) (string, error) {
	iss := i.issuer
	if iss == "" {
		iss, _ = ctx.Value(issuerKey{}).(string)
	}
	switch {
	case iss == "":
		return "", errors.New("admissionpass: no issuer configured, and none in the context")
	case a.ProgramID == "" || a.TokenID == "":
		return "", errors.New("admissionpass: an admission needs a program and a token")
	case !a.ExpiresAt.After(a.AdmittedAt):
		return "", fmt.Errorf("admissionpass: admission window %v..%v is empty", a.AdmittedAt, a.ExpiresAt)
	}
	key, pub, err := i.signingKey(ctx)
	if err != nil {
		return "", err
	}
	priv, err := key.PrivateKey(ctx)
	if err != nil {
		return "", err
	}
	signer, err := jose.NewSigner(
		jose.SigningKey{Algorithm: jose.ES256, Key: jose.JSONWebKey{Key: priv, KeyID: pub.KeyID}},
		(&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		return "", fmt.Errorf("admissionpass: signer: %w", err)
	}
	claims := passClaims{
		Claims: jwt.Claims{
			Issuer:    iss,
			Subject:   a.TokenID,
			Audience:  jwt.Audience{a.ProgramID},
			ID:        newJTI(),
			IssuedAt:  jwt.NewNumericDate(a.AdmittedAt),
			NotBefore: jwt.NewNumericDate(a.AdmittedAt),
			Expiry:    jwt.NewNumericDate(a.ExpiresAt),
		},
		Ticket: a.Ticket,
		Bypass: a.Bypass,
	}
	pass, err := jwt.Signed(signer).Claims(claims).Serialize()
	if err != nil {
		return "", fmt.Errorf("admissionpass: sign pass: %w", err)
	}
	return pass, nil
}

// KeyID returns the kid of the signing key: the RFC 7638 thumbprint of its
// public key, the same on every instance.
func (i *Issuer) KeyID(ctx context.Context) (string, error) {
	_, pub, err := i.signingKey(ctx)
	if err != nil {
		return "", err
	}
	return pub.KeyID, nil
}

// signingKey is the key that signs now and its JWK.
func (i *Issuer) signingKey(ctx context.Context) (Key, *jose.JSONWebKey, error) {
	key, err := i.keys.SigningKey(ctx)
	if err != nil {
		return nil, nil, err
	}
	pub, err := i.jwk(ctx, key)
	if err != nil {
		return nil, nil, err
	}
	return key, pub, nil
}

// JWKS returns the JSON Web Key Set of the published keys: EC P-256
// public keys with kid, alg ES256 and use sig. It is built again only
// when the set changes.
func (i *Issuer) JWKS(ctx context.Context) ([]byte, error) {
	keys, err := i.keys.PublishedKeys(ctx)
	if err != nil {
		return nil, err
	}
	var set jose.JSONWebKeySet
	var kids strings.Builder
	seen := make(map[string]bool)
	for _, k := range keys {
		pub, err := i.jwk(ctx, k)
		if err != nil {
			return nil, err
		}
		if !seen[pub.KeyID] {
			seen[pub.KeyID] = true
			set.Keys = append(set.Keys, *pub)
			kids.WriteString(pub.KeyID + " ")
		}
	}
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.doc != nil && i.docKIDs == kids.String() {
		return i.doc, nil
	}
	doc, err := json.Marshal(set)
	if err != nil {
		return nil, fmt.Errorf("admissionpass: marshal JWKS: %w", err)
	}
	i.doc, i.docKIDs = doc, kids.String()
	return doc, nil
}

// JWKSHandler serves JWKS with JWKSCacheControl, to any origin. When the
// keys cannot be read it calls onError, or with a nil onError answers 503
// {"code":"KEYS_UNAVAILABLE","message"} with Retry-After.
func (i *Issuer) JWKSHandler(onError func(http.ResponseWriter, *http.Request, error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		doc, err := i.JWKS(r.Context())
		if err != nil {
			if onError != nil {
				onError(w, r, err)
				return
			}
			w.Header().Set("Content-Type", "application/json; charset=utf-8")
			w.Header().Set("Cache-Control", "no-store")
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(`{"code":"KEYS_UNAVAILABLE","message":"The signing keys are briefly unavailable; retry shortly."}`))
			return
		}
		w.Header().Set("Content-Type", JWKSContentType)
		w.Header().Set("Cache-Control", JWKSCacheControl)
		w.Header().Set("Access-Control-Allow-Origin", "*")
		_, _ = w.Write(doc)
	})
}

// jwk is key's public JWK, worked out on its first use and kept (a
// handful of keys a process lifetime: the fixed ones, or a keyring's).
func (i *Issuer) jwk(ctx context.Context, key Key) (*jose.JSONWebKey, error) {
	i.mu.Lock()
	pub := i.jwks[key]
	i.mu.Unlock()
	if pub != nil {
		return pub, nil
	}
	pk, err := key.PublicKey(ctx)
	if err != nil {
		return nil, err
	}
	kid, err := thumbprint(pk)
	if err != nil {
		return nil, err
	}
	pub = &jose.JSONWebKey{Key: pk, KeyID: kid, Algorithm: string(jose.ES256), Use: "sig"}
	i.mu.Lock()
	i.jwks[key] = pub
	i.mu.Unlock()
	return pub, nil
}

// newJTI returns 128 random bits, base64url-encoded.
func newJTI() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return base64.RawURLEncoding.EncodeToString(b[:])
}
