package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/example/waitingroom/internal/api"
	"github.com/example/waitingroom/internal/challenge"
	"github.com/example/waitingroom/internal/polling"
	"github.com/example/waitingroom/internal/queue"
)

// A markFunc is a write of t's state, from the token as put.
type markFunc func(ctx context.Context, s queue.Store, t queue.Token) (queue.Token, error)

// waiting is a token as Enter stores it.
func waiting(ticket int64) queue.Token {
	issued := t0.Add(ms(1_234))
	return queue.Token{ID: queue.NewTokenID(), ProgramID: "prog", Ticket: ticket, IssuedAt: issued, ExpiresAt: issued.Add(48 * time.Hour)}
}

func admitted(t queue.Token) queue.Token {
	t.AdmittedAt = t0.Add(ms(5_001))
	t.AdmissionExpiresAt = t.AdmittedAt.Add(10 * time.Minute)
	t.ExpiresAt = t.AdmissionExpiresAt.Add(24 * time.Hour).Add(ms(500)) // not on a second
	t.AdmissionPass = "pass-of-" + t.ID
	return t
}

func left(t queue.Token) queue.Token {
	t.LeftAt = t0.Add(ms(7_777))
	t.ExpiresAt = t.LeftAt.Add(24 * time.Hour)
	return t
}

// ended is t admitted, then its admission ended at left's instant.
func ended(t queue.Token) queue.Token { return left(admitted(t)) }
func same(t queue.Token) queue.Token  { return t }

func revoked(t queue.Token) queue.Token {
	t.RevokedAt = t0.Add(ms(9_001))
	t.ExpiresAt = t.RevokedAt.Add(24 * time.Hour)
	return t
}

// putTokens stores the tokens, which must not exist yet.
func putTokens(t *testing.T, s queue.Store, toks ...queue.Token) {
	t.Helper()
	for _, tok := range toks {
		checkErr(t, "PutToken", s.PutToken(t.Context(), tok), nil)
	}
}

func checkStoredToken(t *testing.T, s queue.Store, want queue.Token) {
	t.Helper()
	checkCall(t, "stored token", answer(s.GetToken(t.Context(), want.ID)), want)
}

func testToken(t *testing.T, s queue.Store) {
	for _, tc := range []struct {
		name string
		tok  queue.Token
	}{
		{"waiting", waiting(1)},
		{"admitted", admitted(waiting(2))},
		{"left", left(waiting(3))},
		{"every field", left(admitted(waiting(4)))},
		{"the report's fields", leftAt(placed(left(waiting(6)), 600, 10*time.Minute+ms(1)), 17, ms(16_999))},
		{"revoked", revoked(ended(waiting(1)))},
		{"zero times stay zero", queue.Token{ID: queue.NewTokenID(), ProgramID: "prog", Ticket: 5}},
		{"large ticket", waiting(1 << 53)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			putTokens(t, s, tc.tok)
			checkStoredToken(t, s, tc.tok)
		})
	}

	t.Run("ErrConflict on duplicate", func(t *testing.T) {
		first := waiting(10)
		putTokens(t, s, first)
		second := waiting(11)
		second.ID = first.ID
		checkErr(t, "second PutToken", s.PutToken(t.Context(), second), queue.ErrConflict)
		checkStoredToken(t, s, first)
	})

	t.Run("ErrNotFound", func(t *testing.T) {
		checkErr(t, "GetToken", errOf(s.GetToken(t.Context(), queue.NewTokenID())), queue.ErrNotFound)
	})
}

// writing is the markFunc that writes state(t) with op.
func writing(op func(queue.Store, context.Context, queue.Token) (queue.Token, error), state func(queue.Token) queue.Token) markFunc {
	return func(ctx context.Context, s queue.Store, t queue.Token) (queue.Token, error) {
		return op(s, ctx, state(t))
	}
}

