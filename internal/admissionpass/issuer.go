// Package admissionpass signs admission passes, ES256 JWTs saying a token
// was admitted to a program and until when, and serves the JWKS that
// verifies them (package passverify). docs/admission-pass.md describes them.
package admissionpass

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// Admission is what a pass attests: one token admitted to one program.
type Admission struct {
	ProgramID, TokenID string
	Ticket             int64
	AdmittedAt         time.Time // the pass's iat and nbf
	ExpiresAt          time.Time // the end of the admission window: exp
	// Bypass marks a pass issued by an admin (a fresh TokenID, Ticket 0): "bypass": true.
	Bypass bool
	// Account is the site's account whose place was admitted: "acct", as
	// its enqueue token's sub gave it ("" for none).
	Account string
}

// JWKS response headers: the document is public and cacheable for JWKSMaxAge.
const (
	JWKSMaxAge       = 5 * time.Minute
	JWKSCacheControl = "public, max-age=300"
	JWKSContentType  = "application/jwk-set+json"
)

// KeySet is the keys an Issuer signs with and publishes in the JWKS: a Keyring, or fixed keys.
type KeySet interface {
	SigningKey(ctx context.Context) (Key, error)
	PublishedKeys(ctx context.Context) ([]Key, error)
}

// Issuer signs passes with its key set's signing key and publishes the set in a JWKS.
type Issuer struct {
	issuer string
	keys   KeySet

	jwks    sync.Map // Key -> *jose.JSONWebKey, each key's public JWK
	mu      sync.Mutex
	doc     []byte // the JWKS of docKIDs
	docKIDs string
}

// NewSetIssuer returns an Issuer of passes signed with set's signing key, with issuer as
// their iss ("": the one WithIssuer put in Issue's context).
func NewSetIssuer(issuer string, set KeySet) *Issuer {
	return &Issuer{issuer: issuer, keys: set}
}

// Issuer returns the passes' iss, or "" if it comes from the context.
func (i *Issuer) Issuer() string { return i.issuer }

type issuerKey struct{}

// WithIssuer returns ctx naming iss as the issuer of passes that an Issuer without one signs.
func WithIssuer(ctx context.Context, iss string) context.Context {
	return context.WithValue(ctx, issuerKey{}, iss)
}

// passClaims are a pass's claims.
type passClaims struct {
	jwt.Claims
	Ticket  int64  `json:"ticket"`
	Bypass  bool   `json:"bypass,omitempty"`
	Account string `json:"acct,omitempty"`
}

// Issue signs a new pass for a: a compact ES256 JWS with claims iss, aud (the program), sub
// (the token), a random jti, iat, nbf, exp, ticket, bypass when a.Bypass, and acct when a.Account.
func (i *Issuer) Issue(ctx context.Context, a Admission) (string, error) {
	fromCtx, _ := ctx.Value(issuerKey{}).(string)
	iss := cmp.Or(i.issuer, fromCtx)
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
	at := jwt.NewNumericDate(a.AdmittedAt)
	claims := passClaims{Ticket: a.Ticket, Bypass: a.Bypass, Account: a.Account, Claims: jwt.Claims{Issuer: iss, Subject: a.TokenID,
		Audience: jwt.Audience{a.ProgramID}, ID: newJTI(), IssuedAt: at, NotBefore: at, Expiry: jwt.NewNumericDate(a.ExpiresAt)}}
	pass, err := jwt.Signed(signer).Claims(claims).Serialize()
	if err != nil {
		return "", fmt.Errorf("admissionpass: sign pass: %w", err)
	}
	return pass, nil
}

// KeyID returns the kid of the signing key: its RFC 7638 thumbprint.
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

