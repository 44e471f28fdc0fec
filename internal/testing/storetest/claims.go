package storetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/example/waitingroom/internal/queue"
)

// claimsPerKey is how many enters race for one key's token in
// testClaimsConcurrent, as many as issue 16 sent in parallel.
const claimsPerKey = 16

// claimOf is a claim on token id made at at, as Enter stores it.
func claimOf(id, claim string, at time.Time) queue.Token {
	return queue.Token{ID: id, ProgramID: "prog", Claim: claim, ClaimedAt: at, ExpiresAt: at.Add(time.Hour)}
}

// filled is waiting(ticket) stored as the fill of a claim on id.
func filled(id string, ticket int64) queue.Token {
	t := waiting(ticket)
	t.ID = id
	return t
}

func testClaims(t *testing.T, s queue.Store) {
	ctx := t.Context()
	at := t0.Add(ms(2_000))
	claimed := func(t *testing.T, what string, c queue.Token, staleBefore time.Time, want queue.Token) {
		t.Helper()
		got, err := s.ClaimToken(ctx, c, staleBefore)
		checkErr(t, what, err, nil)
		checkToken(t, what, got, want)
	}
	filledAs := func(t *testing.T, what string, tok queue.Token, claim string, want queue.Token) {
		t.Helper()
		got, err := s.FillToken(ctx, tok, claim)
		checkErr(t, what, err, nil)
		checkToken(t, what, got, want)
	}

	t.Run("claim, retry, lose, fill", func(t *testing.T) {
		id := queue.NewTokenID()
		a, b := claimOf(id, "claim-a", at), claimOf(id, "claim-b", at.Add(ms(5)))
		claimed(t, "first claim", a, at.Add(-ms(10_000)), a)
		checkStoredToken(t, s, a)
		// The same claim again: an attempt whose first was applied and
		// whose answer was lost recognises its own claim.
		claimed(t, "the claim retried", a, at.Add(-ms(10_000)), a)
		claimed(t, "another claim while a's is live", b, at, a)
		filledAs(t, "fill by the claim that lost", filled(id, 8), "claim-b", a)
		tok := filled(id, 7)
		filledAs(t, "fill", tok, "claim-a", tok)
		checkStoredToken(t, s, tok)
		// The fill retried after its answer was lost finds its own token.
		filledAs(t, "the fill retried", tok, "claim-a", tok)
		// A token is never taken over, however old.
		claimed(t, "claim on a token", b, at.Add(time.Hour), tok)
		checkErr(t, "release of a filled claim", s.ReleaseClaim(ctx, id, "claim-a"), nil)
		checkStoredToken(t, s, tok)
	})

	t.Run("takeover", func(t *testing.T) {
		id := queue.NewTokenID()
		a, b := claimOf(id, "claim-a", at), claimOf(id, "claim-b", at.Add(ms(10_001)))
		claimed(t, "first claim", a, at.Add(-ms(10_000)), a)
		claimed(t, "claim once a's is stale", b, at.Add(ms(1)), b)
		filledAs(t, "fill by the claim taken over", filled(id, 8), "claim-a", b)
		tok := filled(id, 9)
		filledAs(t, "fill by the claim that took over", tok, "claim-b", tok)
		checkStoredToken(t, s, tok)
	})

	t.Run("release", func(t *testing.T) {
		id := queue.NewTokenID()
		a, b := claimOf(id, "claim-a", at), claimOf(id, "claim-b", at.Add(ms(1)))
		claimed(t, "first claim", a, at.Add(-ms(10_000)), a)
		checkErr(t, "release by another claim", s.ReleaseClaim(ctx, id, "claim-b"), nil)
		checkStoredToken(t, s, a)
		checkErr(t, "release", s.ReleaseClaim(ctx, id, "claim-a"), nil)
		released := a
		released.ClaimedAt = time.Time{}
		checkStoredToken(t, s, released)
		// Released: stale for any enter, at once.
		claimed(t, "claim after the release", b, t0, b)
		checkErr(t, "release of an absent item", s.ReleaseClaim(ctx, queue.NewTokenID(), "claim-a"), nil)
	})

	t.Run("fill of an absent item", func(t *testing.T) {
		_, err := s.FillToken(ctx, filled(queue.NewTokenID(), 1), "claim-a")
		checkErr(t, "FillToken", err, queue.ErrNotFound)
	})
}

// testClaimsConcurrent: of the enters that claim one key's token at once,
// exactly one gets its claim and every other is answered that claim; the
// same when they take over a stale claim.
func testClaimsConcurrent(t *testing.T, s queue.Store) {
	ctx := t.Context()
	at := t0.Add(ms(3_000))
	race := func(t *testing.T, id, round string, at, staleBefore time.Time) string {
		t.Helper()
		got := make([]queue.Token, claimsPerKey)
		errs := make([]error, claimsPerKey)
		inParallel(claimsPerKey, func(i int) {
			got[i], errs[i] = s.ClaimToken(ctx, claimOf(id, fmt.Sprintf("%s-%02d", round, i), at), staleBefore)
		})
		won := 0
		for i, g := range got {
			checkErr(t, "ClaimToken", errs[i], nil)
			if g.Claim == fmt.Sprintf("%s-%02d", round, i) {
				won++
			}
			if g.Claim != got[0].Claim || g.Ticket != 0 {
				t.Fatalf("claim %d answered %+v, claim 0 %+v: want one claim for all", i, g, got[0])
			}
		}
		if won != 1 {
			t.Fatalf("%d of %d racing claims won, want exactly 1", won, claimsPerKey)
		}
		return got[0].Claim
	}
	for k := range 4 {
		id := queue.NewTokenID()
		race(t, id, "first", at, at.Add(-ms(10_000)))
		second := race(t, id, "takeover", at.Add(ms(10_001)), at.Add(ms(1)))
		tok := filled(id, int64(k+1))
		got, err := s.FillToken(ctx, tok, second)
		checkErr(t, "FillToken", err, nil)
		checkToken(t, "fill after the race", got, tok)
	}
}
