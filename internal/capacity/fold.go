package capacity

import (
	"context"
	"errors"
	"fmt"
	"math"
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
	// TurnoverWindow is how long the release rate is smoothed over;
	// BurstWindow is how much of BoundRate may free at once; the bound is
	// twice the rate and its spread, and MinBound at least.
	TurnoverWindow = 30 * time.Second
	BurstWindow    = 3 * time.Second
	MinBound       = pace.OnePerSecond
	// AnswerLife is the longest a place the ceiling holds is told to
	// sleep, and so how long a bound lowers the budget's refill after it
	// was raised.
	AnswerLife = 2 * time.Minute
	// boundMarks are the bounds kept, one per AnswerLife/boundMarks.
	boundMarks = 4
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
	CapRaised               int64     // admission.Program's: raises to free
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

// noShowBefore is the latest Unix ms at which an admission unsighted at
// now is a no-show: noShowAfter before now, AnswerLife more for those
// admitted in a grace (GraceFromMs to GraceUntilMs), and, places being
// sealed in order, for those after it until the grace's last are due.
func (c Capacity) noShowBefore(now time.Time, noShowAfter time.Duration) int64 {
	at := pace.UnixMs(now.Add(-noShowAfter))
	graced := at - AnswerLife.Milliseconds()
	if at < c.GraceFromMs || graced >= c.GraceUntilMs {
		return at
	}
	return max(c.GraceFromMs-1, graced)
}

// sealNoShows seals the places admitted by the latest mark older than the
// time to show, and returns the no-shows and the cursor after it.
func sealNoShows(ctx context.Context, s Store, p Program, now time.Time) (noShows, through int64, err error) {
	upTo := func(m Mark) int64 { return m.Counter }
	at := pace.FromUnixMs(p.Capacity.noShowBefore(now, p.NoShowAfter))
	return sealGroups(ctx, s, p.ID, at, p.Capacity.NoShowThrough, upTo, func(g, from, to int64) (int64, error) {
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
	if c.FoldedAtMs > 0 && nowMs > c.FoldedAtMs {
		next.ReleaseRate, next.ReleaseSpread = c.measured(released, nowMs-c.FoldedAtMs)
	} else if c.FoldedAtMs == 0 {
		next.MeasuredSinceMs = nowMs
	}
	if p.Capped {
		freed := next.budgeted(c, released, nowMs)
		// A raise of the cap frees its slots at once, and gives the places
		// it admits AnswerLife more to show: their holders may sleep on
		// answers that did not count on it.
		if raised := p.CapRaised - c.CapRaisedSeen; raised > 0 {
			freed = pace.AddSat(freed, raised)
			next.CapRaisedSeen = p.CapRaised
			if c.GraceUntilMs < nowMs {
				next.GraceFromMs = nowMs
			}
			next.GraceUntilMs = pace.UnixMs(now.Add(delay + AnswerLife))
		}
		next.Level, next.Steps = pruned(c, nowMs)
		target := next.Level
		if n := len(next.Steps); n > 0 {
			target = next.Steps[n-1].Freed
		}
		if freed > 0 {
			next.Steps = append(next.Steps, Step{AtMs: pace.UnixMs(now.Add(delay)), Freed: pace.AddSat(target, freed), Rate: p.Rate})
		}
		next.bound(c, p.Rate, nowMs)
	} else {
		next.Owed += noShows
	}
	return next
}

// measured is the release rate and its spread after released slots freed
// in the last dt ms: each a mean over TurnoverWindow, weighted by time;
// the spread from each fold's deviation scaled to the window's (as the
// error of a mean shrinks with the root of its samples).
func (c Capacity) measured(released, dt int64) (rate, spread pace.Rate) {
	w := TurnoverWindow.Milliseconds()
	r, _ := pace.MulDiv(uint64(pace.AddSat(pace.AddSat(pace.MulSat(int64(c.ReleaseRate), w), pace.MulSat(released, 1e6)), (w+dt)/2)), 1, uint64(w+dt), false)
	sample := float64(released) * 1e6 / float64(dt)
	dev := math.Abs(sample-float64(c.ReleaseRate)) * math.Sqrt(float64(dt)/float64(w))
	sp := (float64(c.ReleaseSpread)*float64(w) + dev*float64(dt)) / float64(w+dt)
	return pace.Rate(r), pace.Rate(math.Round(sp))
}

// budgeted is how many slots a fold at nowMs releases into the ceiling
// when it counted released more: within the budget of c's bound, the
// rest kept as next's backlog (all of them while no bound is out).
func (next *Capacity) budgeted(c Capacity, released, nowMs int64) int64 {
	want := pace.AddSat(c.Backlog, released)
	if c.BoundRate <= 0 {
		next.Backlog = 0
		return want
	}
	refill := c.floor()
	budget := min(pace.AddSat(c.Budget, pace.MulSat(max(nowMs-c.FoldedAtMs, 0), int64(refill))/1000), burstOf(refill))
	freed := min(want, budget/1000)
	next.Budget, next.Backlog = budget-freed*1000, want-freed
	return freed
}

// floor is the least bound of the answers that may still be out: the
// budget refills no faster than any of them counted on.
func (c Capacity) floor() pace.Rate {
	r := c.BoundRate
	for _, m := range c.BoundMarks {
		r = min(r, m)
	}
	return r
}

// burstOf is the budget, in thousandths of a slot, of a bound of r: what
// it frees in BurstWindow, and one slot at least.
func burstOf(r pace.Rate) int64 {
	return max(pace.MulSat(int64(r), BurstWindow.Milliseconds())/1000, 1000)
}

// bound sets next's BoundRate: the admission rate (the steps free no
// faster), lowered once a window is measured to twice the turnover and its
// spread, or the backlog over AnswerLife, and not lowered while a backlog
// waits; and keeps in
// BoundMarks the least bound of each AnswerLife/boundMarks, the first the
// current one's, to cover AnswerLife.
func (next *Capacity) bound(c Capacity, rate pace.Rate, nowMs int64) {
	if c.FoldedAtMs <= 0 {
		return // the first fold comes with the first request: no answer out yet
	}
	every := AnswerLife.Milliseconds() / boundMarks
	target := rate
	if c.MeasuredSinceMs <= nowMs-TurnoverWindow.Milliseconds() {
		measured := pace.AddSat(2*int64(next.ReleaseRate), 2*int64(next.ReleaseSpread))
		backlog, _ := pace.MulDiv(uint64(next.Backlog), 1e6, uint64(AnswerLife.Milliseconds()), true)
		if next.Backlog > 0 {
			measured = max(measured, int64(c.BoundRate)) // no lower while slots wait for it
		}
		target = min(target, max(pace.Rate(max(measured, backlog)), MinBound))
	}
	switch {
	case target <= 0 && nowMs >= c.BoundMarkAtMs+2*every+AnswerLife.Milliseconds():
		// Manual admission only bounds no answer: once those told under
		// the last bound are out of their time, the budget goes.
		next.BoundRate, next.BoundMarks, next.Budget = 0, nil, 0
		return
	case target <= 0:
		return
	case c.BoundRate <= 0:
		next.Budget = burstOf(target) // the answers before it counted on none
	}
	next.BoundRate = target
	if len(c.BoundMarks) == 0 || nowMs >= c.BoundMarkAtMs+every {
		next.BoundMarks = append([]pace.Rate{target}, c.BoundMarks[:min(len(c.BoundMarks), boundMarks)]...)
		next.BoundMarkAtMs = nowMs
		return
	}
	next.BoundMarks = append([]pace.Rate{min(c.BoundMarks[0], target)}, c.BoundMarks[1:]...)
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