// JWKS returns the JSON Web Key Set of the published keys, built again only when they change.
func (i *Issuer) JWKS(ctx context.Context) ([]byte, error) {
	keys, err := i.keys.PublishedKeys(ctx)
	if err != nil {
		return nil, err
	}
	var set jose.JSONWebKeySet
	var kids strings.Builder
	for _, k := range keys {
		pub, err := i.jwk(ctx, k)
		if err != nil {
			return nil, err
		}
		if !slices.ContainsFunc(set.Keys, func(k jose.JSONWebKey) bool { return k.KeyID == pub.KeyID }) {
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

// FailOpenTTL is how long a JWKS handler keeps its list of break-glasses: listing may read
// every program, and the document is cacheable for JWKSMaxAge anyway.
const FailOpenTTL = 30 * time.Second

// FailOpenListTimeout bounds one listing of the break-glasses.
const FailOpenListTimeout = 2 * time.Second

// FailOpen is where a JWKS handler learns the programs whose break-glass is on, for the
// document's failOpen member; it lists them at most once per FailOpenTTL, and after a failed
// List serves the last one's.
type FailOpen struct {
	// List returns the programs' break-glass ends; those past are left out of the document.
	List func(context.Context) (map[string]time.Time, error)
	// OnError, if set, is told of a List that failed.
	OnError func(context.Context, error)
	// Now is the clock; default time.Now.
	Now func() time.Time
}

// JWKSHandler serves JWKS with JWKSCacheControl, to any origin, and with failOpen (if not nil)
// a failOpen member: each program whose break-glass is on, with its end (RFC 3339). When the
// keys cannot be read it calls onError, or with a nil onError answers 503 KEYS_UNAVAILABLE.
func (i *Issuer) JWKSHandler(onError func(http.ResponseWriter, *http.Request, error), failOpen *FailOpen) http.Handler {
	var ends func(context.Context) map[string]time.Time
	if failOpen != nil && failOpen.List != nil {
		ends = failOpen.cached()
	}
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
		if ends != nil {
			doc = withFailOpen(doc, ends(r.Context()))
		}
		w.Header().Set("Content-Type", JWKSContentType)
		w.Header().Set("Cache-Control", JWKSCacheControl)
		w.Header().Set("Access-Control-Allow-Origin", "*")
		_, _ = w.Write(doc)
	})
}

// cached returns f.List's break-glasses still on, listed again at most once per FailOpenTTL;
// after a failed List, those of the last one that succeeded (none before any).
func (f FailOpen) cached() func(context.Context) map[string]time.Time {
	now := f.Now
	if now == nil {
		now = time.Now
	}
	var (
		mu      sync.Mutex
		ends    map[string]time.Time
		listed  time.Time // the last List's start, failed or not
		listing bool      // one caller lists; the others serve the last list, never waiting on it
	)
	return func(ctx context.Context) map[string]time.Time {
		mu.Lock()
		if !listing && (listed.IsZero() || now().Sub(listed) >= FailOpenTTL) {
			listed, listing = now(), true
			mu.Unlock()
			// Bounded, and not the caller's to cancel: the keys must not wait on a slow table.
			lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), FailOpenListTimeout)
			l, err := f.List(lctx)
			cancel()
			mu.Lock()
			listing = false
			switch { // a List that fails keeps the last one's: a break-glass is for when things fail
			case err == nil:
				ends = l
			case f.OnError != nil:
				f.OnError(ctx, err)
			}
		}
		defer mu.Unlock()
		t := now()
		on := make(map[string]time.Time, len(ends))
		for id, end := range ends {
			if t.Before(end) {
				on[id] = end
			}
		}
		return on
	}
}

// withFailOpen is doc, a JWKS, with a failOpen member of ends, or doc itself when ends is
// empty. RFC 7517 §5 allows a JWK Set other members, which consumers that do not know them ignore.
func withFailOpen(doc []byte, ends map[string]time.Time) []byte {
	if len(ends) == 0 {
		return doc
	}
	member := make(map[string]string, len(ends))
	for id, end := range ends {
		member[id] = end.UTC().Format(time.RFC3339)
	}
	b, _ := json.Marshal(member) // strings: never fails
	// doc is json.Marshal's {"keys":[…]}: the member goes before its closing brace.
	return slices.Concat(doc[:len(doc)-1], []byte(`,"failOpen":`), b, []byte("}"))
}

// jwk is key's public JWK, worked out on its first use and kept.
func (i *Issuer) jwk(ctx context.Context, key Key) (*jose.JSONWebKey, error) {
	if pub, ok := i.jwks.Load(key); ok {
		return pub.(*jose.JSONWebKey), nil
	}
	pk, err := key.PublicKey(ctx)
	if err != nil {
		return nil, err
	}
	kid, err := thumbprint(pk)
	if err != nil {
		return nil, err
	}
	pub := &jose.JSONWebKey{Key: pk, KeyID: kid, Algorithm: string(jose.ES256), Use: "sig"}
	i.jwks.Store(key, pub)
	return pub, nil
}

// newJTI returns 128 random bits, base64url-encoded.
func newJTI() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}
