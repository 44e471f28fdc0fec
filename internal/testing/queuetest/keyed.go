package queuetest

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/example/waitingroom/internal/api"
	"github.com/example/waitingroom/internal/queue"
	"github.com/example/waitingroom/internal/testing/await"
	"github.com/example/waitingroom/internal/testing/clocktest"
)

// KeyedEnters makes a round of enters with one Idempotency-Key collide: the
// round's first N token reads answer once all N were made (all find the key
// unclaimed), and the fill waits until Settle (the others wait on their clock).
type KeyedEnters struct {
	Filled await.Counter // fills made, over all rounds

	mu    sync.Mutex
	reads *await.Barrier
	fill  chan struct{}
}

// Wrap returns store with its token reads and fills in k's rounds.
func (k *KeyedEnters) Wrap(store queue.Store) queue.Store { return keyedStore{store, k} }

type keyedStore struct {
	queue.Store
	k *KeyedEnters
}

// Round arms the next round of n enters.
func (s *KeyedEnters) Round(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reads, s.fill = &await.Barrier{N: n}, make(chan struct{})
}

func (s *KeyedEnters) round() (*await.Barrier, chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reads, s.fill
}

func (s keyedStore) GetToken(ctx context.Context, id string) (queue.Token, error) {
	t, err := s.Store.GetToken(ctx, id)
	if reads, _ := s.k.round(); reads != nil {
		if _, werr := reads.Arrive(ctx); werr != nil {
			return queue.Token{}, werr
		}
	}
	return t, err
}

func (s keyedStore) FillToken(ctx context.Context, t queue.Token, claim string) (queue.Token, error) {
	if _, fill := s.k.round(); fill != nil {
		select {
		case <-fill:
		case <-ctx.Done():
			return queue.Token{}, ctx.Err()
		}
	}
	defer s.k.Filled.Add()
	return s.Store.FillToken(ctx, t, claim)
}

// Settle ends a round of n enters on clk: once the n-1 losers sleep on clk,
// it lets the fill through, waits for fills in all, and wakes the losers.
func (s *KeyedEnters) Settle(ctx context.Context, clk clocktest.Manual, n, fills int) error {
	if err := clk.BlockUntilContext(ctx, n-1); err != nil {
		return err
	}
	_, fill := s.round()
	close(fill)
	if err := s.Filled.Wait(ctx, fills); err != nil {
		return err
	}
	clk.Advance(time.Second)
	return nil
}

// Accounts is the enqueue tokens of a site for tests: the token
// "account:NAME" names account NAME, any other is refused.
type Accounts struct{}

// Verify implements queue.EnqueueVerifier.
func (Accounts) Verify(_ context.Context, _, _, _, raw string) (string, error) {
	if name, ok := strings.CutPrefix(raw, "account:"); ok && name != "" {
		return name, nil
	}
	return "", errors.New("not an account")
}

// TakingAccounts is set with the enqueue settings a program needs to take Accounts' tokens.
func TakingAccounts(set api.ProgramSettings) api.ProgramSettings {
	set.EnqueueJWKSURL, set.EnqueueIssuer = new("https://site.example/jwks.json"), new("https://site.example")
	return set
}

// Collide makes, for each of keys rounds, parallel enters of entry(k) at
// once through svcs in turn, all finding the key unclaimed, and fails t
// unless each round answers one token.
func (s *KeyedEnters) Collide(t testing.TB, svcs []*queue.Service, clk clocktest.Manual, program string, keys, parallel int, entry func(k int) queue.Entry) {
	t.Helper()
	ctx := t.Context()
	for k := range keys {
		s.Round(parallel)
		ids := make([]string, parallel)
		var wg sync.WaitGroup
		for i := range ids {
			wg.Go(func() {
				v, _, err := svcs[i%len(svcs)].Enter(ctx, program, entry(k))
				if err != nil {
					t.Errorf("key %d, enter %d: %v", k, i, err)
				}
				ids[i] = v.TokenID
			})
		}
		// The winner's fill is held until the others wait for it on clk.
		if err := s.Settle(ctx, clk, parallel, k+1); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		for _, id := range ids {
			if id != ids[0] {
				t.Fatalf("key %d: parallel enters answered tokens %v, want one token", k, ids)
			}
		}
	}
}