var (
	markAdmitted = writing(queue.Store.MarkAdmitted, admitted)
	markLeft     = writing(queue.Store.MarkLeft, left)
	endAdmission = writing(queue.Store.EndAdmission, ended) // once admitted, at left's instant
	revoke       = writing(queue.Store.RevokeToken, revoked)
	// The same writes again, later.
	endAdmissionLate = writing(queue.Store.EndAdmission, func(t queue.Token) queue.Token { return later(ended(t)) })
	revokeLate       = writing(queue.Store.RevokeToken, func(t queue.Token) queue.Token { return later(revoked(t)) })
	markAdmittedLate = writing(queue.Store.MarkAdmitted, func(t queue.Token) queue.Token {
		t = later(admitted(t))
		t.AdmissionPass = "a later pass"
		return t
	})
	// A sighting from a stale copy of t: a mark writes only its own fields.
	markAdmittedStale = writing(queue.Store.MarkAdmitted, func(t queue.Token) queue.Token {
		t.Ticket, t.ProgramID, t.IssuedAt = 99, "other", t0
		return admitted(t)
	})
	// An end when the admission window is over.
	endAfterWindow = writing(queue.Store.EndAdmission, func(t queue.Token) queue.Token {
		t = ended(t)
		t.LeftAt = t.AdmissionExpiresAt
		return t
	})
)

// later is t with each of its instants a minute later.
func later(t queue.Token) queue.Token {
	for _, at := range []*time.Time{&t.AdmittedAt, &t.AdmissionExpiresAt, &t.LeftAt, &t.RevokedAt, &t.ExpiresAt} {
		if !at.IsZero() {
			*at = at.Add(time.Minute)
		}
	}
	return t
}

func admitThenEnd(ctx context.Context, s queue.Store, t queue.Token) (queue.Token, error) {
	if _, err := markAdmitted(ctx, s, t); err != nil {
		return queue.Token{}, err
	}
	return endAdmission(ctx, s, t)
}

// writeAll puts tok, then makes the writes: each answers, and the store
// keeps, want (the first writer wins).
func writeAll(t *testing.T, s queue.Store, tok, want queue.Token, writes ...markFunc) {
	t.Helper()
	putTokens(t, s, tok)
	for i, write := range writes {
		checkCall(t, fmt.Sprintf("write %d (the first writer wins)", i+1), answer(write(t.Context(), s, tok)), want)
	}
	checkStoredToken(t, s, want)
}

func testMark(t *testing.T, s queue.Store) {
	for _, tc := range []struct {
		name   string
		writes []markFunc
		want   func(queue.Token) queue.Token // stored after the writes, from the waiting token
	}{
		{"MarkAdmitted then MarkLeft", []markFunc{markAdmitted, markLeft}, admitted},
		{"MarkLeft then MarkAdmitted", []markFunc{markLeft, markAdmitted}, left},
		{"MarkAdmitted twice", []markFunc{markAdmitted, markAdmittedLate}, admitted},
		{"MarkLeft twice", []markFunc{markLeft, markLeft}, left},
		{"MarkAdmitted keeps stored fields", []markFunc{markAdmittedStale}, admitted}, // a mark writes its own fields only
		// EndAdmission acts on an admitted token only, once, within its window.
		{"MarkLeft then EndAdmission", []markFunc{markLeft, endAdmission}, left},
		{"MarkAdmitted, EndAdmission, then both again", []markFunc{admitThenEnd, endAdmissionLate}, ended},
		{"MarkAdmitted, EndAdmission, then MarkLeft", []markFunc{admitThenEnd, markLeft}, ended},
		{"EndAdmission of a waiting token", []markFunc{endAdmission}, same},
		{"EndAdmission after the window", []markFunc{markAdmitted, endAfterWindow}, admitted},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tok := waiting(3)
			writeAll(t, s, tok, tc.want(tok), tc.writes...)
		})
	}

	for _, tc := range []struct {
		op   string
		mark markFunc
	}{
		{"MarkAdmitted", markAdmitted},
		{"MarkLeft", markLeft},
		{"EndAdmission", endAdmission},
		{"RevokeToken", revoke},
	} {
		t.Run(tc.op+" ErrNotFound", func(t *testing.T) {
			tok := waiting(5)
			checkErr(t, tc.op, errOf(tc.mark(t.Context(), s, tok)), queue.ErrNotFound)
			checkErr(t, "GetToken after "+tc.op, errOf(s.GetToken(t.Context(), tok.ID)), queue.ErrNotFound)
		})
	}
}

