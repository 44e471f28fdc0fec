package queue

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
	"errors"
	"fmt"
	"math/bits"
	"sync"
	"time"

	"github.com/example/waitingroom/internal/api"
)

// A scheduled, fair opening: see docs/design.md, "The shuffle".

// PrequeueStore is what a Store offers to fix a shuffled program's
// pre-queue at its opening. memstore and dynamostore implement it; a
// program on a store without it cannot shuffle.
type PrequeueStore interface {
	// FixPrequeue applies Program.WithPrequeueFixed at now and returns the
	// program after it (as it is, if the pre-queue is fixed already or not
	// due). ErrNotFound if the program does not exist.
	FixPrequeue(ctx context.Context, programID string, now time.Time) (Program, error)
}

// armed reports whether p shuffles at its opening and has not fixed its
// pre-queue yet.
func (p Program) armed() bool { return p.Shuffle && !p.PrequeueFixed }

// startAfter is the opening, in Unix ms, of a segment that starts at ms:
// p's opening if it is later, else 0.
func (p Program) startAfter(ms int64) int64 {
	if o := UnixMs(p.OpensAt); !p.OpensAt.IsZero() && o > ms {
		return o
	}
	return 0
}

// Opened reports whether p has no opening ahead at now.
func (p Program) Opened(now time.Time) bool { return p.OpensAt.IsZero() || !now.Before(p.OpensAt) }

// WithPrequeueFixed returns p with its pre-queue fixed if it shuffles and
// now is at or after its opening: every ticket issued so far is in it.
// Every store applies it before a ticket at or after the opening.
func (p Program) WithPrequeueFixed(now time.Time) Program {
	if p.armed() && !p.OpensAt.IsZero() && !now.Before(p.OpensAt) {
		p.Prequeue, p.PrequeueFixed = p.Issued, true
	}
	return p
}

// ShuffleKey is the RSA key whose signature seeds a shuffled opening:
// RSASSA-PKCS1-v1_5 over SHA-256, deterministic, so that every instance
// derives the same seed. internal/shufflekey implements it (KMS, local).
type ShuffleKey interface {
	PublicKey(ctx context.Context) (*rsa.PublicKey, error)
	SignPKCS1v15(ctx context.Context, message []byte) ([]byte, error)
}

// WithShuffleKey makes key sign the seeds of shuffled openings; a service
// without one answers a shuffled program after its opening KEYS_UNAVAILABLE.
func WithShuffleKey(key ShuffleKey) Option { return func(s *Service) { s.shuffle.key = key } }

// NewShuffleNonce returns a shuffle's nonce: 16 bytes from crypto/rand, in
// hex. It makes the message signed at the opening unique to this shuffle.
func NewShuffleNonce() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// ShuffleMessage is what the shuffle key signs at the opening of program
// programID, the shuffle's commitment: "waitingroom/shuffle/v2 ", the
// program id, a space and the nonce.
func ShuffleMessage(programID, nonce string) string {
	return "waitingroom/shuffle/v2 " + programID + " " + nonce
}

// SignSeed returns the seed of program programID's shuffle with nonce:
// key's signature of ShuffleMessage, in unpadded base64url.
func SignSeed(ctx context.Context, key ShuffleKey, programID, nonce string) (string, error) {
	sig, err := key.SignPKCS1v15(ctx, []byte(ShuffleMessage(programID, nonce)))
	if err != nil {
		return "", fmt.Errorf("queue: sign the shuffle seed: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(sig), nil
}

// VerifySeed reports whether seed, unpadded base64url, is the shuffle
// key pub's RSASSA-PKCS1-v1_5 SHA-256 signature of message.
func VerifySeed(pub *rsa.PublicKey, message, seed string) error {
	sig, err := base64.RawURLEncoding.DecodeString(seed)
	if err != nil {
		return fmt.Errorf("queue: the seed is not base64url: %w", err)
	}
	digest := sha256.Sum256([]byte(message))
	if err := rsa.VerifyPKCS1v15(pub, crypto.SHA256, digest[:], sig); err != nil {
		return fmt.Errorf("queue: the seed is not the key's signature of %q: %w", message, err)
	}
	return nil
}

// EncodePublicKey is a shuffle key's public half as answers publish it:
// its PKIX (SubjectPublicKeyInfo) DER, in standard base64.
func EncodePublicKey(pub *rsa.PublicKey) (string, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return "", fmt.Errorf("queue: encode the shuffle key: %w", err)
	}
	return base64.StdEncoding.EncodeToString(der), nil
}

// ParsePublicKey reads a public key that EncodePublicKey wrote.
func ParsePublicKey(s string) (*rsa.PublicKey, error) {
	der, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("queue: the shuffle key is not base64: %w", err)
	}
	k, err := x509.ParsePKIXPublicKey(der)
	if err != nil {
		return nil, fmt.Errorf("queue: parse the shuffle key: %w", err)
	}
	pub, ok := k.(*rsa.PublicKey)
	if !ok {
		return nil, fmt.Errorf("queue: the shuffle key is %T, want RSA", k)
	}
	return pub, nil
}

