package client

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"

	"github.com/example/waitingroom/internal/api"
	"github.com/example/waitingroom/internal/challenge"
)

// OpChallenge is the fetch of a proof-of-work challenge.
const OpChallenge Op = "GET challenge"

// Challenge fetches a proof-of-work challenge for an enter into programID.
func (c *Client) Challenge(ctx context.Context, programID string) (api.Challenge, error) {
	var ch api.Challenge
	path := strings.Replace(api.ChallengePath, "{programId}", url.PathEscape(programID), 1)
	_, _, err := c.do(ctx, request{OpChallenge, http.MethodGet, path, nil, nil, []int{http.StatusOK}}, &ch)
	return ch, err
}

// Prove fetches a challenge of programID and solves it on this core, and
// returns e with the proof; bits 0 (no proof asked) leaves e as it is.
func (c *Client) Prove(ctx context.Context, programID string, e Entry) (Entry, error) {
	ch, err := c.Challenge(ctx, programID)
	if err != nil || ch.Bits == 0 {
		return e, err
	}
	sol, _, err := challenge.Solve(ctx, ch.Challenge, ch.Bits)
	if err != nil {
		return e, err
	}
	e.Challenge, e.Solution = ch.Challenge, sol
	return e, nil
}

// NeedsProof reports whether err refused an enter for its proof of work:
// none sent (CHALLENGE_REQUIRED) or one refused (CHALLENGE_FAILED); a new
// proof (Prove) is then the way in.
func NeedsProof(err error) bool {
	var e *Error
	return errors.As(err, &e) && (e.Code == api.CodeChallengeRequired || e.Code == api.CodeChallengeFailed)
}
