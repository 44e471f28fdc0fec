// Package challenge is the proof of work an enter may have to carry: a
// stateless challenge the service issues (a MAC over the program, the issue
// time, a random nonce and the bits), its verification, and a native solver.
// docs/design.md, "Proof of work on enter", gives the reasons.
//
// Invariants:
//   - Stateless until used: a challenge carries its bits, its issue time
//     and a MAC over them and its program, so any instance that shares
//     the secret checks it without a read, and refuses one forged,
//     altered or issued for another program (ErrForged).
//   - A challenge lives Lifetime from its issue, which may be at most
//     skew ahead of the verifier's clock; package queue records each use,
//     so that one proof serves one enter.
package challenge

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"strings"
	"time"
)

// Bounds of a challenge and of its solution.
const (
	// MaxBits is the most leading zero bits a program may ask for.
	MaxBits = 26
	// Lifetime is how long a challenge may be solved and used.
	Lifetime = 5 * time.Minute
	// MaxSolutionLen bounds a solution's length, in characters.
	MaxSolutionLen = 64
	// MinSecretLen is the shortest secret the MAC accepts, in bytes.
	MinSecretLen = 32
	// skew is how far in the future an issue time may be.
	skew = 5 * time.Second
)

// The layout of a challenge before base64url: version, bits, issue time
// (Unix ms), nonce, then the mac.
const (
	version  = 1
	nonceLen = 16
	macLen   = 16
	bodyLen  = 1 + 1 + 8 + nonceLen
	rawLen   = bodyLen + macLen
)

// EncodedLen is the length of every challenge, in characters.
var EncodedLen = base64.RawURLEncoding.EncodedLen(rawLen)

// Errors of Verify, each wrapped in the error it returns.
var (
	ErrMalformed = errors.New("challenge: malformed")
	ErrForged    = errors.New("challenge: not issued for this program")
	ErrExpired   = errors.New("challenge: expired")
	ErrSolution  = errors.New("challenge: wrong solution")
)

// Challenge is what a verified challenge says.
type Challenge struct {
	Bits      int
	IssuedAt  time.Time
	ExpiresAt time.Time
}

// Issue returns a new challenge of programID asking for bits zero bits,
// issued at now under secret, and when it expires.
func Issue(secret []byte, programID string, bits int, now time.Time) (string, time.Time, error) {
	if len(secret) < MinSecretLen {
		return "", time.Time{}, fmt.Errorf("challenge: secret of %d bytes, want at least %d", len(secret), MinSecretLen)
	}
	if bits < 0 || bits > MaxBits {
		return "", time.Time{}, fmt.Errorf("challenge: %d bits out of 0..%d", bits, MaxBits)
	}
	raw := make([]byte, rawLen)
	raw[0], raw[1] = version, byte(bits)
	ms := now.UnixMilli()
	binary.BigEndian.PutUint64(raw[2:10], uint64(ms))
	if _, err := rand.Read(raw[10:bodyLen]); err != nil {
		return "", time.Time{}, fmt.Errorf("challenge: nonce: %w", err)
	}
	copy(raw[bodyLen:], mac(secret, programID, raw[:bodyLen]))
	return base64.RawURLEncoding.EncodeToString(raw), time.UnixMilli(ms).Add(Lifetime).UTC(), nil
}

// Verify opens challenge (Open) and checks that solution solves it; the
// error wraps an Err of this package.
func Verify(secret []byte, programID, challenge, solution string, now time.Time) (Challenge, error) {
	c, err := Open(secret, programID, challenge, now)
	if err != nil {
		return Challenge{}, err
	}
	if !ValidSolution(solution) {
		return Challenge{}, fmt.Errorf("%w: a solution is 1 to %d characters of [A-Za-z0-9_-]", ErrMalformed, MaxSolutionLen)
	}
	if ZeroBits(challenge, solution) < c.Bits {
		return Challenge{}, ErrSolution
	}
	return c, nil
}

// Open checks that challenge was issued under secret for programID and is
// not expired at now, and returns what it says.
func Open(secret []byte, programID, challenge string, now time.Time) (Challenge, error) {
	if len(challenge) != EncodedLen {
		return Challenge{}, fmt.Errorf("%w: length %d, want %d", ErrMalformed, len(challenge), EncodedLen)
	}
	raw, err := base64.RawURLEncoding.Strict().DecodeString(challenge)
	if err != nil || len(raw) != rawLen || raw[0] != version {
		return Challenge{}, fmt.Errorf("%w: not a challenge of version %d", ErrMalformed, version)
	}
	if len(secret) < MinSecretLen || !hmac.Equal(raw[bodyLen:], mac(secret, programID, raw[:bodyLen])) {
		return Challenge{}, ErrForged
	}
	c := Challenge{Bits: int(raw[1]), IssuedAt: time.UnixMilli(int64(binary.BigEndian.Uint64(raw[2:10]))).UTC()}
	c.ExpiresAt = c.IssuedAt.Add(Lifetime)
	if c.Bits > MaxBits {
		return Challenge{}, fmt.Errorf("%w: %d bits", ErrMalformed, c.Bits)
	}
	if !now.Before(c.ExpiresAt) || c.IssuedAt.After(now.Add(skew)) {
		return Challenge{}, ErrExpired
	}
	return c, nil
}

// mac is the truncated HMAC-SHA256 of the length-prefixed programID and body.
func mac(secret []byte, programID string, body []byte) []byte {
	h := hmac.New(sha256.New, secret)
	var n [2]byte
	binary.BigEndian.PutUint16(n[:], uint16(len(programID)))
	h.Write([]byte("waitingroom/challenge/v1\x00"))
	h.Write(n[:])
	h.Write([]byte(programID))
	h.Write(body)
	return h.Sum(nil)[:macLen]
}

// ValidSolution reports whether s is 1 to MaxSolutionLen of [A-Za-z0-9_-].
func ValidSolution(s string) bool {
	return len(s) > 0 && len(s) <= MaxSolutionLen && strings.Trim(s, alphabet) == ""
}

// ZeroBits is the leading zero bits of SHA-256("<challenge>.<solution>").
func ZeroBits(challenge, solution string) int {
	sum := sha256.Sum256([]byte(challenge + "." + solution))
	return leadingZeros(sum[:])
}

func leadingZeros(sum []byte) int {
	n := 0
	for i := 0; i+8 <= len(sum); i += 8 {
		w := binary.BigEndian.Uint64(sum[i:])
		if w != 0 {
			return n + bits.LeadingZeros64(w)
		}
		n += 64
	}
	return n
}
