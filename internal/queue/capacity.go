package queue

// A program's capacity: the sightings and ends its answers record, and
// the folds its requests run (package capacity).

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/example/waitingroom/internal/admission"
	"github.com/example/waitingroom/internal/api"
	"github.com/example/waitingroom/internal/capacity"
	"github.com/example/waitingroom/internal/clock"
	"github.com/example/waitingroom/internal/history"
)

// capacityStore is the store as a capacity.Store, when p is Followed.
func (s *Service) capacityStore(p admission.Program) (capacity.Store, bool) {
	if !p.Followed() {
		return nil, false
	}
	cs, ok := s.store.(capacity.Store)
	return cs, ok
}

// errNoShow reports a sighting refused: the place was counted a no-show.
var errNoShow = errors.New("queue: no-show")

// sight records that the holder of place, admitted in p, fetched their
// answer (errNoShow if sealed first), and when its group was sealed.
func (s *Service) sight(ctx context.Context, p admission.Program, place int64) (sealedAt time.Time, err error) {
	cs, ok := s.capacityStore(p)
	if !ok {
		return time.Time{}, nil
	}
	g, err := cs.Sight(ctx, p.ID, place)
	switch {
	case errors.Is(err, capacity.ErrSealed):
		return time.Time{}, errNoShow
	case err != nil:
		return time.Time{}, storeError("record the sighting", err)
	}
	at, _ := g.SealedAt(place)
	return at, nil
}

// recordEnd records that place's sighted admission ended early.
func (s *Service) recordEnd(ctx context.Context, p admission.Program, place int64) error {
	cs, ok := s.capacityStore(p)
	if !ok {
		return nil
	}
	err := capacity.RecordEnd(ctx, cs, p.ID, place, p.Capacity.EndsThrough+1)
	switch {
	case errors.Is(err, capacity.ErrEndsSealed):
		return &Error{Kind: KindUnavailable, Code: api.CodeBusy, Message: "The queue is busy; retry shortly.", Err: err}
	case err != nil:
		return storeError("record the end", err)
	}
	return nil
}

// maybeFold folds p, read fresh, at now when a fold is due and this
// instance's Throttle allows; a failure is logged only.
func (s *Service) maybeFold(ctx context.Context, p admission.Program, now time.Time) {
	cs, ok := s.capacityStore(p)
	if !ok || !p.FoldDue(now) || !s.folds.Try(p.ID, now) {
		return
	}
	// The fold's step, like an admin change, is stored within the write budget.
	fctx, cancel := clock.WithTimeout(ctx, s.clock, admission.AdminWriteBudget)
	defer cancel()
	fresh, err := s.store.GetProgram(fctx, p.ID)
	if err == nil && fresh.FoldDue(now) {
		var c capacity.Capacity
		if c, err = capacity.Fold(fctx, cs, fresh.Folding(now), now, s.changeDelay()); err == nil {
			fresh.Capacity = c
		}
	}
	if err != nil {
		s.log.WarnContext(ctx, "fold failed", "program", p.ID, "err", err)
		return
	}
	s.cache.Put(fresh, now)
	if err := s.giveOwed(ctx, fresh, now); err != nil {
		s.log.WarnContext(ctx, "extra admissions not given", "program", p.ID, "err", err)
	}
}

// giveOwed gives the no-shows of p, without a cap, back as extra
// admissions in one admin-like change; nothing while one is pending.
func (s *Service) giveOwed(ctx context.Context, p admission.Program, now time.Time) error {
	n := p.Capacity.Owed - p.ExtraGiven
	if p.MaxActiveUsers > 0 || n <= 0 || p.Pending(now) || !p.Opened(now) {
		return nil
	}
	settled := p.Settled()
	q := p.Rebased(now, settled.Rate, settled.Paused, n, s.changeDelay())
	q.ExtraGiven += n
	rec := history.Change{ID: NewTokenID(), At: history.NextAt(p.Changes, now), Actor: history.SystemActor, Action: history.ActionReadmit, Fields: history.Fields(map[string]int64{"count": n})}
	q = q.WithChange(rec.ID, rec.At)
	if err := s.beginChange(ctx, p, q, &rec, false); err != nil {
		return fmt.Errorf("give %d extra admissions: %w", n, err)
	}
	err := s.updateProgram(ctx, q, rec.ID, q.Pending(now))
	if errors.Is(err, ErrConflict) {
		return nil
	} else if err != nil {
		return fmt.Errorf("give %d extra admissions: %w", n, err)
	}
	s.endChange(ctx, p.ID, rec)
	s.cache.Put(q, now)
	return nil
}
