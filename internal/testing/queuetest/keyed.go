package queuetest

import (
	"context"
	"sync"
	"time"

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
