package queue

// A program's capacity, as package capacity frees it: the ceiling on its
// serving counter, the sightings and ends its answers record, and the
// folds its requests run (docs/design.md, "Capacity").

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/example/waitingroom/internal/api"
	"github.com/example/waitingroom/internal/capacity"
	"github.com/example/waitingroom/internal/clock"
	"github.com/example/waitingroom/internal/history"
	"github.com/example/waitingroom/internal/pace"
)

// ceiling is p's ceiling: the cap, the slots its folds freed and those its
// bypass passes hold.
func (p Program) ceiling() capacity.Ceiling {
	return capacity.Ceiling{Cap: p.MaxActiveUsers, From: p.CapFrom, RaiseAtMs: p.CapRaiseAtMs, Capacity: p.Capacity, Reserved: p.Reserved}
}

// counterAt is the serving counter at Unix ms, not capped by the tickets
// issued: the segments' counter, held at the ceiling of a capped program.
func (p Program) counterAt(ms int64) int64 {
	c := p.segmentAt(ms).Counter(ms)
	if l, ok := p.ceiling().At(ms); ok {
		c = min(c, l)
	}
	return c
}

// roundMs is the least time, in ms, between a slot taken and its reuse by
// the next holder, seen with notice: a fold's period without a cache;
// with one, the change delay, at least the notice plus the write budget.
func roundMs(notice time.Duration) int64 {
	if notice <= 0 {
		return capacity.FoldPeriod.Milliseconds()
	}
	return (notice + AdminWriteBudget).Milliseconds()
}

// heldAt reports whether the ceiling holds the serving counter below the
// segments' at Unix ms. A re-anchor of the segments then changes nothing
// below the ceiling, so a read may outlive the drain instant: a reader
// still on the old segments can admit a ticket issued since only within
// the ceiling, which never lets more people in than the cap.
func (p Program) heldAt(ms int64) bool {
	l, ok := p.ceiling().At(ms)
	return ok && l < p.segmentAt(ms).Counter(ms)
}

// Followed reports whether the folds follow p's admissions: it has a cap
// or no-show handling.
func (p Program) Followed() bool { return p.MaxActiveUsers > 0 || p.NoShowSeconds > 0 }

// NoShowAfter is how long someone admitted has to fetch their pass before
// they are a no-show: NoShowSeconds, or with a cap and none, the window.
func (p Program) NoShowAfter() time.Duration {
	if p.NoShowSeconds > 0 {
		return time.Duration(p.NoShowSeconds) * time.Second
	}
	return p.Window()
}

// SlotFreedAfter is how long after an admission the folds count its
// capped slot free when the person came and the site did not end their
// session: the window, then the pass verifiers' margin.
func (p Program) SlotFreedAfter() time.Duration { return p.Window() + capacity.ExpiryMargin }

// PollToShow is the longest that someone waiting on a followed program is
// told to wait between polls, when the soonest a change could admit them
// is notice from now: that, then half the time to show, at least a second.
func (p Program) PollToShow(notice time.Duration) time.Duration {
	return max(notice+p.NoShowAfter()/2, time.Second)
}

// FoldDue reports whether a request at now, holding p, should fold it.
func (p Program) FoldDue(now time.Time) bool {
	return p.Followed() && pace.UnixMs(now)-p.Capacity.FoldedAtMs >= capacity.FoldPeriod.Milliseconds()
}

// folding is p as a fold at now reads it.
func (p Program) folding(now time.Time) capacity.Program {
	return capacity.Program{
		ID: p.ID, Capacity: p.Capacity, Capped: p.MaxActiveUsers > 0,
		NoShowAfter: p.NoShowAfter(), FreedAfter: p.SlotFreedAfter(),
		Rate: p.Settled().Rate, Serving: p.Serving(now),
	}
}

// capacityStore is the service's store as a capacity.Store, when p's
// admissions are followed (a cap or no-show handling) and it is one.
func (s *Service) capacityStore(p Program) (capacity.Store, bool) {
	if !p.Followed() {
		return nil, false
	}
	cs, ok := s.store.(capacity.Store)
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
	case errors.Is(err, capacity.ErrSealed):
		return time.Time{}, errNoShow
	case err != nil:
		return time.Time{}, storeError("record the sighting", err)
	}
	at, _ := g.SealedAt(place)
	return at, nil
}

// recordEnd records that the admission of place, sighted, ended early, so
// that the next fold frees its slot (capacity.RecordEnd).
func (s *Service) recordEnd(ctx context.Context, p Program, place int64) error {
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

// maybeFold folds p at now when a fold is due and this instance has not
// tried one within capacity.FoldPeriod, from a fresh read so that the instances
// that cached p do not all fold. A fold that fails is left to the next
// request: it is logged, not reported to the person whose request ran it.
func (s *Service) maybeFold(ctx context.Context, p Program, now time.Time) {
	cs, ok := s.capacityStore(p)
	if !ok || !p.FoldDue(now) || !s.folds.Try(p.ID, now) {
		return
	}
	// The fold's step takes effect a change delay after now: like an admin
	// change, it must be stored within the write budget.
	fctx, cancel := clock.WithTimeout(ctx, s.clock, AdminWriteBudget)
	defer cancel()
	fresh, err := s.store.GetProgram(fctx, p.ID)
	if err == nil && fresh.FoldDue(now) {
		var c capacity.Capacity
		if c, err = capacity.Fold(fctx, cs, fresh.folding(now), now, s.changeDelay()); err == nil {
			fresh.Capacity = c
		}
	}
	if err != nil {
		s.log.WarnContext(ctx, "fold failed", "program", p.ID, "err", err)
		return
	}
	s.cache.put(fresh, now)
	if err := s.giveOwed(ctx, fresh, now); err != nil {
		s.log.WarnContext(ctx, "extra admissions not given", "program", p.ID, "err", err)
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
	rec := history.Change{ID: NewTokenID(), At: history.NextAt(p.Changes, now), Actor: history.SystemActor, Action: history.ActionReadmit, Fields: history.Fields(map[string]int64{"count": n})}
	q = q.withChange(rec.ID, rec.At)
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
	s.cache.put(q, now)
	return nil
}
