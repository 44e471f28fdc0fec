package capacity

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/example/waitingroom/internal/pace"
	"github.com/example/waitingroom/internal/store"
)

// Fold parameters (docs/design.md, "Capacity").
const (
	// EndShards is how many items each end index is spread over.
	EndShards = 4
	// FoldPeriod is the least time between two folds of a program.
	FoldPeriod = 250 * time.Millisecond
	// ExpiryMargin is added to a window before its slot is freed.
	ExpiryMargin = time.Minute
	// maxGroupsPerFold bounds the groups one fold seals for no-shows.
	maxGroupsPerFold = 16
	// keptSteps bounds the steps in effect that a fold keeps.
	keptSteps = 1
)

// Program is what a fold reads of the program it folds.
type Program struct {
	ID       string
	Capacity Capacity
	Capped   bool // without a cap, no-shows are Owed
	// NoShowAfter and FreedAfter are admission.Program's.
	NoShowAfter, FreedAfter time.Duration
	Rate                    pace.Rate // the settled admission rate
	Serving                 int64     // the serving counter at the fold
}

// Fold counts, from records it seals first, the slots freed since the last
// fold and stores the next step; another fold won: p.Capacity and nil.
func Fold(ctx context.Context, s Store, p Program, now time.Time, delay time.Duration) (Capacity, error) {
	c := p.Capacity
	ended, err := sealEnds(ctx, s, p.ID, c.EndsThrough+1)
	if err != nil {
		return c, err
	}
	noShows, noShowThrough, err := sealNoShows(ctx, s, p, now)
	if err != nil {
		return c, err
	}
	expired, expiredThrough, err := expireWindows(ctx, s, p, noShowThrough, now)
	if err != nil {
		return c, err
	}
	next := c.folded(p, now, delay, ended, noShows, expired)
	next.NoShowThrough, next.ExpiredThrough = noShowThrough, expiredThrough
	if err := s.PutMark(ctx, p.ID, Mark{AtMs: next.FoldedAtMs, Counter: p.Serving, NoShowThrough: noShowThrough}); err != nil {
		return c, fmt.Errorf("put mark: %w", err)
	}
	switch err := s.ApplyFold(ctx, p.ID, c.FoldedAtMs, next); {
	case errors.Is(err, store.ErrConflict):
		return c, nil // another request folded first
	case err != nil:
		return c, fmt.Errorf("apply fold: %w", err)
	}
	return next, nil
}

// sealEnds seals the end index of quantum q and counts its places.
func sealEnds(ctx context.Context, s Store, programID string, q int64) (int64, error) {
	ended := int64(0)
	for k := range EndShards {
		places, err := s.SealEnds(ctx, programID, q, k)
		if err != nil {
			return 0, fmt.Errorf("seal ends %d/%d: %w", q, k, err)
		}
		ended += int64(len(places))
	}
	return ended, nil
}

// sealNoShows seals the places admitted by the latest mark older than the
// time to show, and returns the no-shows and the cursor after it.
func sealNoShows(ctx context.Context, s Store, p Program, now time.Time) (noShows, through int64, err error) {
	upTo := func(m Mark) int64 { return m.Counter }
	return sealGroups(ctx, s, p.ID, now.Add(-p.NoShowAfter), p.Capacity.NoShowThrough, upTo, func(g, from, to int64) (int64, error) {
		grp, err := s.SealSightings(ctx, p.ID, g, to, now)
		if err != nil {
			return 0, fmt.Errorf("seal group %d: %w", g, err)
		}
		return to - from + 1 - count(grp.Sighted, from, to, nil), nil
	})
}

// expireWindows seals the places whose window is over, up to
// noShowThrough, and returns those never ended and the expiry cursor.
func expireWindows(ctx context.Context, s Store, p Program, noShowThrough int64, now time.Time) (expired, through int64, err error) {
	upTo := func(m Mark) int64 { return min(m.NoShowThrough, noShowThrough) }
	return sealGroups(ctx, s, p.ID, now.Add(-p.FreedAfter), p.Capacity.ExpiredThrough, upTo, func(g, from, to int64) (int64, error) {
		grp, err := s.ExpireGroup(ctx, p.ID, g, to)
		if err != nil {
			return 0, fmt.Errorf("expire group %d: %w", g, err)
		}
		return count(grp.Sighted, from, to, grp.Ended), nil
	})
}

// sealGroups calls seal on up to maxGroupsPerFold groups after the cursor
// done, up to upTo of the latest mark by at, and returns the sum of its
// counts and the cursor after them.
func sealGroups(ctx context.Context, s Store, programID string, at time.Time, done int64, upTo func(Mark) int64, seal func(g, from, to int64) (int64, error)) (n, through int64, err error) {
	m, err := s.MarkBefore(ctx, programID, pace.UnixMs(at))
	switch {
	case errors.Is(err, store.ErrNotFound):
		return 0, done, nil
	case err != nil:
		return 0, done, fmt.Errorf("read mark: %w", err)
	}
	through = min(upTo(m), done+maxGroupsPerFold*GroupSize)
	for g := GroupOf(done + 1); done < through && g <= GroupOf(through); g++ {
		k, err := seal(g, max(done+1, g*GroupSize+1), min(through, (g+1)*GroupSize))
		if err != nil {
			return 0, done, err
		}
		n += k
	}
	return n, max(done, through), nil
}

// count is how many of places are in from..to and not in except.
func count(places []int64, from, to int64, except map[int64]int64) int64 {
	n := int64(0)
	for _, pl := range places {
		if _, out := except[pl]; pl >= from && pl <= to && !out {
			n++
		}
	}
	return n
}

// folded is c after a fold of p at now that freed these slots.
func (c Capacity) folded(p Program, now time.Time, delay time.Duration, ended, noShows, expired int64) Capacity {
	nowMs := pace.UnixMs(now)
	next := c
	next.FoldedAtMs = nowMs
	next.EndsThrough++
	next.Ended += ended
	next.NoShows += noShows
	next.Expired += expired
	released := ended + noShows + expired
	if p.Capped {
		next.Level, next.Steps = pruned(c, nowMs)
		target := next.Level
		if n := len(next.Steps); n > 0 {
			target = next.Steps[n-1].Freed
		}
		if released > 0 {
			next.Steps = append(next.Steps, Step{AtMs: pace.UnixMs(now.Add(delay)), Freed: pace.AddSat(target, released), Rate: p.Rate})
		}
	} else {
		next.Owed += noShows
	}
	if c.FoldedAtMs > 0 && nowMs > c.FoldedAtMs {
		measured, _ := pace.MulDiv(uint64(released), 1e6, uint64(nowMs-c.FoldedAtMs), false)
		next.ReleaseRate = pace.Rate((int64(c.ReleaseRate)*3 + measured) / 4)
	}
	return next
}

// pruned is c's level and steps at nowMs, older steps folded into Level.
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
	level := Capacity{Level: c.Level, Steps: c.Steps[:drop]}.FreedAt(c.Steps[drop].AtMs)
	return level, append([]Step(nil), c.Steps[drop:]...)
}
