package queue

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"strings"
	"time"

	"github.com/example/waitingroom/internal/api"
)

// Bounds of a handoff (docs/design.md, "One place per account, and a place that moves").
const (
	HandoffLife    = 5 * time.Minute  // a code moves the place until then
	HandoffGap     = 10 * time.Second // the least time between two codes of a place
	MaxMoves       = 5                // how often a place may move
	handoffCodeLen = 16               // Crockford base32: 80 random bits
)

// crockford is the alphabet of handoff codes: no I, L, O or U.
const crockford = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

// Handoff is a stored handoff code, by the hash of the code: the token it
// moves, until ExpiresAt.
type Handoff struct {
	Hash, ProgramID, TokenID string
	ExpiresAt                time.Time
}

// HandoffStore moves places between devices (storetest holds the contract):
// ErrNotFound without the item, ErrConflict on a failed condition.
type HandoffStore interface {
	// PutHandoff stores h, then records it on token t.ID (t.Handoff,
	// t.HandoffAt) if that token is pending and made no code after
	// notBefore; ErrConflict otherwise.
	PutHandoff(ctx context.Context, h Handoff, t Token, notBefore time.Time) error
	// GetHandoff reads the handoff of code hash hash.
	GetHandoff(ctx context.Context, hash string) (Handoff, error)
	// MoveToken records that pending token t.ID moved to t.MovedTo at
	// t.MovedAt, if it still holds handoff t.Handoff and has not moved,
	// ends its push listing, and returns the token as stored afterwards.
	MoveToken(ctx context.Context, t Token) (Token, error)
}

var (
	errHandoffNotFound = Errorf(KindNotFound, api.CodeHandoffNotFound, "This code is unknown or expired, or a newer code replaced it: ask the other device for a new one.")
	errHandoffUsed     = Errorf(KindConflict, api.CodeHandoffUsed, "This place was already moved to another device.")
	errInvalidCode     = Errorf(KindInvalid, api.CodeInvalidHandoffCode, "A handoff code is 16 letters and digits.")
)

// handoffStore is the store as a HandoffStore, or HANDOFF_REFUSED.
func (s *Service) handoffStore() (HandoffStore, error) {
	if hs, ok := s.store.(HandoffStore); ok {
		return hs, nil
	}
	return nil, Errorf(KindConflict, api.CodeHandoffRefused, "This deployment cannot move places between devices.")
}

// MakeHandoff makes a code that moves tokenID's waiting place to another
// device, replacing its last one; HANDOFF_TOO_SOON within HandoffGap of it.
func (s *Service) MakeHandoff(ctx context.Context, programID, tokenID string) (code string, expires time.Time, err error) {
	hs, err := s.handoffStore()
	if err != nil {
		return "", time.Time{}, err
	}
	t, err := s.token(ctx, programID, tokenID)
	if err != nil {
		return "", time.Time{}, err
	}
	now := s.clock.Now()
	if err := s.refuseHandoff(t, now); err != nil {
		return "", time.Time{}, err
	}
	code = newHandoffCode()
	h := Handoff{Hash: handoffHash(programID, code), ProgramID: programID, TokenID: t.ID, ExpiresAt: now.Add(HandoffLife)}
	t.Handoff, t.HandoffAt = h.Hash, now.Truncate(time.Millisecond)
	err = hs.PutHandoff(ctx, h, t, now.Add(-HandoffGap))
	if errors.Is(err, ErrConflict) || errors.Is(err, ErrNotFound) {
		stored, rerr := s.token(ctx, programID, tokenID)
		if rerr != nil {
			return "", time.Time{}, rerr
		}
		if stored.Handoff == h.Hash { // applied, its answer lost
			return code, h.ExpiresAt, nil
		}
		if rerr := s.refuseHandoff(stored, now); rerr != nil {
			return "", time.Time{}, rerr
		}
	}
	if err != nil {
		return "", time.Time{}, storeError("put handoff", err)
	}
	return code, h.ExpiresAt, nil
}

// refuseHandoff is why t, as read at now, may not get a new code; nil if it may.
func (s *Service) refuseHandoff(t Token, now time.Time) error {
	switch {
	case !t.Pending():
		return Errorf(KindConflict, api.CodeNotWaiting, "This place is no longer waiting: it was admitted, left or moved.")
	case t.Moves >= MaxMoves:
		return Errorf(KindConflict, api.CodeHandoffRefused, "This place has moved %d times, the most it may.", MaxMoves)
	case t.Account != "":
		return Errorf(KindConflict, api.CodeHandoffRefused, "This place is your account's: sign in on the other device to see it there.")
	case now.Before(t.HandoffAt.Add(HandoffGap)):
		return &Error{Kind: KindTooSoon, Code: api.CodeHandoffTooSoon, Message: "A code was made just now; use it, or ask again shortly.", RetryAfter: t.HandoffAt.Add(HandoffGap).Sub(now)}
	}
	return nil
}

