package queue

import (
	"context"
	"errors"
	"time"

	"github.com/example/waitingroom/internal/api"
)

// Bounds of an enter with an Idempotency-Key.
const (
	// ClaimTimeout is how long a claim holds before another enter with the key may take it over.
	ClaimTimeout   = 10 * time.Second
	claimRetention = time.Hour              // the store's TTL of a claim nobody filled
	claimWait      = time.Second            // wait for another enter's token before ENTER_IN_PROGRESS
	claimPollFirst = 20 * time.Millisecond  // first pause between reads of a claimed token
	claimPollMax   = 200 * time.Millisecond // longest such pause
)

// enterWithKey is Enter as token t.ID, named by an Idempotency-Key or an
// account: the enter that claims t.ID takes the one ticket and fills the
// claim; the others answer that token within claimWait, else ENTER_IN_PROGRESS.
func (s *Service) enterWithKey(ctx context.Context, programID string, e Entry, want Token) (View, bool, error) {
	id, claim := want.ID, NewTokenID()
	start := s.clock.Now()
	for pause := claimPollFirst; ; pause = min(2*pause, claimPollMax) {
		t, err := s.store.GetToken(ctx, id)
		now := s.clock.Now()
		if errors.Is(err, ErrNotFound) || err == nil && t.Claim != "" && now.After(t.ClaimedAt.Add(ClaimTimeout)) {
			// An unknown program, or a full line, gets no claim item.
			if err := s.checkEntry(ctx, programID, e, id, now); err != nil {
				return View{}, false, err
			}
			c := Token{ID: id, ProgramID: programID, Claim: claim, ClaimedAt: now.Truncate(time.Millisecond), ExpiresAt: now.Add(claimRetention)}
			t, err = s.store.ClaimToken(ctx, c, now.Add(-ClaimTimeout))
			if err == nil && t.Claim == claim {
				v, created, err := s.enterNew(ctx, programID, want, claim)
				if err != nil {
					// Best effort: so that a retry need not wait ClaimTimeout.
					_ = s.store.ReleaseClaim(ctx, id, claim)
				}
				return v, created, err
			}
		}
		switch {
		case errors.Is(err, ErrNotFound):
			// The claim failed on an item gone since: wait, claim again.
		case err != nil:
			return View{}, false, storeError("claim token", err)
		case t.ProgramID != programID:
			return View{}, false, Errorf(KindInternal, api.CodeInternal, "token id of another program")
		case t.Claim == "":
			v, err := s.answer(ctx, programID, t)
			return v, false, err
		}
		if s.clock.Now().Add(pause).After(start.Add(claimWait)) {
			return View{}, false, errEnterInProgress
		}
		if err := s.clock.Sleep(ctx, pause); err != nil {
			return View{}, false, storeError("wait for the key's token", err)
		}
	}
}

// fillToken stores t in place of its claim and returns what is stored: t,
// or the token of an enter that took the claim over (unfilled or gone:
// ENTER_IN_PROGRESS).
func (s *Service) fillToken(ctx context.Context, t Token, claim string) (Token, error) {
	stored, err := s.store.FillToken(ctx, t, claim)
	switch {
	case errors.Is(err, ErrNotFound):
		return Token{}, errEnterInProgress
	case err != nil:
		return Token{}, storeError("fill token", err)
	case stored.Claim != "":
		return Token{}, errEnterInProgress
	}
	return stored, nil
}
