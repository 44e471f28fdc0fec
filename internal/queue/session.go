package queue

import (
	"context"
	"crypto/subtle"
	"errors"
	"slices"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/example/waitingroom/internal/api"
)

// maxPassSize bounds the pass EndSession reads; a real one is under 1 KiB.
const maxPassSize = 4096

// EndSession ends the admission that pass, handed out for programID,
// grants (ending it again is not an error); under a cap its slot frees
// when its window ends.
func (s *Service) EndSession(ctx context.Context, programID, pass string) error {
	return s.endSession(ctx, programID, pass, false)
}

// ReleaseSession is EndSession for the protected site: the slot frees at once.
func (s *Service) ReleaseSession(ctx context.Context, programID, pass string) error {
	return s.endSession(ctx, programID, pass, true)
}

// endSession is EndSession, freeing the slot at once when release is set.
func (s *Service) endSession(ctx context.Context, programID, pass string, release bool) error {
	switch {
	case !ValidProgramID(programID):
		return errInvalidProgramID
	case pass == "":
		return Errorf(KindInvalid, api.CodeMissingPass, "An admission pass is required in the %s header.", api.HeaderAdmissionPass)
	}
	tokenID, ok := passToken(pass, programID)
	if !ok {
		return errInvalidPass
	}
	t, err := s.store.GetToken(ctx, tokenID)
	switch {
	case err == nil && t.ProgramID == programID && t.AdmissionPass != "" &&
		subtle.ConstantTimeCompare([]byte(t.AdmissionPass), []byte(pass)) == 1:
	case err == nil || errors.Is(err, ErrNotFound):
		return errInvalidPass
	default:
		return storeError("get token", err)
	}
	now := s.clock.Now()
	switch {
	case !t.RevokedAt.IsZero():
		return errTokenRevoked // the revoke ended it and freed its slot
	case !t.LeftAt.IsZero() && !release:
		return nil
	case !t.LeftAt.IsZero():
		// Ended before: the site's word frees the slot now.
	case !now.Before(t.AdmissionExpiresAt):
		return Errorf(KindForbidden, api.CodePassExpired, "The admission pass has expired: its admission is over.")
	default:
		if err := s.endAdmission(ctx, t, now); err != nil {
			return err
		}
	}
	if !release {
		return nil
	}
	return s.freeSlot(ctx, t, now)
}

// freeSlot records that t's sighted admission ended early (recordEnd).
func (s *Service) freeSlot(ctx context.Context, t Token, now time.Time) error {
	p, err := s.program(ctx, t.ProgramID, now)
	if err != nil {
		return err
	}
	if _, ok := s.capacityStore(p); !ok {
		return nil
	}
	if p, err = s.withShuffle(ctx, p); err != nil {
		return err
	}
	place, ok := p.Place(t.Ticket)
	if !ok {
		return nil // never admitted: never sighted
	}
	if err := s.recordEnd(ctx, p, place); err != nil {
		return err
	}
	s.maybeFold(ctx, p, now)
	return nil
}

// passToken reads, unverified, the sub of pass, an ES256 JWT for programID.
func passToken(pass, programID string) (string, bool) {
	if len(pass) > maxPassSize {
		return "", false
	}
	tok, err := jwt.ParseSigned(pass, []jose.SignatureAlgorithm{jose.ES256})
	if err != nil {
		return "", false
	}
	var c jwt.Claims
	if err := tok.UnsafeClaimsWithoutVerification(&c); err != nil || !ValidTokenID(c.Subject) || !slices.Equal(c.Audience, jwt.Audience{programID}) {
		return "", false
	}
	return c.Subject, true
}
