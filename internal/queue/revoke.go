package queue

import (
	"context"
	"errors"
	"log/slog"
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
	if t.RevokedAt.IsZero() {
		if t, err = s.revokeRecorded(ctx, programID, t); err != nil {
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

// revokeRecorded revokes t as a change of programID's history: the change
// is stored uncommitted first, keyed by the token and the instant the
// revoke sets, then committed once the token is stored revoked at that
// instant. A read shows an uncommitted revoke only if its token was
// revoked at its instant (revokeApplied), so a revoke applied is recorded
// once, with the actor who applied it, and one refused or lost is not.
func (s *Service) revokeRecorded(ctx context.Context, programID string, t Token) (Token, error) {
	now := s.clock.Now()
	rec := Change{ID: t.ID, At: FromUnixMs(UnixMs(now)), Actor: ActorOf(ctx), Action: ActionRevoke, Fields: fieldsOf(map[string]string{"tokenId": t.ID})}
	if err := s.store.PutChange(ctx, programID, rec); err != nil {
		return Token{}, storeError("record the revoke", err)
	}
	t, err := s.revoke(ctx, t, rec.At)
	if err != nil || !t.RevokedAt.Equal(rec.At) {
		return t, err // or revoked by another call, which recorded it
	}
	if err := s.store.CommitChange(ctx, programID, rec.At, rec.ID); err != nil {
		s.logger().LogAttrs(ctx, slog.LevelWarn, "revoke stored, its history entry left uncommitted", slog.String("programId", programID), slog.String("error", err.Error()))
	}
	s.endChange(ctx, programID, rec)
	return t, nil
}

// revokeApplied reports whether c, an uncommitted revoke of programID,
// was applied: its token is stored revoked at its instant.
func (s *Service) revokeApplied(ctx context.Context, programID string, c Change) (bool, error) {
	t, err := s.store.GetToken(ctx, c.ID)
	if errors.Is(err, ErrNotFound) {
		return false, nil
	} else if err != nil {
		return false, err
	}
	return t.ProgramID == programID && t.RevokedAt.Equal(c.At), nil
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
