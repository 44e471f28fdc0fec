package queue

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/example/waitingroom/internal/admission"
	"github.com/example/waitingroom/internal/api"
	"github.com/example/waitingroom/internal/challenge"
)

// useMargin is how long a proof's use record outlives its challenge.
const useMargin = time.Minute

// WithChallengeSecret sets the challenges' secret, shared by every
// instance (without it, a random one).
func WithChallengeSecret(secret []byte) Option {
	return func(s *Service) { s.secret = secret }
}

// randomSecret is a fresh challenge secret.
func randomSecret() []byte {
	b := make([]byte, challenge.MinSecretLen)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	return b
}

// ChallengeView is a challenge for an enter into a program.
type ChallengeView struct {
	Challenge string
	Bits      int // 0: the program asks for no proof
	ExpiresAt time.Time
}

// Challenge issues a proof-of-work challenge for an enter into programID.
func (s *Service) Challenge(ctx context.Context, programID string) (ChallengeView, error) {
	if !ValidProgramID(programID) {
		return ChallengeView{}, errInvalidProgramID
	}
	now := s.clock.Now()
	p, err := s.program(ctx, programID, now)
	if err != nil {
		return ChallengeView{}, err
	}
	c, exp, err := challenge.Issue(s.secret, programID, int(p.ChallengeBits), now)
	if err != nil {
		return ChallengeView{}, &Error{Kind: KindInternal, Code: api.CodeInternal, Message: "internal error", Err: err}
	}
	return ChallengeView{Challenge: c, Bits: int(p.ChallengeBits), ExpiresAt: exp}, nil
}

// checkEntry refuses an enter into programID, as cached, that is closed or
// full, then checks e's proof of work for token id, before any write.
func (s *Service) checkEntry(ctx context.Context, programID string, e Entry, id string, now time.Time) error {
	p, err := s.program(ctx, programID, now)
	if err != nil {
		return err
	}
	switch {
	case !p.TakesEntries(now):
		return errEntriesClosed(p, now) // for good: never "try again later"
	case p.Full(now):
		return Errorf(KindConflict, api.CodeQueueFull, "The line is full (%d waiting): try again later.", p.MaxWaiting)
	}
	return s.checkProof(ctx, p, e, id, now)
}

// checkProof checks e's proof of work, if p asks one, and records its use.
func (s *Service) checkProof(ctx context.Context, p admission.Program, e Entry, owner string, now time.Time) error {
	if p.ChallengeBits == 0 {
		return nil
	}
	if e.Challenge == "" && e.Solution == "" {
		return errChallengeRequired(p.ID)
	}
	c, err := challenge.Verify(s.secret, p.ID, e.Challenge, e.Solution, now)
	switch {
	case errors.Is(err, challenge.ErrExpired):
		return errChallengeFailed("has expired; fetch a new one")
	case err != nil:
		return errChallengeFailed("is not valid for this program, or its solution is wrong")
	case int64(c.Bits) < p.ChallengeBits:
		return errChallengeFailed(fmt.Sprintf("asks for %d bits and the program now asks for %d; fetch a new one", c.Bits, p.ChallengeBits))
	}
	err = s.store.UseChallenge(ctx, useKey(e.Challenge), owner, c.ExpiresAt.Add(useMargin))
	switch {
	case errors.Is(err, ErrConflict):
		return errChallengeFailed("was already used by another enter; fetch a new one")
	case err != nil:
		return storeError("use challenge", err)
	}
	return nil
}

// useKey names a challenge's use record: a hash of it, 22 characters.
func useKey(c string) string {
	sum := sha256.Sum256([]byte(c))
	return base64.RawURLEncoding.EncodeToString(sum[:16])
}

func errChallengeRequired(programID string) error {
	route := strings.Replace(api.ChallengePath, "{programId}", programID, 1)
	return Errorf(KindForbidden, api.CodeChallengeRequired, "This program asks for a proof of work: GET %s, solve the challenge, and send it in %s with the solution in %s.",
		route, api.HeaderChallenge, api.HeaderSolution)
}

func errChallengeFailed(why string) error {
	return Errorf(KindForbidden, api.CodeChallengeFailed, "The proof of work %s.", why)
}
