package queue

// The admin change path: one change stored exactly once, recorded in the
// history, within the admin deadline (docs/design.md, "Segments and
// scheduled changes" and "The operator's records").

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/example/waitingroom/internal/api"
)

// Bounds of an admin change; see docs/design.md, "Segments and scheduled changes".
const (
	// adminDeadline bounds an admin request, waits for a pending change
	// and optimistic retries included.
	adminDeadline = 3 * time.Second
	// adminWriteReserve is the least time before the deadline in which an
	// admin request still starts a write (more when the store is slow).
	adminWriteReserve = 500 * time.Millisecond
	// maxWakeSpread spreads the admin requests that waited for the same
	// pending change.
	maxWakeSpread = 300 * time.Millisecond
	// maxAdminTrials bounds an admin request's optimistic retries.
	maxAdminTrials = 16
	// maxConflictBackoff bounds the random pause after a conflict.
	maxConflictBackoff = 20 * time.Millisecond
	// moveDrainAttempts bounds the tries of a failing MoveDrain;
	// moveDrainBackoff is the pause before the second, doubling after.
	moveDrainAttempts = 3
	moveDrainBackoff  = 50 * time.Millisecond
)

// AdminWriteBudget bounds how long an admin change may take to be stored;
// the change is scheduled that much later than the cache TTL.
const AdminWriteBudget = time.Second

// changeDelay is how long after an admin change it takes effect: nothing
// without a program cache, the cache TTL plus the write budget with one.
func (s *Service) changeDelay() time.Duration {
	if s.cache.ttl <= 0 {
		return 0
	}
	return s.cache.ttl + AdminWriteBudget
}

// changeProgram stores edit(program, now) as one admin change tagged with a
// fresh change id and recorded in the history as rec (its action and
// fields), retrying on conflicts and first waiting for a pending change to
// take effect, within adminDeadline. BUSY means the change was not made;
// STORE_UNAVAILABLE that it may have been. A missing program is created
// with create (action ActionCreate), or is PROGRAM_NOT_FOUND if create is nil.
func (s *Service) changeProgram(ctx context.Context, op, id string, rec Change, create func(now time.Time) (Program, error), edit func(p Program, now time.Time) (Program, error)) (_ Program, now time.Time, created bool, _ error) {
	deadline := s.clock.Now().Add(adminDeadline)
	rec.Actor = ActorOf(ctx)
	ctx, cancel := context.WithTimeout(ctx, adminDeadline) // the same bound for the store's calls
	defer cancel()
	// room is the time a write needs before the deadline: a reserve, more
	// if the store has answered slowly so far.
	var slowest time.Duration
	room := func() time.Duration { return adminWriteReserve + 2*slowest }
	// timeLeft reports whether a write may still start, on the service's
	// clock and in the request's real time.
	timeLeft := func() bool {
		d, _ := ctx.Deadline()
		return !s.clock.Now().Add(room()).After(deadline) && time.Until(d) >= room()
	}
	change := NewTokenID()
	rec.ID = change
	action := rec.Action
	for range maxAdminTrials {
		start := time.Now()
		p, err := s.store.GetProgram(ctx, id)
		slowest = max(slowest, time.Since(start))
		now = s.clock.Now()
		switch {
		case err == nil || errors.Is(err, ErrNotFound) && create != nil:
		case errors.Is(err, ErrNotFound):
			return Program{}, now, false, errProgramNotFound()
		case !timeLeft(): // the read ran into the deadline: nothing written
			return Program{}, now, false, errBusy(time.Second)
		default:
			return Program{}, now, false, storeError(op, err)
		}
		if p.Pending(now) {
			// A change is scheduled only once the previous one has taken
			// effect (every instance must know it before it acts).
			if err := s.awaitPending(ctx, p, now, deadline.Add(-room())); err != nil {
				return Program{}, now, false, err
			}
			continue
		}
		if !timeLeft() {
			return Program{}, now, false, errBusy(time.Second)
		}
		start = time.Now()
		if err != nil { // not found: create it
			if p, err = create(now); err != nil {
				return Program{}, now, false, err
			}
			rec.At, rec.Action = changeAt(Program{}, now), ActionCreate
			p = p.withChange(change, rec.At)
			if err = s.writeCreation(ctx, p, &rec); err == nil {
				s.endChange(ctx, id, rec)
				s.cache.put(p, now)
				return p, now, true, nil
			}
		} else {
			read := p
			if p, err = edit(p, now); err != nil {
				return Program{}, now, false, err
			}
			rec.At, rec.Action = changeAt(read, now), action
			p = p.withChange(change, rec.At)
			// A change that makes the shuffle depends on nobody having
			// entered: it keeps the condition on the tickets issued.
			scheduled := p.Pending(now) && p.Shuffle == read.Shuffle
			if err = s.beginEdit(ctx, read, p, &rec); err != nil {
				return Program{}, now, false, storeError(op, err)
			}
			if err = s.updateProgram(ctx, p, change, scheduled); err == nil {
				s.endChange(ctx, id, rec)
				s.cache.put(p, now)
				return p, now, false, nil
			}
		}
		slowest = max(slowest, time.Since(start)/2) // a write and a read
		if e := (*Error)(nil); errors.As(err, &e) {
			return Program{}, now, false, err
		}
		if !errors.Is(err, ErrConflict) {
			return Program{}, now, false, storeError(op, err)
		}
		if err := s.clock.Sleep(ctx, s.jitter(maxConflictBackoff)); err != nil {
			return Program{}, now, false, errBusy(time.Second)
		}
	}
	return Program{}, now, false, errBusy(time.Second)
}

