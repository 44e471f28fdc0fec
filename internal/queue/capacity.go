package queue

import (
	"context"
	"errors"
	"time"
)

// GroupSize is how many places one capacity group records: places
// g×GroupSize+1 to (g+1)×GroupSize are group g (GroupOf).
const GroupSize = 128

// GroupOf is the capacity group of place p ≥ 1.
func GroupOf(p int64) int64 { return (p - 1) / GroupSize }

// Step is one rise of a capped program's ceiling, written by the fold:
// from AtMs (Unix ms) the slots freed rise from their level then towards
// Freed, the first slot at AtMs and the next at Rate, or all at once when
// Rate is 0.
type Step struct {
	AtMs  int64 `dynamodbav:"at"`
	Freed int64 `dynamodbav:"freed"`
	Rate  Rate  `dynamodbav:"rate"`
}

// Capacity is a program's capacity state: the slots its admissions freed,
// as the ceiling's steps, and the fold's cursors and totals. Only the fold
// writes it (docs/design.md, "Capacity").
type Capacity struct {
	// Level is how many slots were freed before the first of Steps.
	Level int64 `dynamodbav:"level"`
	// Steps are the ceiling's latest rises, oldest first.
	Steps []Step `dynamodbav:"steps"`
	// ReleaseRate is the rate at which slots were freed lately, as the
	// fold measures it: the pace of admission while the ceiling holds it.
	ReleaseRate Rate `dynamodbav:"releaseRate"`

	// FoldedAtMs is when the last fold was made (Unix ms; 0: never): the
	// condition of the next (CapacityStore.ApplyFold).
	FoldedAtMs int64 `dynamodbav:"foldedAtMs"`
	// EndsThrough is the last end quantum whose index the folds counted.
	EndsThrough int64 `dynamodbav:"endsThrough"`
	// NoShowThrough is the last place whose sighting the folds sealed.
	NoShowThrough int64 `dynamodbav:"noShowThrough"`
	// ExpiredThrough is the last place whose window the folds expired.
	ExpiredThrough int64 `dynamodbav:"expiredThrough"`
	// Owed are no-shows of a program without a cap not yet given to the
	// next people in line as extra admissions.
	Owed int64 `dynamodbav:"owed"`
	// The totals: admissions that were no-shows, that ended early, and
	// whose window ended.
	NoShows int64 `dynamodbav:"noShows"`
	Ended   int64 `dynamodbav:"ended"`
	Expired int64 `dynamodbav:"expired"`
}

// Group is one capacity group of a program as stored: what the folds read
// of its places (docs/design.md, "Capacity").
type Group struct {
	// Sighted are the places whose admission was seen (the pass fetched).
	Sighted []int64
	// SealedThrough is the no-show seal: places at or below it take no
	// new sighting; Seals are its moves, in order.
	SealedThrough int64
	Seals         []Seal
	// Ended maps each place whose admission ended early to the end
	// quantum whose index counts it.
	Ended map[int64]int64
	// ExpiredThrough is the expiry seal: places at or below it take no
	// new end.
	ExpiredThrough int64
}

// Seal is one move of a group's no-show seal: places up to Through were
// sealed at At.
type Seal struct {
	Through int64
	At      time.Time
}

// SealedAt is when place was sealed against new sightings, and false if
// it is not.
func (g Group) SealedAt(place int64) (time.Time, bool) {
	for _, s := range g.Seals {
		if place <= s.Through {
			return s.At, true
		}
	}
	return time.Time{}, false
}

// Mark is the serving counter at a fold, and the no-show cursor after it.
type Mark struct {
	AtMs          int64
	Counter       int64
	NoShowThrough int64
}

// ErrSealed means a capacity record was sealed by a fold before the write.
var ErrSealed = errors.New("store: sealed")