// raceWrites races a against b on each of concurrentMarks waiting tokens;
// judge checks their answers and names the winner.
func raceWrites(t *testing.T, s queue.Store, a, b markFunc, judge func(i int, tok, ra, rb queue.Token) string) {
	ctx := t.Context()
	var mu sync.Mutex
	wins := map[string]int{}
	inParallel(concurrentMarks, func(i int) {
		tok := waiting(int64(i + 1))
		if err := s.PutToken(ctx, tok); err != nil {
			t.Errorf("PutToken: %v", err)
			return
		}
		var ra, rb queue.Token
		var errA, errB error
		var wg sync.WaitGroup
		wg.Go(func() { ra, errA = a(ctx, s, tok) })
		wg.Go(func() { rb, errB = b(ctx, s, tok) })
		wg.Wait()
		if err := errors.Join(errA, errB); err != nil {
			t.Errorf("token %d: %v", i, err)
			return
		}
		winner := judge(i, tok, ra, rb)
		mu.Lock()
		defer mu.Unlock()
		wins[winner]++
	})
	t.Logf("%d races won: %v", concurrentMarks, wins)
}

// testMarkConcurrent: per token, MarkAdmitted and MarkLeft race: one wins,
// both callers get the winner's token.
func testMarkConcurrent(t *testing.T, s queue.Store) {
	raceWrites(t, s, markAdmitted, markLeft, func(i int, tok, a, l queue.Token) string {
		want, winner := admitted(tok), "MarkAdmitted"
		switch {
		case !a.AdmittedAt.IsZero() && a.LeftAt.IsZero():
		case !a.LeftAt.IsZero() && a.AdmittedAt.IsZero():
			want, winner = left(tok), "MarkLeft"
		default:
			t.Errorf("token %d: MarkAdmitted returned AdmittedAt %v, LeftAt %v: want exactly one set", i, a.AdmittedAt, a.LeftAt)
			return "neither"
		}
		check(t, fmt.Sprintf("token %d: MarkAdmitted", i), a, want)
		if d := cmp.Diff(a, l); d != "" {
			t.Errorf("token %d: MarkLeft and MarkAdmitted returned different tokens (-MarkAdmitted +MarkLeft):\n%s", i, d)
		}
		got, err := s.GetToken(t.Context(), tok.ID)
		if err != nil {
			t.Errorf("token %d: GetToken: %v", i, err)
		} else if d := cmp.Diff(a, got); d != "" {
			t.Errorf("token %d: stored token differs from the marks' (-marks +stored):\n%s", i, d)
		}
		return winner
	})
}

// testRevoke: a revoke lands once on a token in any state; then it takes no
// sighting and no leave, but its admission may still end.
func testRevoke(t *testing.T, s queue.Store) {
	ctx := t.Context()
	for _, tc := range []struct {
		name   string
		before func(queue.Token) queue.Token // the token as put
		second markFunc
		want   func(queue.Token) queue.Token // stored after the revoke and second, from the token put
	}{
		{"waiting, then MarkAdmitted", same, markAdmitted, revoked},
		{"waiting, then MarkLeft", same, markLeft, revoked},
		{"admitted, then revoked again", admitted, revokeLate, revoked},
		{"admitted, then EndAdmission", admitted, endAdmission, func(t queue.Token) queue.Token {
			e := revoked(t)
			e.LeftAt, e.ExpiresAt = left(t).LeftAt, left(t).ExpiresAt // EndAdmission's retention
			return e
		}},
		{"left, then MarkAdmitted", left, markAdmitted, revoked},
		{"ended, then EndAdmission", ended, endAdmissionLate, revoked},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tok := tc.before(waiting(2))
			putTokens(t, s, tok)
			checkCall(t, "RevokeToken", answer(revoke(ctx, s, tok)), revoked(tok))
			want := tc.want(tok)
			checkCall(t, "second write", answer(tc.second(ctx, s, tok)), want)
			checkStoredToken(t, s, want)
		})
	}
	t.Run("keeps stored fields", func(t *testing.T) {
		tok := admitted(waiting(3))
		putTokens(t, s, tok)
		stale := waiting(99)
		stale.ID, stale.ProgramID = tok.ID, "other"
		checkCall(t, "RevokeToken", answer(revoke(ctx, s, stale)), revoked(tok))
	})
	t.Run("ErrNotFound on a claim", func(t *testing.T) {
		c := claimOf(queue.NewTokenID(), "claim-a", t0)
		checkCall(t, "ClaimToken", answer(s.ClaimToken(ctx, c, t0)), c)
		checkErr(t, "RevokeToken", errOf(revoke(ctx, s, queue.Token{ID: c.ID, ProgramID: "prog"})), queue.ErrNotFound)
		checkStoredToken(t, s, c)
	})
}

