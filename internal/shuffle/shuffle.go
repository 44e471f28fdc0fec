// Package shuffle is the draw of a shuffled opening: the message a
// program's shuffle key signs at its opening, the seed that signature is,
// and the permutation of the pre-queue's places the seed keys
// (docs/design.md, "The shuffle"). Package queue fixes the pre-queue and
// asks for the seed; cmd/audit checks a draw with the same functions.
//
// Invariants:
//   - No secret to keep: the nonce and the public key are published before
//     anyone enters, and the signature (RSASSA-PKCS1-v1_5, deterministic)
//     exists only once the key signs at the opening, so nobody, operator
//     included, knows the order before it is fixed, and every instance
//     derives the same seed.
//   - PlaceOf is a permutation of 1..prequeue for every seed (a Feistel
//     network, cycle-walking into range): nobody shares a place, nobody is
//     left out, and anyone with the seed recomputes every place.
package shuffle

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math/bits"
)

// Key is the RSA key whose deterministic signature seeds a shuffled opening
// (internal/shufflekey).
type Key interface {
	PublicKey(ctx context.Context) (*rsa.PublicKey, error)
	SignPKCS1v15(ctx context.Context, message []byte) ([]byte, error)
}

// NewNonce returns a shuffle's nonce: 16 random bytes in hex.
func NewNonce() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Message is what the shuffle key signs at programID's opening, the
// shuffle's commitment.
func Message(programID, nonce string) string {
	return "waitingroom/shuffle/v2 " + programID + " " + nonce
}

// SignSeed returns the seed of programID's shuffle: key's signature of
// Message, in unpadded base64url.
func SignSeed(ctx context.Context, key Key, programID, nonce string) (string, error) {
	sig, err := key.SignPKCS1v15(ctx, []byte(Message(programID, nonce)))
	if err != nil {
		return "", fmt.Errorf("shuffle: sign the shuffle seed: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(sig), nil
}

// VerifySeed checks that seed is pub's signature of message.
func VerifySeed(pub *rsa.PublicKey, message, seed string) error {
	sig, err := base64.RawURLEncoding.DecodeString(seed)
	if err != nil {
		return fmt.Errorf("shuffle: the seed is not base64url: %w", err)
	}
	digest := sha256.Sum256([]byte(message))
	if err := rsa.VerifyPKCS1v15(pub, crypto.SHA256, digest[:], sig); err != nil {
		return fmt.Errorf("shuffle: the seed is not the key's signature of %q: %w", message, err)
	}
	return nil
}

// EncodePublicKey is a shuffle key's public half as answers publish it.
func EncodePublicKey(pub *rsa.PublicKey) (string, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return "", fmt.Errorf("shuffle: encode the shuffle key: %w", err)
	}
	return base64.StdEncoding.EncodeToString(der), nil
}

// ParsePublicKey reads a public key that EncodePublicKey wrote.
func ParsePublicKey(s string) (*rsa.PublicKey, error) {
	der, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("shuffle: the shuffle key is not base64: %w", err)
	}
	k, err := x509.ParsePKIXPublicKey(der)
	if err != nil {
		return nil, fmt.Errorf("shuffle: parse the shuffle key: %w", err)
	}
	pub, ok := k.(*rsa.PublicKey)
	if !ok {
		return nil, fmt.Errorf("shuffle: the shuffle key is %T, want RSA", k)
	}
	return pub, nil
}

// shuffleRounds is the Feistel network's number of rounds.
const shuffleRounds = 10

// PlaceOf returns the place of ticket in a pre-queue of prequeue tickets
// shuffled with seed; tickets outside 1..prequeue keep their number.
func PlaceOf(seed string, prequeue, ticket int64) int64 {
	if ticket < 1 || ticket > prequeue || prequeue < 2 {
		return ticket
	}
	sig, _ := base64.RawURLEncoding.DecodeString(seed)
	var in [49]byte // one SHA-256 block
	key := sha256.Sum256(sig)
	copy(in[:32], key[:])
	binary.BigEndian.PutUint64(in[33:41], uint64(prequeue))
	half := (bits.Len64(uint64(prequeue-1)) + 1) / 2
	mask := uint64(1)<<half - 1
	round := func(i int, r uint64) uint64 {
		in[32] = byte(i)
		binary.BigEndian.PutUint64(in[41:], r)
		sum := sha256.Sum256(in[:])
		return binary.BigEndian.Uint64(sum[:8]) & mask
	}
	x := uint64(ticket - 1)
	for {
		l, r := x>>half, x&mask
		for i := range shuffleRounds {
			l, r = r, l^round(i, r)
		}
		if x = l<<half | r; x < uint64(prequeue) {
			return int64(x) + 1
		}
	}
}