// awaitPending sleeps until p's pending change has taken effect, plus a
// random spread so that those who waited for it wake apart (one makes the
// next change, the others see it); BUSY if that is past latest.
func (s *Service) awaitPending(ctx context.Context, p Program, now, latest time.Time) error {
	effective := FromUnixMs(p.Next.AnchorMs)
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

// beginEdit lists the program p (listing the programs made before the
// list) and begins its change rec over read.
func (s *Service) beginEdit(ctx context.Context, read, p Program, rec *Change) error {
	return s.beginChangeListed(ctx, read, p, rec, true)
}

// writeCreation lists and records the new program p made by admin change
// rec, then stores it. A conflict is another creation, or this one's own
// write retried after its answer was lost: then the stored program records
// the change.
func (s *Service) writeCreation(ctx context.Context, p Program, rec *Change) error {
	if err := s.beginChangeListed(ctx, Program{}, p, rec, true); err != nil {
		return err
	}
	err := s.store.CreateProgram(ctx, p)
	if errors.Is(err, ErrDeleted) {
		return Errorf(KindConflict, api.CodeProgramDeleted, "A program with this id was deleted less than %d days ago; choose another id.", int(DeletedRetention.Hours()/24))
	}
	return s.checkOwnWrite(ctx, p, rec.ID, err)
}

// updateProgram stores the admin change p within the write budget (the
// change is scheduled for a write that lands within it). A scheduled
// change goes to a ScheduleStore on the condition of the version alone, so
// that a flood of tickets, each moving Issued, cannot starve it.
func (s *Service) updateProgram(ctx context.Context, p Program, change string, scheduled bool) error {
	wctx, cancel := context.WithTimeout(ctx, AdminWriteBudget)
	defer cancel()
	ss, ok := s.store.(ScheduleStore)
	if !ok || !scheduled {
		return s.checkOwnWrite(ctx, p, change, s.store.UpdateProgram(wctx, p, p.Issued))
	}
	issued, err := ss.UpdateScheduled(wctx, p)
	if err != nil {
		// Not applied, or applied and superseded since (the later change
		// set the drain instant afresh).
		return s.checkOwnWrite(ctx, p, change, err)
	}
	if issued == p.Issued {
		return nil
	}
	// The tickets issued meanwhile counted the old time per ticket. The
	// drain instant matters once the change takes effect, a cache TTL
	// plus the write budget from now; till then it is moved within the
	// admin deadline.
	return s.moveDrain(ctx, ss, p, issued)
}

// moveDrain moves the drain instant of the stored change p for issued
// tickets, trying again after a failure (MoveDrain is idempotent) while
// ctx allows. If every try fails, it logs the instant left early and
// answers a store error, which no client repeats for an admission.
func (s *Service) moveDrain(ctx context.Context, ss ScheduleStore, p Program, issued int64) error {
	var err error
	for attempt := range moveDrainAttempts {
		if attempt > 0 && s.clock.Sleep(ctx, moveDrainBackoff<<(attempt-1)) != nil {
			break
		}
		if err = ss.MoveDrain(ctx, p, issued); err == nil {
			return nil
		}
	}
	s.logger().LogAttrs(ctx, slog.LevelError, "admin change stored, its drain instant not moved",
		slog.String("programId", p.ID), slog.Int64("version", p.Version), slog.Int64("ticketsEarly", issued-p.Issued), slog.String("error", err.Error()))
	return fmt.Errorf("the change is stored, its drain instant not moved: %w", err)
}

// checkOwnWrite sorts out a write's conflict: it may be the store's retry
// of this very write, applied by an earlier attempt whose answer was lost.
// If the stored program records change, the write succeeded (nil); if it
// cannot tell, the error is no longer a conflict, so that the change is
// never applied twice.
func (s *Service) checkOwnWrite(ctx context.Context, p Program, change string, err error) error {
	if !errors.Is(err, ErrConflict) {
		return err
	}
	stored, rerr := s.store.GetProgram(ctx, p.ID)
	if rerr != nil {
		return fmt.Errorf("a conflict, and reading whether the write was applied failed: %w", rerr)
	}
	switch applied, known := stored.changeApplied(change, p.Version); {
	case applied:
		return nil
	case !known:
		// So many changes since that ours, if applied, has left the list:
		// neither retry (it could apply twice) nor call it undone.
		return fmt.Errorf("a conflict, and %d later changes hide whether the write was applied", maxRecentChanges)
	}
	return err
}

// errBusy is the answer to an admin change that could not be made within
// adminDeadline; retry after retry.
func errBusy(retry time.Duration) error {
	e := Errorf(KindUnavailable, api.CodeBusy, "The program is being changed concurrently; retry.")
	e.RetryAfter = max(retry, time.Millisecond)
	return e
}