// testRevokeConcurrent: per token, a revoke races the first sighting: both
// callers get the same revoked token, admitted only if the sighting won.
func testRevokeConcurrent(t *testing.T, s queue.Store) {
	raceWrites(t, s, markAdmitted, revoke, func(i int, tok, a, r queue.Token) string {
		if !r.AdmittedAt.IsZero() {
			check(t, fmt.Sprintf("token %d: RevokeToken", i), r, revoked(admitted(tok)))
			return "the sighting" // MarkAdmitted answered before the revoke landed
		}
		check(t, fmt.Sprintf("token %d: RevokeToken", i), r, revoked(tok))
		if d := cmp.Diff(r, a); d != "" {
			t.Errorf("token %d: MarkAdmitted after the revoke differs (-RevokeToken +MarkAdmitted):\n%s", i, d)
		}
		return "the revoke"
	})
}

// claimsPerKey is how many enters race for one key's token (as in issue 16).
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

	t.Run("claim, retry, lose, fill", func(t *testing.T) {
		id := queue.NewTokenID()
		a, b := claimOf(id, "claim-a", at), claimOf(id, "claim-b", at.Add(ms(5)))
		checkCall(t, "first claim", answer(s.ClaimToken(ctx, a, at.Add(-ms(10_000)))), a)
		checkStoredToken(t, s, a)
		checkCall(t, "the claim retried", answer(s.ClaimToken(ctx, a, at.Add(-ms(10_000)))), a)
		checkCall(t, "another claim while a's is live", answer(s.ClaimToken(ctx, b, at)), a)
		checkCall(t, "fill by the claim that lost", answer(s.FillToken(ctx, filled(id, 8), "claim-b")), a)
		tok := filled(id, 7)
		checkCall(t, "fill", answer(s.FillToken(ctx, tok, "claim-a")), tok)
		checkStoredToken(t, s, tok)
		checkCall(t, "the fill retried", answer(s.FillToken(ctx, tok, "claim-a")), tok)
		// A token is never taken over, however old.
		checkCall(t, "claim on a token", answer(s.ClaimToken(ctx, b, at.Add(time.Hour))), tok)
		checkErr(t, "release of a filled claim", s.ReleaseClaim(ctx, id, "claim-a"), nil)
		checkStoredToken(t, s, tok)
	})

	t.Run("takeover", func(t *testing.T) {
		id := queue.NewTokenID()
		a, b := claimOf(id, "claim-a", at), claimOf(id, "claim-b", at.Add(ms(10_001)))
		checkCall(t, "first claim", answer(s.ClaimToken(ctx, a, at.Add(-ms(10_000)))), a)
		checkCall(t, "claim once a's is stale", answer(s.ClaimToken(ctx, b, at.Add(ms(1)))), b)
		checkCall(t, "fill by the claim taken over", answer(s.FillToken(ctx, filled(id, 8), "claim-a")), b)
		tok := filled(id, 9)
		checkCall(t, "fill by the claim that took over", answer(s.FillToken(ctx, tok, "claim-b")), tok)
		checkStoredToken(t, s, tok)
	})

	t.Run("release", func(t *testing.T) {
		id := queue.NewTokenID()
		a, b := claimOf(id, "claim-a", at), claimOf(id, "claim-b", at.Add(ms(1)))
		checkCall(t, "first claim", answer(s.ClaimToken(ctx, a, at.Add(-ms(10_000)))), a)
		checkErr(t, "release by another claim", s.ReleaseClaim(ctx, id, "claim-b"), nil)
		checkStoredToken(t, s, a)
		checkErr(t, "release", s.ReleaseClaim(ctx, id, "claim-a"), nil)
		released := a
		released.ClaimedAt = time.Time{}
		checkStoredToken(t, s, released)
		// Released: stale for any enter, at once.
		checkCall(t, "claim after the release", answer(s.ClaimToken(ctx, b, t0)), b)
		checkErr(t, "release of an absent item", s.ReleaseClaim(ctx, queue.NewTokenID(), "claim-a"), nil)
	})

	t.Run("fill of an absent item", func(t *testing.T) {
		checkErr(t, "FillToken", errOf(s.FillToken(ctx, filled(queue.NewTokenID(), 1), "claim-a")), queue.ErrNotFound)
	})
}