// CapacityStore keeps the records that free a capped program's slots, and
// that find its no-shows. Every record a fold counts is sealed first, so
// that a retried or racing fold counts the same (docs/design.md,
// "Capacity").
type CapacityStore interface {
	// Sight adds place to its group's sightings, unless the group is
	// sealed through place without it (ErrSealed), and returns the group.
	Sight(ctx context.Context, programID string, place int64) (Group, error)
	// SealSightings moves group g's no-show seal up to through (never
	// back) at now, and returns the group.
	SealSightings(ctx context.Context, programID string, g, through int64, now time.Time) (Group, error)
	// EndPlace records place's end in quantum q unless one is recorded
	// (that one stays), and returns the group; ErrSealed if place has
	// expired (ExpireGroup) without one.
	EndPlace(ctx context.Context, programID string, place, q int64) (Group, error)
	// MoveEnd moves place's end from quantum from to quantum to if it is
	// still in from, and returns the group.
	MoveEnd(ctx context.Context, programID string, place, from, to int64) (Group, error)
	// ExpireGroup moves group g's expiry seal up to through (never back),
	// so that no new end is taken at or below it, and returns the group.
	ExpireGroup(ctx context.Context, programID string, g, through int64) (Group, error)
	// AddEnd adds place to the end index of quantum q, shard k, unless it
	// is sealed without it (ErrSealed).
	AddEnd(ctx context.Context, programID string, q int64, k int, place int64) error
	// SealEnds seals the end index of quantum q, shard k, and returns its
	// places.
	SealEnds(ctx context.Context, programID string, q int64, k int) ([]int64, error)
	// PutMark stores m (the same mark again changes nothing).
	PutMark(ctx context.Context, programID string, m Mark) error
	// MarkBefore returns the latest mark at or before Unix ms; ErrNotFound
	// if there is none.
	MarkBefore(ctx context.Context, programID string, ms int64) (Mark, error)
	// ApplyFold stores next as the program's capacity if its stored
	// capacity is still from the fold made at prevFoldedAtMs; ErrConflict
	// otherwise, ErrNotFound without the program.
	ApplyFold(ctx context.Context, programID string, prevFoldedAtMs int64, next Capacity) error
}

// freedAt is how many slots are freed at Unix ms: Level, then each step's
// rise from the level at its instant towards its Freed, up to ms.
func (c Capacity) freedAt(ms int64) int64 {
	level := c.Level
	for i, st := range c.Steps {
		if ms < st.AtMs {
			break
		}
		end := ms
		if i+1 < len(c.Steps) {
			end = min(end, c.Steps[i+1].AtMs)
		}
		switch {
		case st.Freed <= level:
		case st.Rate <= 0:
			level = st.Freed
		default:
			n, _ := mulDiv(uint64(end-st.AtMs), uint64(st.Rate), 1e6, false)
			level = min(st.Freed, addSat(level, addSat(n, 1)))
		}
	}
	return level
}

// reachMs is the first Unix ms at or after from at which freedAt reaches
// n, and false if no step takes it there.
func (c Capacity) reachMs(n, from int64) (int64, bool) {
	if c.freedAt(from) >= n {
		return from, true
	}
	level := c.Level
	for i, st := range c.Steps {
		end := int64(-1) // none: the last step rises for good
		if i+1 < len(c.Steps) {
			end = c.Steps[i+1].AtMs
		}
		switch {
		case st.Freed <= level:
			continue
		case st.Rate <= 0:
			if n <= st.Freed {
				return max(st.AtMs, from), true
			}
			level = st.Freed
			continue
		}
		if n <= st.Freed {
			d, _ := mulDiv(uint64(n-level-1), 1e6, uint64(st.Rate), true)
			if at := addSat(st.AtMs, d); end < 0 || at <= end {
				return max(at, from), true
			}
		}
		if end >= 0 {
			k, _ := mulDiv(uint64(end-st.AtMs), uint64(st.Rate), 1e6, false)
			level = min(st.Freed, addSat(level, addSat(k, 1)))
		}
	}
	return 0, false
}

