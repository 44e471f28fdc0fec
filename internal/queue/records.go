package queue

// The operator's records (packages catalog and history), and an admin's
// look at a token and its revoke (docs/design.md, "The operator's records").

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/example/waitingroom/internal/admission"
	"github.com/example/waitingroom/internal/api"
	"github.com/example/waitingroom/internal/catalog"
	"github.com/example/waitingroom/internal/clock"
	"github.com/example/waitingroom/internal/history"
	"github.com/example/waitingroom/internal/pace"
)

// incarnationMargin is how much earlier than its program a token may seem
// issued (clocks differ) and still be its, not a deleted namesake's.
const incarnationMargin = catalog.DeletedRetention / 2

// ProgramList is a page of programs in id order, and the next cursor.
type ProgramList struct {
	Programs []admission.Counters
	Next     string
}

// ListPrograms returns up to limit (0: catalog.DefaultLimit) programs in
// id order, from cursor ("" for the first), each read fresh.
func (s *Service) ListPrograms(ctx context.Context, cursor string, limit int) (ProgramList, error) {
	limit, err := pageLimit(limit, catalog.DefaultLimit, catalog.MaxLimit)
	if err != nil {
		return ProgramList{}, err
	}
	after, ok := catalog.DecodeCursor(cursor)
	if !ok || after != "" && !ValidProgramID(after) {
		return ProgramList{}, errInvalidCursor
	}
	read := func(ctx context.Context, id string) (admission.Program, bool, error) {
		p, err := s.store.GetProgram(ctx, id)
		if errors.Is(err, ErrNotFound) {
			return p, false, nil // listed by a creation that failed, or deleted since
		}
		return p, err == nil, err
	}
	programs, next, err := catalog.List(ctx, s.store, after, limit, read)
	if err != nil {
		return ProgramList{}, storeError("list programs", err)
	}
	now := s.clock.Now()
	l := ProgramList{Programs: make([]admission.Counters, 0, len(programs)), Next: next}
	for _, p := range programs {
		l.Programs = append(l.Programs, p.Counters(now))
	}
	return l, nil
}

// DeleteProgram deletes a closed program (else PROGRAM_NOT_CLOSED), its id
// taken for catalog.DeletedRetention.
func (s *Service) DeleteProgram(ctx context.Context, programID string) error {
	if !ValidProgramID(programID) {
		return errInvalidProgramID
	}
	ctx, cancel := clock.WithTimeout(ctx, s.clock, adminDeadline)
	defer cancel()
	for range maxAdminTrials {
		p, err := s.store.GetProgram(ctx, programID)
		if err != nil {
			return programReadError("get program", err)
		}
		now := s.clock.Now()
		if p.TakesEntries(now) {
			return Errorf(KindConflict, api.CodeProgramNotClosed, "Close the program (closed: true) before you delete it.")
		}
		err = s.store.DeleteProgram(ctx, p, now.Add(catalog.DeletedRetention))
		switch {
		case err == nil:
			s.cache.Forget(programID)
			s.log.LogAttrs(ctx, slog.LevelInfo, "program deleted", slog.String("programId", programID), slog.String("actor", history.ActorOf(ctx)), slog.Int64("version", p.Version))
			return nil
		case !errors.Is(err, ErrConflict):
			return storeError("delete program", err)
		}
		if err := s.clock.Sleep(ctx, s.jitter(maxConflictBackoff)); err != nil {
			break
		}
	}
	return errBusy(time.Second)
}

// History returns up to limit (0: history.DefaultLimit) of programID's
// applied changes, newest first, from cursor ("" for the newest).
func (s *Service) History(ctx context.Context, programID, cursor string, limit int) (history.Page, error) {
	if !ValidProgramID(programID) {
		return history.Page{}, errInvalidProgramID
	}
	limit, err := pageLimit(limit, history.DefaultLimit, history.MaxLimit)
	if err != nil {
		return history.Page{}, err
	}
	from, ok := history.DecodeCursor(cursor)
	if !ok {
		return history.Page{}, errInvalidCursor
	}
	p, err := s.store.GetProgram(ctx, programID)
	if err != nil {
		return history.Page{}, programReadError("get program", err)
	}
	// A change older than the program is its deleted namesake's.
	born := p.CreatedAt.Add(-adminDeadline)
	page, err := history.Read(ctx, s.store, programID, p.Changes, born, from, limit, func(c history.Change) (bool, error) {
		return s.revokeApplied(ctx, programID, c)
	})
	if err != nil {
		return history.Page{}, storeError("read changes", err)
	}
	return page, nil
}

// pageLimit is def for 0, INVALID_LIMIT outside 1..most.
func pageLimit(limit, def, most int) (int, error) {
	switch {
	case limit == 0:
		return def, nil
	case limit < 1 || limit > most:
		return 0, Errorf(KindInvalid, api.CodeInvalidLimit, "limit must be a whole number between 1 and %d.", most)
	}
	return limit, nil
}