// testClaimsConcurrent: of the enters that claim one key's token at once (or
// take over a stale claim), exactly one wins and all are answered its claim.
func testClaimsConcurrent(t *testing.T, s queue.Store) {
	at := t0.Add(ms(3_000))
	race := func(t *testing.T, id, round string, at, staleBefore time.Time) string {
		t.Helper()
		got := make([]queue.Token, claimsPerKey)
		oneWins(t, "racing ClaimToken", claimsPerKey, func(i int) (bool, error) {
			claim := fmt.Sprintf("%s-%02d", round, i)
			var err error
			got[i], err = s.ClaimToken(t.Context(), claimOf(id, claim, at), staleBefore)
			return got[i].Claim == claim, err
		})
		for i, g := range got {
			if g.Claim != got[0].Claim || g.Ticket != 0 {
				t.Fatalf("claim %d answered %+v, claim 0 %+v: want one claim for all", i, g, got[0])
			}
		}
		return got[0].Claim
	}
	for k := range 4 {
		id := queue.NewTokenID()
		race(t, id, "first", at, at.Add(-ms(10_000)))
		second := race(t, id, "takeover", at.Add(ms(10_001)), at.Add(ms(1)))
		tok := filled(id, int64(k+1))
		checkCall(t, "fill after the race", answer(s.FillToken(t.Context(), tok, second)), tok)
	}
}

// testChallenges: a proof of work serves one owner, again (a retry), and no other.
func testChallenges(t *testing.T, s queue.Store) {
	ctx := t.Context()
	exp := t0.Add(5 * time.Minute)
	checkErr(t, "first use", s.UseChallenge(ctx, "key-1", "owner-a", exp), nil)
	checkErr(t, "the use retried", s.UseChallenge(ctx, "key-1", "owner-a", exp), nil)
	checkErr(t, "use by another owner", s.UseChallenge(ctx, "key-1", "owner-b", exp), queue.ErrConflict)
	checkErr(t, "another key", s.UseChallenge(ctx, "key-2", "owner-b", exp), nil)
	checkErr(t, "the first owner on the second key", s.UseChallenge(ctx, "key-2", "owner-a", exp), queue.ErrConflict)
}

// testChallengesConcurrent: of owners using one proof at once, exactly one
// succeeds and the others get ErrConflict.
func testChallengesConcurrent(t *testing.T, s queue.Store) {
	oneWins(t, "racing UseChallenge", claimsPerKey, func(i int) (bool, error) {
		err := s.UseChallenge(t.Context(), "key-race", fmt.Sprint("owner-", i), t0.Add(5*time.Minute))
		if errors.Is(err, queue.ErrConflict) {
			return false, nil
		}
		return err == nil, err
	})
}

// ProofReplay holds a Service on s to issue 21's rule: of concurrent enters
// with one solved proof (half with an Idempotency-Key each), exactly one takes
// a ticket and the others answer CHALLENGE_FAILED.
func ProofReplay(t *testing.T, s queue.Store) {
	ctx := t.Context()
	svc := queue.NewService(s, polling.DefaultTiers())
	paused := true
	_, _, err := svc.PutProgram(ctx, "guarded", api.ProgramSettings{Paused: &paused, ChallengeBits: new(int64(8))})
	checkErr(t, "PutProgram", err, nil)
	c := answer(svc.Challenge(ctx, "guarded")).must(t, "Challenge")
	sol, _, err := challenge.Solve(ctx, c.Challenge, c.Bits)
	checkErr(t, "Solve", err, nil)
	oneWins(t, "enters with one proof", claimsPerKey, func(i int) (bool, error) {
		e := queue.Entry{Challenge: c.Challenge, Solution: sol}
		if i%2 == 1 {
			e.IdempotencyKey = fmt.Sprintf("proof-replay-key-%02d", i)
		}
		_, created, err := svc.Enter(ctx, "guarded", e)
		var qe *queue.Error
		switch {
		case errors.As(err, &qe) && qe.Code == api.CodeChallengeFailed:
			return false, nil
		case err != nil:
			return false, fmt.Errorf("enter %d: %w, want a ticket or CHALLENGE_FAILED", i, err)
		case !created:
			return false, fmt.Errorf("enter %d answered a token it did not create", i)
		}
		return true, nil
	})
	if p := answer(svc.Program(ctx, "guarded")).must(t, "Program"); p.Issued != 1 {
		t.Errorf("%d tickets issued with one proof, want 1", p.Issued)
	}
}
