package passverify

import (
	"context"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// MinCookieSecretSize is the least length of a CookieSecrets entry, in bytes.
const MinCookieSecretSize = 32

// sessionVersion starts a session cookie's value, never a raw pass ("eyJ…").
const sessionVersion = "v1"

// session is what a Gate's cookie holds: the claims of the pass it was
// exchanged for, and the kid of the key that signed it.
type session struct {
	payload
	KeyID string `json:"kid"`
}

// sessionKeys derives the MAC keys from the site's secrets with HKDF-SHA256,
// so that a secret also used elsewhere yields no MAC valid there.
func sessionKeys(secrets [][]byte) ([][]byte, error) {
	if len(secrets) == 0 {
		return nil, errors.New("passverify: GateConfig.CookieSecrets is empty; a Gate needs a secret to sign its cookies")
	}
	keys := make([][]byte, len(secrets))
	for i, s := range secrets {
		if len(s) < MinCookieSecretSize {
			return nil, fmt.Errorf("passverify: CookieSecrets[%d] has %d bytes, want at least %d", i, len(s), MinCookieSecretSize)
		}
		// Never fails: SHA-256, a 32-byte key from a secret of at least 32 bytes.
		keys[i], _ = hkdf.Key(sha256.New, s, nil, "passverify session cookie "+sessionVersion, sha256.Size)
	}
	return keys, nil
}

// seal returns the cookie value of s, signed with the first key:
// "v1.<claims>.<HMAC-SHA256>", each part base64url.
func (g *Gate) seal(s session) string {
	s.NotBefore = nil          // the cookie holds the claims docs/admission-pass.md lists
	body, _ := json.Marshal(s) // strings and integers: never fails
	signed := sessionVersion + "." + base64.RawURLEncoding.EncodeToString(body)
	return signed + "." + base64.RawURLEncoding.EncodeToString(mac(g.keys[0], signed))
}

// open checks a cookie value: made with one of g's keys, valid for g's
// Verifier, its pass's key still in the JWKS. Its errors are Verify's, and ErrCookie.
func (g *Gate) open(ctx context.Context, value string) (Claims, error) {
	dot := strings.LastIndexByte(value, '.')
	if len(value) > maxPassSize || dot < 0 {
		return Claims{}, ErrCookie
	}
	signed := value[:dot]
	body64, versioned := strings.CutPrefix(signed, sessionVersion+".")
	sum, err := base64.RawURLEncoding.DecodeString(value[dot+1:])
	if !versioned || err != nil || !g.authentic(signed, sum) {
		return Claims{}, ErrCookie
	}
	body, err := base64.RawURLEncoding.DecodeString(body64)
	var s session
	if err != nil || json.Unmarshal(body, &s) != nil {
		return Claims{}, ErrCookie
	}
	c, err := g.v.check(s.payload)
	if err != nil {
		return Claims{}, err
	}
	if _, err := g.v.key(ctx, s.KeyID); err != nil {
		return Claims{}, err
	}
	return c, nil
}

// authentic reports in constant time whether sum is signed's MAC under a key of g.
func (g *Gate) authentic(signed string, sum []byte) bool {
	ok := false
	for _, k := range g.keys {
		ok = hmac.Equal(mac(k, signed), sum) || ok
	}
	return ok
}

func mac(key []byte, signed string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(signed))
	return m.Sum(nil)
}
