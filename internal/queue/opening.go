package queue

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"math/bits"
	"time"
)

// A scheduled, fair opening: see the README, "A scheduled, fair opening".

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
	if o := unixMs(p.OpensAt); !p.OpensAt.IsZero() && o > ms {
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

// NewSeed returns a shuffle seed: 32 bytes from crypto/rand, in hex.
func NewSeed() string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Commitment is the published commitment to a shuffle seed: the SHA-256
// of its bytes, in hex ("" for no seed).
func Commitment(seed string) string {
	if seed == "" {
		return ""
	}
	b, err := hex.DecodeString(seed)
	if err != nil {
		return ""
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// Draw is a token's draw in a shuffled opening: the first 8 bytes, big
// endian, of HMAC-SHA256 keyed with the seed's bytes over
// "waitingroom/shuffle/v1", a NUL, the program id, a NUL and the token id.
// Anyone who knows the revealed seed can compute it.
func Draw(seed, programID, tokenID string) uint64 {
	key, _ := hex.DecodeString(seed)
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte("waitingroom/shuffle/v1\x00" + programID + "\x00" + tokenID))
	return binary.BigEndian.Uint64(mac.Sum(nil))
}

// PlaceOf is the place in a pre-queue of prequeue tickets of the token
// whose draw is draw: ⌊draw × prequeue / 2⁶⁴⌋ + 1, uniform in
// 1..prequeue for a uniform draw.
func PlaceOf(draw uint64, prequeue int64) int64 {
	hi, _ := bits.Mul64(draw, uint64(prequeue))
	return int64(hi) + 1
}

// drawHex and parseDraw are the stored form of a draw: 16 hex digits.
func drawHex(d uint64) string {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], d)
	return hex.EncodeToString(b[:])
}

func parseDraw(s string) (uint64, bool) {
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != 8 {
		return 0, false
	}
	return binary.BigEndian.Uint64(b), true
}

// Place is t's place in p's admission order, and whether it has one yet:
// its ticket; in a shuffled opening, a pre-queue ticket's place from its
// draw, none until the pre-queue is fixed.
func (p Program) Place(t Token) (int64, bool) {
	switch {
	case !p.Shuffle:
		return t.Ticket, true
	case !p.PrequeueFixed:
		return 0, false // everyone in so far will be in the pre-queue
	case t.Ticket > p.Prequeue:
		return t.Ticket, true
	}
	if d, ok := parseDraw(t.Draw); ok {
		return PlaceOf(d, p.Prequeue), true
	}
	return t.Ticket, true // a pre-queue ticket without a draw: none is stored so
}

// AdmitsToken reports whether t is admitted at now: whether its place is.
func (p Program) AdmitsToken(t Token, now time.Time) bool {
	place, ok := p.Place(t)
	return ok && p.Admits(place, now)
}

// openingSpread is over how long, at now, the people of a shuffled
// pre-queue come back after the opening to learn their place: a hundredth
// of the time the pre-queue will take to be admitted (its size at the
// opening foreseen from the pace of the entries so far), within
// [minOpeningSpread, maxOpeningSpread]. Too short is a herd; too long, a
// late hearing for those drawn near the front.
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
