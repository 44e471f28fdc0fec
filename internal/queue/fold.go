package queue

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Fold parameters (docs/design.md, "Capacity").
const (
	// EndShards is how many items each end index is spread over.
	EndShards = 4
	// foldEvery is the least time between two folds of a program: with
	// the change delay (2 s at the default cache TTL), a slot freed is
	// refilled within 2.25 s (more when more slots free at once than the
	// rate refills in a fold's period).
	foldEvery = 250 * time.Millisecond
	// maxGroupsPerFold bounds the groups one fold seals for no-shows.
	maxGroupsPerFold = 16
	// expiryMargin is added to a window before its slot is freed: the
	// pass verifiers' leeway (passverify.DefaultLeeway) and clock skew.
	expiryMargin = time.Minute
	// noShowMargin is added to the no-show time before a place is sealed:
	// none is needed, the seal decides, not a clock.
	noShowMargin = 0
	// keptSteps bounds the ceiling's steps already in effect that a fold
	// keeps (the older ones become Level).
	keptSteps = 1
)

// capacityManaged reports whether p's admissions are followed by the folds:
// it has a cap, or no-show handling.
func (p Program) capacityManaged() bool { return p.MaxActiveUsers > 0 || p.NoShowSeconds > 0 }

// noShowAfter is how long an admitted person has to fetch their pass: the
// NoShowSeconds, or with a cap and none, the admission window.
func (p Program) noShowAfter() time.Duration {
	if p.NoShowSeconds > 0 {
		return time.Duration(p.NoShowSeconds) * time.Second
	}
	return p.window()
}

// window is p's admission window, or the default.
func (p Program) window() time.Duration {
	if p.AdmissionWindow > 0 {
		return p.AdmissionWindow
	}
	return DefaultAdmissionWindow
}

// FoldDue reports whether a request at now, holding p, should fold it.
func (p Program) FoldDue(now time.Time) bool {
	return p.capacityManaged() && UnixMs(now)-p.Capacity.FoldedAtMs >= foldEvery.Milliseconds()
}

// Fold counts, from records it seals first, the slots p's admissions freed
// since the last fold (ended early, no-shows, windows over), and stores the
// ceiling's next step δ after now, δ being the admin change delay; a fold
// made meanwhile by another request wins, and this one returns nil.
func Fold(ctx context.Context, cs CapacityStore, p Program, now time.Time, delay time.Duration) (Capacity, error) {
	c, next := p.Capacity, p.Capacity
	nowMs := UnixMs(now)
	next.FoldedAtMs = nowMs

	// Ends: the index after the last one counted.
	ended := int64(0)
	for k := range EndShards {
		places, err := cs.SealEnds(ctx, p.ID, c.EndsThrough+1, k)
		if err != nil {
			return c, fmt.Errorf("seal ends %d/%d: %w", c.EndsThrough+1, k, err)
		}
		ended += int64(len(places))
	}
	next.EndsThrough++

	// No-shows: places admitted by the latest mark older than the time to
	// show, not sighted.
	noShows := int64(0)
	m, err := cs.MarkBefore(ctx, p.ID, UnixMs(now.Add(-p.noShowAfter()-noShowMargin)))
	switch {
	case errors.Is(err, ErrNotFound):
	case err != nil:
		return c, fmt.Errorf("read mark: %w", err)
	default:
		through := min(m.Counter, c.NoShowThrough+maxGroupsPerFold*GroupSize)
		for g := GroupOf(c.NoShowThrough + 1); c.NoShowThrough < through && g <= GroupOf(through); g++ {
			grp, err := cs.SealSightings(ctx, p.ID, g, min(through, (g+1)*GroupSize), now)
			if err != nil {
				return c, fmt.Errorf("seal group %d: %w", g, err)
			}
			from, to := max(c.NoShowThrough+1, g*GroupSize+1), min(through, (g+1)*GroupSize)
			seen := int64(0)
			for _, s := range grp.Sighted {
				if s >= from && s <= to {
					seen++
				}
			}
			noShows += to - from + 1 - seen
		}
		next.NoShowThrough = max(c.NoShowThrough, through)
	}

	// Windows over: the places a mark older than the window (and the
	// margin) saw sealed were all sighted by then, if ever.
	expired := int64(0)
	m, err = cs.MarkBefore(ctx, p.ID, UnixMs(now.Add(-p.window()-expiryMargin)))
	switch {
	case errors.Is(err, ErrNotFound):
	case err != nil:
		return c, fmt.Errorf("read mark: %w", err)
	default:
		through := min(m.NoShowThrough, next.NoShowThrough, c.ExpiredThrough+maxGroupsPerFold*GroupSize)
		for g := GroupOf(c.ExpiredThrough + 1); c.ExpiredThrough < through && g <= GroupOf(through); g++ {
			from, to := max(c.ExpiredThrough+1, g*GroupSize+1), min(through, (g+1)*GroupSize)
			grp, err := cs.ExpireGroup(ctx, p.ID, g, to)
			if err != nil {
				return c, fmt.Errorf("expire group %d: %w", g, err)
			}
			for _, s := range grp.Sighted {
				if _, ended := grp.Ended[s]; s >= from && s <= to && !ended {
					expired++
				}
			}
		}
		next.ExpiredThrough = max(c.ExpiredThrough, through)
	}

	next.Ended += ended
	next.NoShows += noShows
	next.Expired += expired
	released := ended + noShows + expired
	if p.MaxActiveUsers > 0 {
		next.Level, next.Steps = pruned(c, nowMs)
		target := next.Level
		if n := len(next.Steps); n > 0 {
			target = next.Steps[n-1].Freed
		}
		if released > 0 {
			next.Steps = append(next.Steps, Step{AtMs: UnixMs(now.Add(delay)), Freed: addSat(target, released), Rate: p.Settled().Rate})
		}
	} else {
		next.Owed += noShows
	}
	if c.FoldedAtMs > 0 && nowMs > c.FoldedAtMs {
		measured, _ := mulDiv(uint64(released), 1e6, uint64(nowMs-c.FoldedAtMs), false)
		next.ReleaseRate = Rate((int64(c.ReleaseRate)*3 + measured) / 4)
	}
	if err := cs.PutMark(ctx, p.ID, Mark{AtMs: nowMs, Counter: p.Serving(now), NoShowThrough: next.NoShowThrough}); err != nil {
		return c, fmt.Errorf("put mark: %w", err)
	}
	switch err := cs.ApplyFold(ctx, p.ID, c.FoldedAtMs, next); {
	case errors.Is(err, ErrConflict):
		return c, nil // another request folded first
	case err != nil:
		return c, fmt.Errorf("apply fold: %w", err)
	}
	return next, nil
}

// pruned is c's level and steps at nowMs, the steps in effect before the
// last keptSteps of them turned into the level.
func pruned(c Capacity, nowMs int64) (int64, []Step) {
	due := 0
	for due < len(c.Steps) && c.Steps[due].AtMs <= nowMs {
		due++
	}
	drop := max(due-keptSteps, 0)
	if drop == 0 {
		return c.Level, append([]Step(nil), c.Steps...)
	}
	// The level where the first kept step starts: the dropped steps only.
	level := Capacity{Level: c.Level, Steps: c.Steps[:drop]}.freedAt(c.Steps[drop].AtMs)
	return level, append([]Step(nil), c.Steps[drop:]...)
}
