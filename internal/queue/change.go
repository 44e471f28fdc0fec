package queue

// The admin change path: one change stored exactly once, recorded in the
// history, within the admin deadline (docs/design.md).

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/example/waitingroom/internal/admission"
	"github.com/example/waitingroom/internal/api"
	"github.com/example/waitingroom/internal/catalog"
	"github.com/example/waitingroom/internal/clock"
	"github.com/example/waitingroom/internal/history"
	"github.com/example/waitingroom/internal/pace"
)

// Bounds of an admin change.
const (
	adminDeadline      = 3 * time.Second        // the whole request, waits and retries included
	adminWriteReserve  = 500 * time.Millisecond // least time left before the deadline to start a write
	maxWakeSpread      = 300 * time.Millisecond // spreads requests that waited for the same pending change
	maxAdminTrials     = 16                     // optimistic retries
	maxConflictBackoff = 20 * time.Millisecond  // random pause after a conflict
	moveDrainAttempts  = 3                      // tries of a failing MoveDrain
	moveDrainBackoff   = 50 * time.Millisecond  // pause before the second try, doubling after
)

// ChangeDelay is how long after it is made an admin change takes effect
// with a program cache of ttl: 0 without a cache, else ttl plus the write budget.
func ChangeDelay(ttl time.Duration) time.Duration {
	if ttl <= 0 {
		return 0
	}
	return ttl + admission.AdminWriteBudget
}

// changeDelay is ChangeDelay for the service's program cache.
func (s *Service) changeDelay() time.Duration { return ChangeDelay(s.cache.TTL()) }

// changeProgram stores edit(program, now) as one admin change recorded as
// rec, within adminDeadline (BUSY: not made; STORE_UNAVAILABLE: maybe). A
// missing program is created with create, or PROGRAM_NOT_FOUND if nil.
func (s *Service) changeProgram(ctx context.Context, op, id string, rec history.Change, create func(now time.Time) (admission.Program, error), edit func(p admission.Program, now time.Time) (admission.Program, error)) (_ admission.Program, now time.Time, created bool, _ error) {
	c := &adminChange{s: s, op: op, id: id, rec: rec, create: create, edit: edit, deadline: s.clock.Now().Add(adminDeadline)}
	c.rec.Actor, c.rec.ID = history.ActorOf(ctx), NewTokenID()
	ctx, cancel := clock.WithTimeout(ctx, s.clock, adminDeadline) // the same bound for the store's calls
	defer cancel()
	for range maxAdminTrials {
		p, found, err := c.read(ctx)
		now = s.clock.Now()
		if err != nil {
			return admission.Program{}, now, false, err
		}
		if p.Pending(now) {
			if err := s.awaitPending(ctx, p, now, c.deadline.Add(-c.room())); err != nil {
				return admission.Program{}, now, false, err
			}
			continue
		}
		if !c.timeLeft(ctx) {
			return admission.Program{}, now, false, errBusy(time.Second)
		}
		start := time.Now()
		if p, err = c.write(ctx, p, found, now); err == nil {
			return p, now, !found, nil
		}
		c.slowest = max(c.slowest, time.Since(start)/2) // a write and a read
		if e := (*Error)(nil); errors.As(err, &e) {
			return admission.Program{}, now, false, err
		}
		if !errors.Is(err, ErrConflict) {
			return admission.Program{}, now, false, storeError(op, err)
		}
		if err := s.clock.Sleep(ctx, s.jitter(maxConflictBackoff)); err != nil {
			return admission.Program{}, now, false, errBusy(time.Second)
		}
	}
	return admission.Program{}, now, false, errBusy(time.Second)
}

// adminChange is one admin request's change in the making.
type adminChange struct {
	s        *Service
	op, id   string
	rec      history.Change
	create   func(now time.Time) (admission.Program, error)
	edit     func(p admission.Program, now time.Time) (admission.Program, error)
	deadline time.Time
	slowest  time.Duration // the slowest store answer so far
}

// room is the time a write needs before the deadline.
func (c *adminChange) room() time.Duration { return adminWriteReserve + 2*c.slowest }

// timeLeft reports whether a write may still start, on both clocks.
func (c *adminChange) timeLeft(ctx context.Context) bool {
	if d, ok := ctx.Deadline(); ok && time.Until(d) < c.room() {
		return false
	}
	return !c.s.clock.Now().Add(c.room()).After(c.deadline)
}

// read reads the program, found false when it is to be created.
func (c *adminChange) read(ctx context.Context) (p admission.Program, found bool, err error) {
	start := time.Now()
	p, err = c.s.store.GetProgram(ctx, c.id)
	c.slowest = max(c.slowest, time.Since(start))
	switch {
	case err == nil:
		return p, true, nil
	case errors.Is(err, ErrNotFound) && c.create != nil:
		return admission.Program{}, false, nil
	case errors.Is(err, ErrNotFound):
		return admission.Program{}, false, errProgramNotFound
	case !c.timeLeft(ctx): // the read ran into the deadline: nothing written
		return admission.Program{}, false, errBusy(time.Second)
	}
	return admission.Program{}, false, storeError(c.op, err)
}

