package queue

import (
	"context"
	"errors"
	"time"

	"github.com/example/waitingroom/internal/api"
)

// Bounds of an enter with an Idempotency-Key, which claims the token item
// its key names before it takes a ticket (see docs/design.md, "Idempotency
// and lost answers").
const (
	// ClaimTimeout is how long a claim holds before another enter with the
	// key may take it over: twice the queue function's timeout.
	ClaimTimeout = 10 * time.Second
	// claimRetention is how long the store keeps a claim that nobody
	// filled (its TTL).
	claimRetention = time.Hour
	// claimWait bounds how long an enter waits for the token of another
	// enter with the same key before answering ENTER_IN_PROGRESS.
	claimWait = time.Second
	// claimPollFirst and claimPollMax are the first and the longest pause
	// between two reads of a claimed token while waiting.
	claimPollFirst = 20 * time.Millisecond
	claimPollMax   = 200 * time.Millisecond
)

// enterWithKey is Enter with an Idempotency-Key: one key takes at most one
// ticket, however many enters carry it at once. The enter that claims the
// key's token takes the ticket and fills the claim with it; the others
// answer that token once it is there, waiting for it up to claimWait, and
// else ENTER_IN_PROGRESS (503, to retry). A claim older than ClaimTimeout
// is taken over. Only the enter that claims needs the proof of work, which
// it records as used by the key's token: a retry that finds that token
// answers it without a proof, and one that claims again (the first lost
// its claim) may use the same proof again.
func (s *Service) enterWithKey(ctx context.Context, programID string, e Entry) (View, bool, error) {
	id := idempotentTokenID(programID, e.IdempotencyKey)
	claim := NewTokenID()
	start := s.clock.Now()
	for pause := claimPollFirst; ; pause = min(2*pause, claimPollMax) {
		t, err := s.store.GetToken(ctx, id)
		now := s.clock.Now()
		if errors.Is(err, ErrNotFound) || err == nil && t.Claim != "" && now.After(t.ClaimedAt.Add(ClaimTimeout)) {
			// An unknown program, or a full line, gets no claim item;
			// the program is usually in the instance's cache.
			if err := s.checkEntry(ctx, programID, e, id, now); err != nil {
				return View{}, false, err
			}
			c := Token{ID: id, ProgramID: programID, Claim: claim, ClaimedAt: now.Truncate(time.Millisecond), ExpiresAt: now.Add(claimRetention)}
			t, err = s.store.ClaimToken(ctx, c, now.Add(-ClaimTimeout))
			if err == nil && t.Claim == claim {
				v, created, err := s.enterNew(ctx, programID, id, claim)
				if err != nil {
					s.releaseClaim(ctx, id, claim)
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

// fillToken stores t, which took its ticket under claim, in place of the
// claim, and returns what is stored: t, or the token of an enter that took
// the claim over and filled it first. A claim taken over and not filled
// yet, or gone, is ENTER_IN_PROGRESS: the client's retry answers the one
// token.
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

// releaseClaim gives up claim on token id after an enter failed, so that a
// retry need not wait ClaimTimeout; a claim already filled stays as it is.
// Best effort: a claim it cannot release is taken over after ClaimTimeout.
func (s *Service) releaseClaim(ctx context.Context, id, claim string) {
	_ = s.store.ReleaseClaim(ctx, id, claim)
}
