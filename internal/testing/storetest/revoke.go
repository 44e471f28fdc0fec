package storetest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/example/waitingroom/internal/queue"
)

// revoked is t revoked by an admin after it was admitted and left.
func revoked(t queue.Token) queue.Token {
	t.RevokedAt = t0.Add(ms(9_001))
	t.ExpiresAt = t.RevokedAt.Add(24 * time.Hour)
	return t
}

func revoke(ctx context.Context, s queue.Store, t queue.Token) (queue.Token, error) {
	return s.RevokeToken(ctx, revoked(t))
}

// revokeLate is a second revoke, at another time.
func revokeLate(ctx context.Context, s queue.Store, t queue.Token) (queue.Token, error) {
	r := revoked(t)
	r.RevokedAt, r.ExpiresAt = r.RevokedAt.Add(time.Minute), r.ExpiresAt.Add(time.Minute)
	return s.RevokeToken(ctx, r)
}

// testRevoke: a revoke lands once on a token in any state, and from then
// on a token takes no sighting and no leave; its admission may still end.
func testRevoke(t *testing.T, s queue.Store) {
	ctx := t.Context()
	t.Run("stored", func(t *testing.T) {
		tok := revoked(ended(waiting(1)))
		if err := s.PutToken(ctx, tok); err != nil {
			t.Fatalf("PutToken: %v", err)
		}
		checkStoredToken(t, s, tok)
	})
	id := func(t queue.Token) queue.Token { return t }
	for _, tc := range []struct {
		name   string
		before func(queue.Token) queue.Token // the token as put
		second markFunc
		want   func(queue.Token) queue.Token // stored after the revoke and second, from the token put
	}{
		{"waiting, then MarkAdmitted", id, markAdmitted, revoked},
		{"waiting, then MarkLeft", id, markLeft, revoked},
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
			if err := s.PutToken(ctx, tok); err != nil {
				t.Fatalf("PutToken: %v", err)
			}
			got, err := revoke(ctx, s, tok)
			if err != nil {
				t.Fatalf("RevokeToken: %v", err)
			}
			checkToken(t, "RevokeToken", got, revoked(tok))
			want := tc.want(tok)
			if got, err = tc.second(ctx, s, tok); err != nil {
				t.Fatalf("second write: %v", err)
			}
			checkToken(t, "second write", got, want)
			checkStoredToken(t, s, want)
		})
	}
	t.Run("keeps stored fields", func(t *testing.T) {
		tok := admitted(waiting(3))
		if err := s.PutToken(ctx, tok); err != nil {
			t.Fatalf("PutToken: %v", err)
		}
		stale := waiting(99)
		stale.ID, stale.ProgramID = tok.ID, "other"
		got, err := revoke(ctx, s, stale)
		if err != nil {
			t.Fatalf("RevokeToken: %v", err)
		}
		checkToken(t, "RevokeToken", got, revoked(tok))
	})
	t.Run("ErrNotFound", func(t *testing.T) {
		tok := waiting(4)
		_, err := revoke(ctx, s, tok)
		checkErr(t, "RevokeToken", err, queue.ErrNotFound)
		_, err = s.GetToken(ctx, tok.ID)
		checkErr(t, "GetToken after RevokeToken", err, queue.ErrNotFound)
	})
	t.Run("ErrNotFound on a claim", func(t *testing.T) {
		c := claimOf(queue.NewTokenID(), "claim-a", t0)
		if _, err := s.ClaimToken(ctx, c, t0); err != nil {
			t.Fatalf("ClaimToken: %v", err)
		}
		_, err := revoke(ctx, s, queue.Token{ID: c.ID, ProgramID: "prog"})
		checkErr(t, "RevokeToken", err, queue.ErrNotFound)
		checkStoredToken(t, s, c)
	})
}

// testRevokeConcurrent: per token, a revoke races the first sighting of
// its admission. One wins, both callers get the same token, and it is
// revoked: with the admission if the sighting came first, without it
// (no pass stored) if the revoke did.
func testRevokeConcurrent(t *testing.T, s queue.Store) {
	ctx := t.Context()
	var mu sync.Mutex
	wins := map[bool]int{} // sighting first? -> count
	inParallel(concurrentMarks, func(i int) {
		tok := waiting(int64(i + 1))
		if err := s.PutToken(ctx, tok); err != nil {
			t.Errorf("PutToken: %v", err)
			return
		}
		var a, r queue.Token
		var errA, errR error
		var wg sync.WaitGroup
		wg.Go(func() { a, errA = markAdmitted(ctx, s, tok) })
		wg.Go(func() { r, errR = revoke(ctx, s, tok) })
		wg.Wait()
		if err := errors.Join(errA, errR); err != nil {
			t.Errorf("token %d: %v", i, err)
			return
		}
		sightedFirst := !r.AdmittedAt.IsZero()
		want := revoked(tok)
		if sightedFirst {
			want = revoked(admitted(tok))
		}
		mu.Lock()
		wins[sightedFirst]++
		mu.Unlock()
		if d := tokenDiff(want, r); d != "" {
			t.Errorf("token %d: RevokeToken (-want +got):\n%s", i, d)
		}
		if sightedFirst {
			return // MarkAdmitted answered before the revoke landed
		}
		if d := cmp.Diff(r, a); d != "" {
			t.Errorf("token %d: MarkAdmitted after the revoke differs (-RevokeToken +MarkAdmitted):\n%s", i, d)
		}
	})
	t.Logf("%d races: the sighting won %d, the revoke %d", concurrentMarks, wins[true], wins[false])
}
