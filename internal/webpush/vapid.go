package webpush

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"time"
)

// VAPID JWT lifetime and cache policy.
const (
	Lifetime   = 12 * time.Hour // a JWT's exp is its issue time + Lifetime
	Refresh    = time.Hour      // how long before its exp a cached JWT is replaced
	MaxOrigins = 64             // how many push-service origins the cache holds
)

// VAPID signs the Authorization header of pushes (RFC 8292) with one JWT per
// push-service origin, reused until Refresh before its expiry. Safe for
// concurrent use; when MaxOrigins origins are cached, the cache is cleared.
type VAPID struct {
	key     *ecdsa.PrivateKey
	subject string
	now     func() time.Time
	public  string // base64url, no padding

	mu    sync.Mutex
	cache map[string]vapidToken // by origin
}

type vapidToken struct {
	jwt string
	exp time.Time
}

// NewVAPID returns a VAPID signer for a P-256 key with subject (a "mailto:" or
// https URL); now is the clock (time.Now when nil). It panics on another curve.
func NewVAPID(key *ecdsa.PrivateKey, subject string, now func() time.Time) *VAPID {
	if key == nil || key.Curve != elliptic.P256() {
		panic("webpush: VAPID key must be a P-256 key")
	}
	if now == nil {
		now = time.Now
	}
	pub := must(key.PublicKey.Bytes())
	return &VAPID{key: key, subject: subject, now: now,
		public: base64.RawURLEncoding.EncodeToString(pub), cache: make(map[string]vapidToken)}
}

// PublicKey returns the uncompressed public key in unpadded base64url (the
// page's applicationServerKey and the header's k).
func (v *VAPID) PublicKey() string { return v.public }

// Header returns the Authorization value `vapid t=<jwt>, k=<public key>` for
// endpoint's origin: an ES256 JWT with aud (the Origin), exp and sub.
func (v *VAPID) Header(endpoint string) (string, error) {
	origin, err := Origin(endpoint)
	if err != nil {
		return "", err
	}
	now := v.now()
	v.mu.Lock()
	defer v.mu.Unlock()
	t, ok := v.cache[origin]
	if !ok || !now.Before(t.exp.Add(-Refresh)) {
		t.exp = now.Add(Lifetime).Truncate(time.Second)
		if t.jwt, err = v.sign(origin, t.exp); err != nil {
			return "", err
		}
		if !ok && len(v.cache) >= MaxOrigins {
			clear(v.cache)
		}
		v.cache[origin] = t
	}
	return "vapid t=" + t.jwt + ", k=" + v.public, nil
}

// jwtHeader is the fixed, pre-encoded JOSE header of every VAPID JWT.
var jwtHeader = base64.RawURLEncoding.EncodeToString([]byte(`{"typ":"JWT","alg":"ES256"}`))

func (v *VAPID) sign(origin string, exp time.Time) (string, error) {
	claims := must(json.Marshal(struct {
		Aud string `json:"aud"`
		Exp int64  `json:"exp"`
		Sub string `json:"sub,omitempty"`
	}{origin, exp.Unix(), v.subject}))
	input := jwtHeader + "." + base64.RawURLEncoding.EncodeToString(claims)
	digest := sha256.Sum256([]byte(input))
	r, s, err := ecdsa.Sign(rand.Reader, v.key, digest[:])
	if err != nil {
		return "", fmt.Errorf("webpush: signing VAPID JWT: %w", err)
	}
	sig := make([]byte, 64)
	r.FillBytes(sig[:32])
	s.FillBytes(sig[32:])
	return input + "." + base64.RawURLEncoding.EncodeToString(sig), nil
}

// Origin returns the origin of an http(s) URL, the aud of its VAPID JWT:
// lower-case scheme://host[:port], without the scheme's default port.
func Origin(endpoint string) (string, error) {
	u, err := url.Parse(endpoint)
	if err != nil || u.Host == "" || u.Scheme != "https" && u.Scheme != "http" {
		return "", errors.New("webpush: endpoint has no http(s) origin")
	}
	host := strings.TrimSuffix(strings.ToLower(u.Host), map[string]string{"https": ":443", "http": ":80"}[u.Scheme])
	return u.Scheme + "://" + host, nil
}