// Redeem moves the place of handoff code to a new token id and answers it,
// moved=true when this call moved it; key, the redeeming device's
// Idempotency-Key, makes a retry answer the same token, and only the first
// device to redeem the code gets the place.
func (s *Service) Redeem(ctx context.Context, programID, code, key string) (v View, moved bool, err error) {
	hs, err := s.handoffStore()
	if err != nil {
		return View{}, false, err
	}
	if !ValidProgramID(programID) {
		return View{}, false, errInvalidProgramID
	}
	if !ValidIdempotencyKey(key) {
		return View{}, false, errInvalidKey
	}
	code, ok := NormalizeHandoffCode(code)
	if !ok {
		return View{}, false, errInvalidCode
	}
	newID := idempotentTokenID(programID, "handoff\x00"+code+"\x00"+key)
	h, err := hs.GetHandoff(ctx, handoffHash(programID, code))
	switch {
	case errors.Is(err, ErrNotFound):
		// Swept since: a late retry of a redeem that moved the place finds it.
		if n, err := s.token(ctx, programID, newID); err == nil {
			v, err = s.answer(ctx, programID, n)
			return v, false, err
		}
		return View{}, false, errHandoffNotFound
	case err != nil:
		return View{}, false, storeError("get handoff", err)
	case h.ProgramID != programID:
		return View{}, false, errHandoffNotFound
	}
	t, err := s.token(ctx, programID, h.TokenID)
	if err != nil {
		return View{}, false, err
	}
	now := s.clock.Now()
	if t.MovedTo != newID {
		if err := checkMove(t, h, now); err != nil {
			return View{}, false, err
		}
		m := t
		m.MovedTo, m.MovedAt = newID, now.Truncate(time.Millisecond)
		stored, err := hs.MoveToken(ctx, m)
		if err != nil {
			return View{}, false, storeError("move token", err)
		}
		if stored.MovedTo != newID {
			return View{}, false, cmp.Or(checkMove(stored, h, now), error(errHandoffNotFound))
		}
		t, moved = stored, true
	}
	n, err := s.putToken(ctx, arrived(t))
	if err != nil {
		return View{}, false, err
	}
	v, err = s.answer(ctx, programID, n)
	return v, moved, err
}

// arrived is the token that holds the place moved token t moved to: its
// ticket and times, its next code no sooner than HandoffGap after the move,
// its moves counted.
func arrived(t Token) Token {
	return Token{ID: t.MovedTo, ProgramID: t.ProgramID, Ticket: t.Ticket, IssuedAt: t.IssuedAt, ExpiresAt: t.ExpiresAt,
		HandoffAt: t.MovedAt, Moves: t.Moves + 1, EnterPosition: t.EnterPosition, EnterEstimate: t.EnterEstimate}
}

// checkMove is why handoff h may not move t, as read at now; nil if it may.
func checkMove(t Token, h Handoff, now time.Time) error {
	switch {
	case t.MovedTo != "":
		return errHandoffUsed
	case !t.Pending():
		return Errorf(KindConflict, api.CodeNotWaiting, "This place is no longer waiting: it was admitted or left on the other device.")
	case t.Handoff != h.Hash || !now.Before(h.ExpiresAt):
		return errHandoffNotFound
	}
	return nil
}

// newHandoffCode is handoffCodeLen random Crockford base32 letters.
func newHandoffCode() string {
	var b [handoffCodeLen]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	for i := range b {
		b[i] = crockford[b[i]&31]
	}
	return string(b[:])
}

// NormalizeHandoffCode reads a code as typed: case, spaces and dashes
// ignored, I and L read as 1 and O as 0 (Crockford's base32).
func NormalizeHandoffCode(s string) (string, bool) {
	if len(s) > 64 {
		return "", false
	}
	s = strings.NewReplacer(" ", "", "-", "", "I", "1", "L", "1", "O", "0").Replace(strings.ToUpper(s))
	if len(s) != handoffCodeLen || strings.Trim(s, crockford) != "" {
		return "", false
	}
	return s, true
}

// handoffHash is the stored name of code in programID: the code itself is never stored.
func handoffHash(programID, code string) string {
	sum := sha256.Sum256([]byte("waitingroom/handoff/v1\x00" + programID + "\x00" + code))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}
