package storetest

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/example/waitingroom/internal/queue"
)

// testChallenges: a proof of work serves one owner, again and again (a
// retry), and no other.
func testChallenges(t *testing.T, s queue.Store) {
	ctx := t.Context()
	exp := t0.Add(5 * time.Minute)
	checkErr(t, "first use", s.UseChallenge(ctx, "key-1", "owner-a", exp), nil)
	checkErr(t, "the use retried", s.UseChallenge(ctx, "key-1", "owner-a", exp), nil)
	checkErr(t, "use by another owner", s.UseChallenge(ctx, "key-1", "owner-b", exp), queue.ErrConflict)
	checkErr(t, "another key", s.UseChallenge(ctx, "key-2", "owner-b", exp), nil)
	checkErr(t, "the first owner on the second key", s.UseChallenge(ctx, "key-2", "owner-a", exp), queue.ErrConflict)
}

// testChallengesConcurrent: of claimsPerKey owners using one proof at once,
// exactly one succeeds and the others get ErrConflict.
func testChallengesConcurrent(t *testing.T, s queue.Store) {
	errs := make([]error, claimsPerKey)
	var wg sync.WaitGroup
	for i := range errs {
		wg.Go(func() {
			errs[i] = s.UseChallenge(t.Context(), "key-race", fmt.Sprint("owner-", i), t0.Add(5*time.Minute))
		})
	}
	wg.Wait()
	won := 0
	for i, err := range errs {
		switch {
		case err == nil:
			won++
		case !errors.Is(err, queue.ErrConflict):
			t.Errorf("owner %d: %v, want nil or ErrConflict", i, err)
		}
	}
	if won != 1 {
		t.Errorf("%d owners used the proof, want 1", won)
	}
}
