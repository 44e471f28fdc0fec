package queue

import (
	"context"
	"errors"
	"time"

	"github.com/example/waitingroom/internal/api"
)

// Lookup is an admin's look at a token (Service.Token).
type Lookup struct {
	// View is the answer the token's holder would get now, computed
	// without recording anything (lookupView).
	View View
	// Token is the token as stored.
	Token Token
}

// Token looks up token tokenID of programID for an admin: what its holder
// would be told, but never the pass, from a fresh read of the program, and
// the token as stored. Unlike a poll it records no sighting, signs no pass
// and runs no fold; a token of another program is TOKEN_NOT_FOUND.
func (s *Service) Token(ctx context.Context, programID, tokenID string) (Lookup, error) {
	p, t, err := s.adminToken(ctx, programID, tokenID)
	if err != nil {
		return Lookup{}, err
	}
	now := s.clock.Now()
	if !t.pending() {
		v := storedView(t, now)
		v.AdmissionPass = "" // the holder's key to the site, not support's
		return Lookup{View: v, Token: t}, nil
	}
	if p, err = s.withShuffle(ctx, p); err != nil {
		return Lookup{}, err
	}
	return Lookup{View: s.lookupView(p, t, now), Token: t}, nil
}

// lookupView is the view of t, pending in the store, in p at now as an
// admin sees it: WAITING; ADMITTED by the counter but not seen by its
// holder yet (no window, no pass); or EXPIRED once the folds sealed its
// place as a no-show.
func (s *Service) lookupView(p Program, t Token, now time.Time) View {
	if !p.AdmitsToken(t, now) {
		return s.waiting(p, t, now)
	}
	v := View{TokenID: t.ID, IssuedAt: t.IssuedAt, Ticket: t.Ticket, Status: StatusAdmitted}
	if place, _ := p.Place(t); p.capacityManaged() && place <= p.Capacity.NoShowThrough {
		v.Status = StatusExpired
	}
	return v
}

// RevokeToken revokes token tokenID of programID: from then on it reads
// REVOKED, with no place, admission or pass. Revoking it again is not an
// error. An admission it held ends, and its slot under a cap frees at
// once, as ReleaseSession frees it; a pass already handed out stays valid
// offline until it expires (docs/security.md, "Revoked tokens").
func (s *Service) RevokeToken(ctx context.Context, programID, tokenID string) error {
	_, t, err := s.adminToken(ctx, programID, tokenID)
	if err != nil {
		return err
	}
	mine := false
	if t.RevokedAt.IsZero() {
		now := s.clock.Now()
		if t, err = s.revoke(ctx, t, now); err != nil {
			return err
		}
		mine = t.RevokedAt.Equal(now.Truncate(time.Millisecond))
	}
	// Keyed by the token and its revocation: a retry records it once. A
	// revoke this call did not apply (a repeat, or a concurrent one's)
	// records it only if its own record is missing (a retry after the
	// record failed), so that it never replaces the actor who applied it.
	if !mine {
		recorded, err := s.hasChange(ctx, programID, ChangeKey{FromUnixMs(UnixMs(t.RevokedAt)), t.ID})
		if err != nil {
			return err
		}
		mine = !recorded
	}
	if mine {
		if err := s.recordAction(ctx, programID, t.ID, t.RevokedAt, ActionRevoke, map[string]string{"tokenId": t.ID}); err != nil {
			return err
		}
	}
	return s.endRevoked(ctx, t)
}

// adminToken reads programID, fresh, and its token tokenID for an admin:
// PROGRAM_NOT_FOUND once the program is deleted, TOKEN_NOT_FOUND for a
// token of another program or of a deleted namesake.
func (s *Service) adminToken(ctx context.Context, programID, tokenID string) (Program, Token, error) {
	t, err := s.token(ctx, programID, tokenID)
	if err != nil {
		return Program{}, Token{}, err
	}
	p, err := s.store.GetProgram(ctx, programID)
	if errors.Is(err, ErrNotFound) {
		return Program{}, Token{}, errProgramNotFound()
	} else if err != nil {
		return Program{}, Token{}, storeError("get program", err)
	}
	if t.IssuedAt.Before(p.CreatedAt.Add(-incarnationMargin)) {
		return Program{}, Token{}, errTokenNotFound() // of a deleted program of that id
	}
	return p, t, nil
}

// hasChange reports whether programID's history holds the change k.
func (s *Service) hasChange(ctx context.Context, programID string, k ChangeKey) (bool, error) {
	from := ChangeKey{At: k.At.Add(time.Millisecond)} // the first key after k's instant
	for range maxHistoryReads {
		page, more, err := s.store.Changes(ctx, programID, from, DefaultChangesLimit)
		if err != nil {
			return false, storeError("read changes", err)
		}
		for _, c := range page {
			if c.At.Equal(k.At) && c.ID == k.ID {
				return true, nil
			}
			if c.At.Before(k.At) {
				return false, nil
			}
			from = c.Key()
		}
		if !more {
			return false, nil
		}
	}
	return false, nil
}

// revoke stores t as revoked at now, keeping it at least a day, and
// returns the token as stored afterwards (revoked by this call or a
// concurrent one).
func (s *Service) revoke(ctx context.Context, t Token, now time.Time) (Token, error) {
	r := t
	r.RevokedAt = now.Truncate(time.Millisecond)
	if keep := now.Add(endedTokenRetention); r.ExpiresAt.Before(keep) {
		r.ExpiresAt = keep
	}
	stored, err := s.store.RevokeToken(ctx, r)
	if errors.Is(err, ErrNotFound) {
		return Token{}, Errorf(KindNotFound, api.CodeTokenNotFound, "No such token in this program's queue.")
	} else if err != nil {
		return Token{}, storeError("revoke token", err)
	}
	return stored, nil
}

// endRevoked ends the admission t, a revoked token, held when it was
// revoked, and frees its slot (freeSlot); a retried revoke does it again,
// which changes nothing.
func (s *Service) endRevoked(ctx context.Context, t Token) error {
	if t.AdmittedAt.IsZero() || !t.RevokedAt.Before(t.AdmissionExpiresAt) {
		return nil // never seen admitted, or its window was over
	}
	if t.LeftAt.IsZero() {
		ended := t
		ended.LeftAt = t.RevokedAt
		var err error
		if t, err = s.store.EndAdmission(ctx, ended); err != nil {
			return storeError("end admission", err)
		}
	}
	return s.freeSlot(ctx, t, s.clock.Now())
}

func errTokenRevoked() error {
	return Errorf(KindForbidden, api.CodeTokenRevoked, "The token was revoked: its admission pass is withdrawn.")
}