// write makes the change over p read at now, or the creation, recorded in
// the history: an *Error to answer, ErrConflict to try again.
func (c *adminChange) write(ctx context.Context, p admission.Program, found bool, now time.Time) (admission.Program, error) {
	s, read, rec := c.s, p, c.rec
	var err error
	if !found {
		p, err = c.create(now)
		rec.Action = history.ActionCreate
	} else {
		p, err = c.edit(p, now)
	}
	if err != nil {
		return admission.Program{}, err
	}
	rec.At = history.NextAt(read.Changes, now)
	p = p.WithChange(rec.ID, rec.At)
	if !found {
		if err = s.beginChange(ctx, admission.Program{}, p, &rec, true); err == nil {
			err = s.store.CreateProgram(ctx, p)
			if errors.Is(err, ErrDeleted) {
				return admission.Program{}, Errorf(KindConflict, api.CodeProgramDeleted, "A program with this id was deleted less than %d days ago; choose another id.", int(catalog.DeletedRetention.Hours()/24))
			}
			err = s.checkOwnWrite(ctx, p, rec.ID, err)
		}
	} else if err = s.beginChange(ctx, read, p, &rec, true); err != nil {
		return admission.Program{}, storeError(c.op, err)
	} else {
		// Arming the shuffle keeps the condition on the tickets issued.
		err = s.updateProgram(ctx, p, rec.ID, p.Pending(now) && p.Shuffle == read.Shuffle)
	}
	if err != nil {
		return admission.Program{}, err
	}
	s.endChange(ctx, c.id, rec)
	s.cache.Put(p, now)
	return p, nil
}

// beginChange fills in rec, the change writing p over read (zero for a
// creation), and records it (history.Begin), listing p when list is set.
func (s *Service) beginChange(ctx context.Context, read, p admission.Program, rec *history.Change, list bool) error {
	rec.Version, rec.EffectiveAt, rec.Committed = p.Version, time.Time{}, false
	if p.Pending(rec.At) {
		rec.EffectiveAt = pace.FromUnixMs(p.Next.AnchorMs)
	}
	if !list {
		return history.Begin(ctx, s.store, p.ID, read.Changes, *rec)
	}
	return history.Begin(ctx, s.store, p.ID, read.Changes, *rec, func() error {
		if err := s.store.IndexProgram(ctx, p.ID); err != nil {
			return fmt.Errorf("list the program: %w", err)
		}
		return nil
	})
}

// endChange logs rec, once written; the next change commits it.
func (s *Service) endChange(ctx context.Context, programID string, rec history.Change) {
	s.log.LogAttrs(ctx, slog.LevelInfo, "admin change",
		slog.String("programId", programID), slog.String("changeId", rec.ID), slog.String("action", rec.Action),
		slog.String("actor", rec.Actor), slog.Int64("version", rec.Version), slog.String("fields", string(rec.Fields)))
}

// awaitPending sleeps until p's pending change has taken effect, plus a
// random spread; BUSY if that is past latest.
func (s *Service) awaitPending(ctx context.Context, p admission.Program, now, latest time.Time) error {
	effective := pace.FromUnixMs(p.Next.AnchorMs)
	if effective.After(latest) {
		return errBusy(effective.Sub(now))
	}
	wake := effective.Add(s.jitter(maxWakeSpread))
	if wake.After(latest) {
		wake = effective
	}
	if err := s.clock.Sleep(ctx, wake.Sub(now)); err != nil {
		return errBusy(time.Second)
	}
	return nil
}

// updateProgram stores the admin change p within the write budget; a
// scheduled one on a ScheduleStore on the version alone (no starving).
func (s *Service) updateProgram(ctx context.Context, p admission.Program, change string, scheduled bool) error {
	wctx, cancel := clock.WithTimeout(ctx, s.clock, admission.AdminWriteBudget)
	defer cancel()
	ss, ok := s.store.(ScheduleStore)
	if !ok || !scheduled {
		return s.checkOwnWrite(ctx, p, change, s.store.UpdateProgram(wctx, p, p.Issued))
	}
	issued, err := ss.UpdateScheduled(wctx, p)
	if err != nil || issued == p.Issued {
		return s.checkOwnWrite(ctx, p, change, err)
	}
	// The tickets issued meanwhile counted the old time per ticket.
	return s.moveDrain(ctx, ss, p, issued)
}

// moveDrain moves the stored change p's drain instant for issued tickets,
// retrying the idempotent MoveDrain; all tries failed is logged and an error.
func (s *Service) moveDrain(ctx context.Context, ss ScheduleStore, p admission.Program, issued int64) error {
	var err error
	for attempt := range moveDrainAttempts {
		if attempt > 0 && s.clock.Sleep(ctx, moveDrainBackoff<<(attempt-1)) != nil {
			break
		}
		if err = ss.MoveDrain(ctx, p, issued); err == nil {
			return nil
		}
	}
	s.log.LogAttrs(ctx, slog.LevelError, "admin change stored, its drain instant not moved",
		slog.String("programId", p.ID), slog.Int64("version", p.Version), slog.Int64("ticketsEarly", issued-p.Issued), slog.String("error", err.Error()))
	return fmt.Errorf("the change is stored, its drain instant not moved: %w", err)
}

// checkOwnWrite sorts out a conflict that may be this write applied by an
// attempt whose answer was lost: nil if the stored program records change,
// no longer a conflict if it cannot tell (never applied twice).
func (s *Service) checkOwnWrite(ctx context.Context, p admission.Program, change string, err error) error {
	if !errors.Is(err, ErrConflict) {
		return err
	}
	stored, rerr := s.store.GetProgram(ctx, p.ID)
	if rerr != nil {
		return fmt.Errorf("a conflict, and reading whether the write was applied failed: %w", rerr)
	}
	switch applied, known := history.Applied(stored.Changes, change, p.Version, stored.Version); {
	case applied:
		return nil
	case !known:
		return fmt.Errorf("a conflict, and %d later changes hide whether the write was applied", history.MaxRecent)
	}
	return err
}

// errBusy is BUSY: an admin change not made within adminDeadline.
func errBusy(retry time.Duration) error {
	e := Errorf(KindUnavailable, api.CodeBusy, "The program is being changed concurrently; retry.")
	e.RetryAfter = max(retry, time.Millisecond)
	return e
}
