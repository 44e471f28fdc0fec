// Package edgetoken makes the credentials the edge gate (functions/edgegate)
// checks: the short-lived token an admitted person brings in the URL, and
// the edge session cookie the gate trades it for. Both are HMAC-SHA256 under
// a Key that the edge also holds; docs/edge-gate.md gives the formats.
package edgetoken

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// TokenParam is the query parameter that carries a token to the protected site.
const TokenParam = "wrEdge"

// Key is one HMAC key: its id and its secret, 43 base64url characters whose
// bytes (as text) are the HMAC key, so that the edge runtime needs no decoding.
type Key struct {
	ID     string `json:"kid"`
	Secret string `json:"k"`
	From   int64  `json:"from,omitempty"` // Unix seconds from which it signs; before, it only verifies
}

// Keys is the key set the edge reads: Current signs and verifies, Previous
// (if any) still verifies, so that a rotation cuts off no session.
type Keys struct {
	Current  Key  `json:"current"`
	Previous *Key `json:"previous,omitempty"`
}

var idPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,32}$`)

// NewKey returns a fresh random key named id (1 to 32 of A-Z a-z 0-9 _ -).
func NewKey(id string) (Key, error) {
	if !idPattern.MatchString(id) {
		return Key{}, fmt.Errorf("edgetoken: key id %q: want 1 to 32 of A-Z a-z 0-9 _ -", id)
	}
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return Key{}, fmt.Errorf("edgetoken: new key: %w", err)
	}
	return Key{ID: id, Secret: base64.RawURLEncoding.EncodeToString(b[:])}, nil
}

// Rotated returns ks with next as its current key and the current one as previous.
func (ks Keys) Rotated(next Key) Keys {
	if ks.Current.ID == "" {
		return Keys{Current: next}
	}
	cur := ks.Current
	return Keys{Current: next, Previous: &cur}
}

// Signing is the key that signs at now: Current once its From has come, else Previous if any.
func (ks Keys) Signing(now time.Time) Key {
	if now.Unix() < ks.Current.From && ks.Previous != nil {
		return *ks.Previous
	}
	return ks.Current
}

// The two kinds of credential, MACed apart so that neither passes for the other.
const (
	kindToken   = "wr-edge-token"
	kindSession = "wr-edge-session"
)

// Token returns the URL token for programID, valid until exp, bound to the
// admission pass's jti: kid.program.exp.jti.mac.
func (k Key) Token(programID string, exp time.Time, jti string) string {
	body := k.ID + "." + programID + "." + strconv.FormatInt(exp.Unix(), 10) + "." + jti
	return body + "." + k.mac(kindToken, body)
}

// Session returns the value of programID's session cookie (CookieName),
// valid until exp: kid.exp.jti.mac, the MAC covering the program too.
func (k Key) Session(programID string, exp time.Time, jti string) string {
	body := k.ID + "." + strconv.FormatInt(exp.Unix(), 10) + "." + jti
	return body + "." + k.mac(kindSession, k.ID+"."+programID+"."+strconv.FormatInt(exp.Unix(), 10)+"."+jti)
}

// CookieName is the name of programID's edge session cookie.
func CookieName(programID string) string { return "wr-edge-" + programID }

func (k Key) mac(kind, body string) string {
	m := hmac.New(sha256.New, []byte(k.Secret))
	m.Write([]byte(kind + "." + body))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// ErrInvalid is the error of a credential that does not verify.
var ErrInvalid = errors.New("edgetoken: invalid credential")

// VerifyToken checks a URL token for programID at now, as the edge does,
// and returns its expiry and jti.
func (ks Keys) VerifyToken(tok, programID string, now time.Time) (time.Time, string, error) {
	f := strings.Split(tok, ".")
	if len(f) != 5 || f[1] != programID {
		return time.Time{}, "", ErrInvalid
	}
	return ks.verify(kindToken, f[0], programID, f[2], f[3], f[4], now)
}

// VerifySession checks the value of programID's session cookie at now, as
// the edge does, and returns its expiry and jti.
func (ks Keys) VerifySession(v, programID string, now time.Time) (time.Time, string, error) {
	f := strings.Split(v, ".")
	if len(f) != 4 {
		return time.Time{}, "", ErrInvalid
	}
	return ks.verify(kindSession, f[0], programID, f[1], f[2], f[3], now)
}

func (ks Keys) verify(kind, kid, programID, exp, jti, mac string, now time.Time) (time.Time, string, error) {
	for _, k := range []*Key{&ks.Current, ks.Previous} {
		if k == nil || k.ID != kid {
			continue
		}
		sec, err := strconv.ParseInt(exp, 10, 64)
		if strings.ContainsFunc(exp, func(r rune) bool { return r < '0' || r > '9' }) {
			err = ErrInvalid // digits only, as the edge reads it
		}
		want := k.mac(kind, kid+"."+programID+"."+exp+"."+jti)
		if err != nil || !hmac.Equal([]byte(mac), []byte(want)) || now.Unix() >= sec {
			return time.Time{}, "", ErrInvalid
		}
		return time.Unix(sec, 0), jti, nil
	}
	return time.Time{}, "", ErrInvalid
}
