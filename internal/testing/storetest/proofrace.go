package storetest

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/example/waitingroom/internal/api"
	"github.com/example/waitingroom/internal/challenge"
	"github.com/example/waitingroom/internal/polling"
	"github.com/example/waitingroom/internal/queue"
)

// ProofReplay holds a Service on s to issue 21's rule: claimsPerKey
// enters at once with one solved proof of work (half of them without an
// Idempotency-Key, half each with its own) take exactly one ticket; every
// other one answers CHALLENGE_FAILED.
func ProofReplay(t *testing.T, s queue.Store) {
	ctx := t.Context()
	svc := queue.NewService(s, polling.DefaultTiers())
	paused := true
	if _, _, err := svc.PutProgram(ctx, "guarded", api.ProgramSettings{Paused: &paused, ChallengeBits: new(int64(8))}); err != nil {
		t.Fatal(err)
	}
	c, err := svc.Challenge(ctx, "guarded")
	if err != nil {
		t.Fatal(err)
	}
	sol, _, err := challenge.Solve(ctx, c.Challenge, c.Bits)
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		created bool
		err     error
	}
	results := make([]result, claimsPerKey)
	var wg sync.WaitGroup
	for i := range results {
		wg.Go(func() {
			e := queue.Entry{Challenge: c.Challenge, Solution: sol}
			if i%2 == 1 {
				e.IdempotencyKey = fmt.Sprintf("proof-replay-key-%02d", i)
			}
			_, created, err := svc.Enter(ctx, "guarded", e)
			results[i] = result{created, err}
		})
	}
	wg.Wait()
	won := 0
	for i, r := range results {
		var qe *queue.Error
		switch {
		case r.err == nil && r.created:
			won++
		case r.err != nil && (!errors.As(r.err, &qe) || qe.Code != api.CodeChallengeFailed):
			t.Errorf("enter %d: %v, want a ticket or CHALLENGE_FAILED", i, r.err)
		case r.err == nil:
			t.Errorf("enter %d answered a token it did not create", i)
		}
	}
	p, err := svc.Program(ctx, "guarded")
	if err != nil {
		t.Fatal(err)
	}
	if won != 1 || p.Issued != 1 {
		t.Errorf("%d enters took a ticket with one proof, %d tickets issued; want 1 and 1", won, p.Issued)
	}
}