// shuffleRounds is the Feistel network's number of rounds.
const shuffleRounds = 10

// PlaceOf returns the place of ticket in a pre-queue of prequeue tickets
// shuffled with seed: π(ticket), π a permutation of 1..prequeue keyed by
// the seed (a 10-round Feistel network; see docs/design.md, "The shuffle").
// Tickets outside 1..prequeue keep their number.
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

// Place is t's place in p's admission order, and whether it has one yet:
// its ticket; in a shuffled opening, a pre-queue ticket's place in the
// permutation the revealed seed keys, none until the pre-queue is fixed
// and the seed revealed.
func (p Program) Place(t Token) (int64, bool) {
	switch {
	case !p.Shuffle:
		return t.Ticket, true
	case !p.PrequeueFixed:
		return 0, false // everyone in so far will be in the pre-queue
	case t.Ticket > p.Prequeue:
		return t.Ticket, true
	case p.ShuffleSeed == "":
		return 0, false
	}
	return PlaceOf(p.ShuffleSeed, p.Prequeue, t.Ticket), true
}

// shuffleSeeds signs the seeds of an instance's shuffled openings, once
// per program and nonce, and keeps them with the key's public half.
type shuffleSeeds struct {
	key ShuffleKey

	mu      sync.Mutex
	pub     string
	seeds   map[string]string // by ShuffleMessage
	retryAt time.Time         // after a failed KMS call, none before this
}

// shuffleKeyBackoff is how long an instance leaves the shuffle key alone
// after a failed call, so that answers do not each wait on an unreachable
// KMS.
const shuffleKeyBackoff = 2 * time.Second

// withShuffle returns p, if it shuffles, with ShufflePublicKey (empty while
// the key cannot be read) and, once its pre-queue is fixed, ShuffleSeed,
// signed on first need and kept for the instance's life. Without a seed no
// place is known, so a signing failure is KEYS_UNAVAILABLE.
func (s *Service) withShuffle(ctx context.Context, p Program) (Program, error) {
	if !p.Shuffle {
		return p, nil
	}
	ss := &s.shuffle
	if ss.key == nil {
		if !p.PrequeueFixed {
			return p, nil
		}
		return Program{}, &Error{Kind: KindInternal, Code: api.CodeKeysUnavailable, Message: "The opening's draw cannot be made.", Err: errors.New("no shuffle key")}
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	now := s.clock.Now()
	if ss.pub == "" && !now.Before(ss.retryAt) {
		if pub, err := ss.key.PublicKey(ctx); err == nil {
			ss.pub, _ = EncodePublicKey(pub)
		} else {
			ss.retryAt = now.Add(shuffleKeyBackoff)
		}
	}
	p.ShufflePublicKey = ss.pub
	if !p.PrequeueFixed {
		return p, nil
	}
	msg := ShuffleMessage(p.ID, p.ShuffleNonce)
	if seed, ok := ss.seeds[msg]; ok {
		p.ShuffleSeed = seed
		return p, nil
	}
	unavailable := func(err error) error {
		return &Error{Kind: KindUnavailable, Code: api.CodeKeysUnavailable, Message: "The opening's draw cannot be made just now; retry shortly.", Err: err, RetryAfter: ss.retryAt.Sub(now)}
	}
	if now.Before(ss.retryAt) {
		return Program{}, unavailable(errors.New("shuffle key failed recently"))
	}
	seed, err := SignSeed(ctx, ss.key, p.ID, p.ShuffleNonce)
	if err != nil {
		ss.retryAt = now.Add(shuffleKeyBackoff)
		return Program{}, unavailable(err)
	}
	if ss.seeds == nil {
		ss.seeds = map[string]string{}
	}
	p.ShuffleSeed, ss.seeds[msg] = seed, seed
	return p, nil
}

// AdmitsToken reports whether t is admitted at now: whether its place is.
func (p Program) AdmitsToken(t Token, now time.Time) bool {
	place, ok := p.Place(t)
	return ok && p.Admits(place, now)
}

// openingSpread is the span after the opening over which, seen at now, the
// people of a shuffled pre-queue come back to learn their place: a
// hundredth of the pre-queue's admission time (its size at the opening
// extrapolated from the entries so far), within 1 to 5 s.
func (p Program) openingSpread(now time.Time) time.Duration {
	const minOpeningSpread, maxOpeningSpread = time.Second, 5 * time.Second
	r := p.Settled().Rate
	if r <= 0 {
		return maxOpeningSpread
	}
	size := float64(p.Issued)
	if open, since := p.OpensAt.Sub(p.CreatedAt), now.Sub(p.CreatedAt); since > 0 && open > since {
		size *= float64(open) / float64(since)
	}
	d := time.Duration(size * 10 / r.PerSecond() * float64(time.Millisecond)) // size / rate / 100 s
	return min(max(d, minOpeningSpread), maxOpeningSpread)
}