// Lookup is an admin's look at a token: its holder's answer without the
// pass, and the token as stored.
type Lookup struct {
	View  View
	Token Token
}

// Token looks up token tokenID of programID for an admin, recording nothing.
func (s *Service) Token(ctx context.Context, programID, tokenID string) (Lookup, error) {
	p, t, err := s.adminToken(ctx, programID, tokenID)
	if err != nil {
		return Lookup{}, err
	}
	now := s.clock.Now()
	if !t.Pending() {
		v := storedView(t, now)
		v.AdmissionPass = "" // the holder's key to the site, not support's
		return Lookup{View: v, Token: t}, nil
	}
	if p, err = s.withShuffle(ctx, p); err != nil {
		return Lookup{}, err
	}
	if !p.AdmitsTicket(t.Ticket, now) {
		return Lookup{View: s.waiting(p, t, now), Token: t}, nil
	}
	// Admitted but not seen yet (no window, no pass), or sealed as a no-show.
	v := View{TokenID: t.ID, IssuedAt: t.IssuedAt, Ticket: t.Ticket, Status: StatusAdmitted}
	if place, _ := p.Place(t.Ticket); p.Followed() && place <= p.Capacity.NoShowThrough {
		v.Status = StatusExpired
	}
	return Lookup{View: v, Token: t}, nil
}

// RevokeToken revokes token tokenID of programID, or the token a handoff
// moved its place to, ending an admission it held and freeing its slot;
// revoking again is not an error.
func (s *Service) RevokeToken(ctx context.Context, programID, tokenID string) error {
	_, t, err := s.adminToken(ctx, programID, tokenID)
	for moves := 0; err == nil && t.MovedTo != "" && moves <= MaxMoves; moves++ {
		moved := t
		_, t, err = s.adminToken(ctx, programID, moved.MovedTo) // the place, where it went
		if errors.Is(err, errTokenNotFound) {
			// Its redeem's second write is still to come: store it now, to revoke.
			t, err = s.putToken(ctx, arrived(moved))
		}
	}
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

// adminToken reads programID, fresh, and its token tokenID for an admin.
func (s *Service) adminToken(ctx context.Context, programID, tokenID string) (admission.Program, Token, error) {
	t, err := s.token(ctx, programID, tokenID)
	if err != nil {
		return admission.Program{}, Token{}, err
	}
	p, err := s.store.GetProgram(ctx, programID)
	if err != nil {
		return admission.Program{}, Token{}, programReadError("get program", err)
	}
	if t.IssuedAt.Before(p.CreatedAt.Add(-incarnationMargin)) {
		return admission.Program{}, Token{}, errTokenNotFound // of a deleted program of that id
	}
	return p, t, nil
}

// revokeRecorded revokes t as a change of programID's history, committed
// once the token is stored revoked at its instant (revokeApplied).
func (s *Service) revokeRecorded(ctx context.Context, programID string, t Token) (Token, error) {
	now := s.clock.Now()
	rec := history.Change{ID: t.ID, At: pace.FromUnixMs(pace.UnixMs(now)), Actor: history.ActorOf(ctx), Action: history.ActionRevoke, Fields: history.Fields(map[string]string{"tokenId": t.ID})}
	if err := s.store.PutChange(ctx, programID, rec); err != nil {
		return Token{}, storeError("record the revoke", err)
	}
	t.RevokedAt = rec.At
	if keep := rec.At.Add(endedTokenRetention); t.ExpiresAt.Before(keep) {
		t.ExpiresAt = keep // at least a day
	}
	t, err := s.store.RevokeToken(ctx, t)
	if errors.Is(err, ErrNotFound) {
		return Token{}, errTokenNotFound
	} else if err != nil {
		return Token{}, storeError("revoke token", err)
	} else if !t.RevokedAt.Equal(rec.At) {
		return t, nil // revoked by another call, which recorded it
	}
	if err := s.store.CommitChange(ctx, programID, rec.At, rec.ID); err != nil {
		s.log.LogAttrs(ctx, slog.LevelWarn, "revoke stored, its history entry left uncommitted", slog.String("programId", programID), slog.String("error", err.Error()))
	}
	s.endChange(ctx, programID, rec)
	return t, nil
}

// revokeApplied reports whether c, an uncommitted revoke of programID, was
// applied.
func (s *Service) revokeApplied(ctx context.Context, programID string, c history.Change) (bool, error) {
	t, err := s.store.GetToken(ctx, c.ID)
	if errors.Is(err, ErrNotFound) {
		return false, nil
	} else if err != nil {
		return false, err
	}
	return t.ProgramID == programID && t.RevokedAt.Equal(c.At), nil
}

// endRevoked ends the admission the revoked token t held and frees its slot.
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
