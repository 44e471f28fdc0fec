package capacity

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
)

// maxEndMoves bounds how many end indexes an end tries.
const maxEndMoves = 8

// ErrEndsSealed means an end found maxEndMoves end indexes sealed in a row.
var ErrEndsSealed = errors.New("capacity: end indexes sealed in a row")

// RecordEnd records that place's sighted admission ended early, in its
// group, then in the end index of quantum q or a later one.
func RecordEnd(ctx context.Context, s Store, programID string, place, q int64) error {
	g, err := s.EndPlace(ctx, programID, place, q)
	switch {
	case errors.Is(err, ErrSealed):
		return nil // its window's expiry counts it
	case err != nil:
		return fmt.Errorf("record the end: %w", err)
	}
	k := int(place % EndShards)
	for range maxEndMoves {
		q := g.Ended[place]
		err := s.AddEnd(ctx, programID, q, k, place)
		if err == nil {
			return nil
		} else if !errors.Is(err, ErrSealed) {
			return fmt.Errorf("index the end: %w", err)
		}
		// Sealed: counted if an earlier attempt got in, else move on.
		places, err := s.SealEnds(ctx, programID, q, k)
		if err != nil {
			return fmt.Errorf("read the end index: %w", err)
		}
		if slices.Contains(places, place) {
			return nil
		}
		if g, err = s.MoveEnd(ctx, programID, place, q, q+1); err != nil {
			return fmt.Errorf("move the end: %w", err)
		}
	}
	return fmt.Errorf("end of place %d: %w", place, ErrEndsSealed)
}

// maxFoldsTracked is how many programs a Throttle keeps before forgetting.
const maxFoldsTracked = 1024

// Throttle spaces one instance's folds of each program; the zero Throttle
// is ready.
type Throttle struct {
	mu    sync.Mutex
	tried map[string]time.Time // the last fold tried, by program
}

// Try reports whether this instance may fold program id at now.
func (t *Throttle) Try(id string, now time.Time) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if at, ok := t.tried[id]; ok && !now.Before(at) && now.Sub(at) < FoldPeriod {
		return false
	}
	if t.tried == nil {
		t.tried = map[string]time.Time{}
	}
	if len(t.tried) >= maxFoldsTracked {
		for k, at := range t.tried {
			if now.Sub(at) >= FoldPeriod {
				delete(t.tried, k)
			}
		}
	}
	t.tried[id] = now
	return true
}
