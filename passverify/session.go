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
	"time"
)

// MinCookieSecretSize is the least length of a GateConfig.CookieSecrets
// entry, in bytes.
const MinCookieSecretSize = 32

// sessionVersion starts every session cookie's value; a raw pass (a JWS,
// "eyJ…") never does.
const sessionVersion = "v1"

// maxSessionSize bounds the session cookie a Gate reads.
const maxSessionSize = 4096

// session is what a Gate's cookie holds: the claims of the pass it was
// exchanged for, and the kid of the key that signed it.
type session struct {
	Issuer     string `json:"iss"`
	ProgramID  string `json:"aud"`
	TokenID    string `json:"sub"`
	JTI        string `json:"jti"`
	KeyID      string `json:"kid"`
	AdmittedAt int64  `json:"iat"`
	ExpiresAt  int64  `json:"exp"`
	Ticket     int64  `json:"ticket"`
	Bypass     bool   `json:"bypass,omitempty"`
}

func (s session) claims() Claims {
	return Claims{
		Issuer:     s.Issuer,
		ProgramID:  s.ProgramID,
		TokenID:    s.TokenID,
		Ticket:     s.Ticket,
		JTI:        s.JTI,
		AdmittedAt: time.Unix(s.AdmittedAt, 0).UTC(),
		ExpiresAt:  time.Unix(s.ExpiresAt, 0).UTC(),
		Bypass:     s.Bypass,
	}
}

// sessionKeys derives the MAC keys from the site's secrets: HKDF-SHA256,
// so that a secret the site also uses elsewhere yields no MAC that is
// valid there.
func sessionKeys(secrets [][]byte) ([][]byte, error) {
	if len(secrets) == 0 {
		return nil, errors.New("passverify: GateConfig.CookieSecrets is empty; a Gate needs a secret to sign its cookies")
	}
	keys := make([][]byte, len(secrets))
	for i, s := range secrets {
		if len(s) < MinCookieSecretSize {
			return nil, fmt.Errorf("passverify: CookieSecrets[%d] has %d bytes, want at least %d", i, len(s), MinCookieSecretSize)
		}
		k, err := hkdf.Key(sha256.New, s, nil, "passverify session cookie "+sessionVersion, sha256.Size)
		if err != nil {
			return nil, fmt.Errorf("passverify: derive cookie key: %w", err)
		}
		keys[i] = k
	}
	return keys, nil
}

// seal returns the cookie value of the session of c, signed with the
// first key: "v1.<claims>.<HMAC-SHA256>", each part base64url.
func (g *Gate) seal(c Claims, kid string) string {
	body, _ := json.Marshal(session{ // strings and integers: never fails
		Issuer: c.Issuer, ProgramID: c.ProgramID, TokenID: c.TokenID, JTI: c.JTI, KeyID: kid,
		AdmittedAt: c.AdmittedAt.Unix(), ExpiresAt: c.ExpiresAt.Unix(), Ticket: c.Ticket, Bypass: c.Bypass,
	})
	signed := sessionVersion + "." + base64.RawURLEncoding.EncodeToString(body)
	return signed + "." + base64.RawURLEncoding.EncodeToString(mac(g.keys[0], signed))
}

// open checks a session cookie value: made with one of g's keys, for g's
// issuer and program, not expired (with the leeway), and its pass's key
// still in the JWKS. Its errors are Verify's, and ErrCookie.
func (g *Gate) open(ctx context.Context, value string) (Claims, error) {
	dot := strings.LastIndexByte(value, '.')
	if len(value) > maxSessionSize || dot < 0 {
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
	c := s.claims()
	switch {
	case c.Issuer != g.v.issuer:
		return Claims{}, fmt.Errorf("%w: %q", ErrIssuer, c.Issuer)
	case c.ProgramID != g.v.programID:
		return Claims{}, fmt.Errorf("%w: %q", ErrAudience, c.ProgramID)
	case g.v.now().After(c.ExpiresAt.Add(g.v.leeway)):
		return Claims{}, fmt.Errorf("%w: at %v", ErrExpired, c.ExpiresAt)
	}
	if _, err := g.v.keys.get(ctx, s.KeyID); err != nil {
		return Claims{}, err
	}
	return c, nil
}

// authentic reports whether sum is the MAC of signed under one of g's
// keys, comparing in constant time.
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
