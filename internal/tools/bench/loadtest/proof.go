package loadtest

import (
	"context"
	"time"

	"github.com/example/waitingroom/internal/api"
	"github.com/example/waitingroom/internal/challenge"
	"github.com/example/waitingroom/internal/tools/client"
)

// maxProofs bounds the proofs of work one user solves for its enter.
const maxProofs = 3

// enter enters the program with one idempotency key (and a proof of work when asked) until answered, and
// returns the answer with the last attempt's send and receipt times; ok is false when it gave up.
func (r *runner) enter(ctx context.Context) (ans api.Token, sent, recv time.Duration, ok bool) {
	e := client.Entry{IdempotencyKey: client.NewIdempotencyKey()}
	prove, proofs := r.proofs, 0
	err := r.retrying(ctx, func() (err error) {
		for {
			if prove {
				prove, proofs = false, proofs+1
				if e, err = r.prove(ctx, e); err != nil {
					return err
				}
			}
			sent = r.since()
			ans, _, err = r.client.Enter(ctx, r.cfg.ProgramID, e)
			recv = r.since()
			if !client.NeedsProof(err) || proofs >= maxProofs {
				return err
			}
			prove = true
		}
	})
	return ans, sent, recv, err == nil
}

// prove fetches a challenge and returns e with its solution.
func (r *runner) prove(ctx context.Context, e client.Entry) (client.Entry, error) {
	ch, err := r.client.Challenge(ctx, r.cfg.ProgramID)
	if err != nil || ch.Bits == 0 {
		return e, err
	}
	start := time.Now()
	sol, _, err := challenge.Solve(ctx, ch.Challenge, ch.Bits)
	r.solveNs.Add(int64(time.Since(start)))
	if err != nil {
		return e, err
	}
	r.solves.Add(1)
	e.Challenge, e.Solution = ch.Challenge, sol
	return e, nil
}
