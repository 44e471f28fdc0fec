package queue

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/example/waitingroom/internal/api"
)

// maxEndMoves bounds how many end indexes an end tries before it reports
// the store busy: each fold seals one, and a cached cursor is at most a
// cache TTL behind.
const maxEndMoves = 8

// capacityStore is the service's store as a CapacityStore, when p's
// admissions are followed (a cap or no-show handling) and it is one.
func (s *Service) capacityStore(p Program) (CapacityStore, bool) {
	if !p.capacityManaged() {
		return nil, false
	}
	cs, ok := s.store.(CapacityStore)
	return cs, ok
}

// errNoShow reports a sighting refused: the place was counted a no-show.
var errNoShow = errors.New("queue: no-show")

// sight records that the holder of place, admitted in p, fetched their
// answer, before their pass is signed; errNoShow if the place was sealed
// as a no-show first. The returned instant, when not zero, is when the
// place's group was sealed: a sighting accepted after it (a retry) keeps
// a window that ends by that instant plus the window.
func (s *Service) sight(ctx context.Context, p Program, place int64) (sealedAt time.Time, err error) {
	cs, ok := s.capacityStore(p)
	if !ok {
		return time.Time{}, nil
	}
	g, err := cs.Sight(ctx, p.ID, place)
	switch {
	case errors.Is(err, ErrSealed):
		return time.Time{}, errNoShow
	case err != nil:
		return time.Time{}, storeError("record the sighting", err)
	}
	at, _ := g.SealedAt(place)
	return at, nil
}

// recordEnd records that the admission of place, sighted, ended early, so
// that the next fold frees its slot: in its group, then in the end index
// the fold has not sealed yet. A group already expired frees the slot
// itself, and an end recorded before (a retry) is found again.
func (s *Service) recordEnd(ctx context.Context, p Program, place int64) error {
	cs, ok := s.capacityStore(p)
	if !ok {
		return nil
	}
	g, err := cs.EndPlace(ctx, p.ID, place, p.Capacity.EndsThrough+1)
	switch {
	case errors.Is(err, ErrSealed):
		return nil // its window's expiry counts it
	case err != nil:
		return storeError("record the end", err)
	}
	k := int(place % EndShards)
	for range maxEndMoves {
		q := g.Ended[place]
		err := cs.AddEnd(ctx, p.ID, q, k, place)
		if err == nil {
			return nil
		} else if !errors.Is(err, ErrSealed) {
			return storeError("index the end", err)
		}
		// Sealed: counted if an earlier attempt got in first, else on to
		// the next index.
		places, err := cs.SealEnds(ctx, p.ID, q, k)
		if err != nil {
			return storeError("read the end index", err)
		}
		for _, pl := range places {
			if pl == place {
				return nil
			}
		}
		if g, err = cs.MoveEnd(ctx, p.ID, place, q, q+1); err != nil {
			return storeError("move the end", err)
		}
	}
	return &Error{Kind: KindUnavailable, Code: api.CodeBusy, Message: "The queue is busy; retry shortly.", Err: fmt.Errorf("end of place %d: %d indexes sealed in a row", place, maxEndMoves)}
}

// maybeFold folds p at now when a fold is due and this instance has not
// tried one within foldEvery, from a fresh read so that the instances
// that cached p do not all fold. A fold that fails is left to the next
// request: it is logged, not reported to the person whose request ran it.
func (s *Service) maybeFold(ctx context.Context, p Program, now time.Time) {
	cs, ok := s.capacityStore(p)
	if !ok || !p.FoldDue(now) || !s.cache.tryFold(p.ID, now) {
		return
	}
	// The fold's step takes effect a change delay after now: like an admin
	// change, it must be stored within the write budget.
	fctx, cancel := context.WithTimeout(ctx, AdminWriteBudget)
	defer cancel()
	fresh, err := s.store.GetProgram(fctx, p.ID)
	if err == nil && fresh.FoldDue(now) {
		var c Capacity
		if c, err = Fold(fctx, cs, fresh, now, s.changeDelay()); err == nil {
			fresh.Capacity = c
		}
	}
	if err != nil {
		s.logger().WarnContext(ctx, "fold failed", "program", p.ID, "err", err)
		return
	}
	s.cache.put(fresh, now)
	if err := s.giveOwed(ctx, fresh, now); err != nil {
		s.logger().WarnContext(ctx, "extra admissions not given", "program", p.ID, "err", err)
	}
}

// giveOwed gives the no-shows of p, a program without a cap, back to the
// next people in line as extra admissions: one admin-like change taking
// effect a change delay after now, recording them as given in the same
// write. Nothing while a change is pending (the next fold tries again),
// and on a conflict (someone else changed p first).
func (s *Service) giveOwed(ctx context.Context, p Program, now time.Time) error {
	n := p.Capacity.Owed - p.ExtraGiven
	if p.MaxActiveUsers > 0 || n <= 0 || p.Pending(now) || !p.Opened(now) {
		return nil
	}
	settled := p.Settled()
	q := p.Rebased(now, settled.Rate, settled.Paused, n, s.changeDelay())
	q.ExtraGiven += n
	rec := Change{ID: NewTokenID(), At: changeAt(p, now), Actor: SystemActor, Action: ActionReadmit, Fields: fieldsOf(map[string]int64{"count": n})}
	q = q.withChange(rec.ID, rec.At)
	if err := s.beginChange(ctx, p, q, &rec); err != nil {
		return fmt.Errorf("give %d extra admissions: %w", n, err)
	}
	err := s.updateProgram(ctx, q, rec.ID, q.Pending(now))
	if errors.Is(err, ErrConflict) {
		return nil
	} else if err != nil {
		return fmt.Errorf("give %d extra admissions: %w", n, err)
	}
	s.endChange(ctx, p.ID, rec)
	s.cache.put(q, now)
	return nil
}

// maxFoldsTracked is how many programs' fold attempts an instance keeps
// before it forgets those older than foldEvery.
const maxFoldsTracked = 1024

// tryFold reports whether this instance may try to fold program id at
// now: once per foldEvery at most.
func (c *programCache) tryFold(id string, now time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t, ok := c.folds[id]; ok && !now.Before(t) && now.Sub(t) < foldEvery {
		return false
	}
	if c.folds == nil {
		c.folds = map[string]time.Time{}
	}
	if len(c.folds) >= maxFoldsTracked {
		for k, t := range c.folds {
			if now.Sub(t) >= foldEvery {
				delete(c.folds, k)
			}
		}
	}
	c.folds[id] = now
	return true
}