// ceilingAt is the ceiling on the serving counter at Unix ms (MaxActiveUsers
// plus the slots freed by then, less those bypass passes hold), and false
// when the program has no cap.
func (p Program) ceilingAt(ms int64) (int64, bool) {
	if p.MaxActiveUsers <= 0 {
		return 0, false
	}
	return max(addSat(p.ceilingCap(ms), p.Capacity.freedAt(ms))-p.reservedAt(ms), 0), true
}

// ceilingCap is the cap in effect at Unix ms: MaxActiveUsers, or the one
// before a raise that has not taken effect yet.
func (p Program) ceilingCap(ms int64) int64 {
	if ms < p.CapRaiseAtMs {
		return p.CapFrom
	}
	return p.MaxActiveUsers
}

// counterAt is the serving counter at Unix ms, not capped by the tickets
// issued: the segments' counter, held at the ceiling of a capped program.
func (p Program) counterAt(ms int64) int64 {
	c := p.segmentAt(ms).Counter(ms)
	if l, ok := p.ceilingAt(ms); ok {
		c = min(c, l)
	}
	return c
}

// ceilingAdmitsMs is the first Unix ms at or after at (the segments'
// admission instant of place) at which the ceiling lets place in: from the
// steps written, then at the measured ReleaseRate; false when neither
// tells. at itself without a cap.
func (p Program) ceilingAdmitsMs(place, at int64) (int64, bool) {
	// The slots bypass passes hold count as if held to the end.
	need := addSat(place-p.MaxActiveUsers, p.reservedAt(at))
	if p.MaxActiveUsers <= 0 || need <= 0 {
		return at, true
	}
	if reach, ok := p.Capacity.reachMs(need, at); ok {
		return reach, true
	}
	c := p.Capacity
	if c.ReleaseRate <= 0 {
		return 0, false
	}
	// Past the steps written: the last one's target, then the pace.
	from, level := at, c.freedAt(at)
	if n := len(c.Steps); n > 0 {
		last := c.Steps[n-1]
		if end, ok := c.reachMs(last.Freed, at); ok {
			from, level = end, max(level, last.Freed)
		}
	}
	d, _ := mulDiv(uint64(need-level), 1e6, uint64(c.ReleaseRate), true)
	return addSat(from, d), true
}

// ceilingEarliestMs is a lower bound on when the ceiling could let place
// in, seen at ms: the steps written, or steps not written yet, which take
// effect notice ms from now at the soonest and free at most
// MaxActiveUsers slots a round, a round lasting round ms at least. False
// without a cap, or when the ceiling lets place in already.
func (p Program) ceilingEarliestMs(place, ms, notice, round int64) (int64, bool) {
	l, ok := p.ceilingAt(ms)
	if !ok || place <= l {
		return 0, false
	}
	from := max(ms+notice, ms)
	need := place - addSat(p.MaxActiveUsers, p.Capacity.freedAt(from))
	if need <= 0 {
		reach, _ := p.Capacity.reachMs(place-p.MaxActiveUsers, ms)
		return reach, true
	}
	rounds := (need + p.MaxActiveUsers - 1) / p.MaxActiveUsers
	earliest := addSat(from, MulSat(rounds-1, round))
	if reach, ok := p.Capacity.reachMs(place-p.MaxActiveUsers, from); ok {
		earliest = min(earliest, reach)
	}
	return earliest, true
}

// roundMs is the least time, in ms, between a slot taken and its reuse by
// the next holder, seen with notice: a fold's period without a cache;
// with one, the change delay, at least the notice plus the write budget.
func roundMs(notice time.Duration) int64 {
	if notice <= 0 {
		return foldEvery.Milliseconds()
	}
	return (notice + AdminWriteBudget).Milliseconds()
}

// heldAt reports whether the ceiling holds the serving counter below the
// segments' at Unix ms. A re-anchor of the segments then changes nothing
// below the ceiling, so a read may outlive the drain instant: a reader
// still on the old segments can admit a ticket issued since only within
// the ceiling, which never lets more people in than the cap.
func (p Program) heldAt(ms int64) bool {
	l, ok := p.ceilingAt(ms)
	return ok && l < p.segmentAt(ms).Counter(ms)
}
