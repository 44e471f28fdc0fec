// Package capacity frees the slots of a program with a cap on active
// people (maxActiveUsers) and finds its no-shows, with no job and no hot
// item (docs/design.md, "Capacity"). Package queue follows a program's
// admissions through it; it knows nothing of queue.
//
// A Fold, at most every FoldPeriod, counts the slots freed since the last
// one (ends, no-shows, windows over) from the records kept by place in
// groups of GroupSize (Store), and writes the ceiling's next Step.
//
// Invariants:
//   - Sealed before counted: a fold seals every record it counts (the
//     no-show seal refuses later sightings, a sealed end index sends an
//     end to the next, the expiry seal refuses late ends), so a retried or
//     racing fold counts the same frozen records, and one write wins
//     (Store.ApplyFold on the fold it read).
//   - The Ceiling only rises where the counter cannot reach: a step acts a
//     change delay after it is written, so every cached read computes the
//     same ceiling, and it frees its slots at the rate, not in a burst.
//     Bypass Reservations hold slots below it from when they are made.
//   - So admissions plus live bypass passes never exceed the cap: the
//     ceiling grows only by releases certain when folded.
package capacity

import (
	"context"
	"errors"
	"time"

	"github.com/example/waitingroom/internal/pace"
)

// GroupSize is how many places one capacity group records: places
// g×GroupSize+1 to (g+1)×GroupSize are group g (GroupOf).
const GroupSize = 128

// GroupOf is the capacity group of place p ≥ 1.
func GroupOf(p int64) int64 { return (p - 1) / GroupSize }

// How long the capacity records stay after their last write.
const (
	GroupTTL = 3 * 24 * time.Hour
	MarkTTL  = 3 * 24 * time.Hour
	EndsTTL  = 24 * time.Hour
)

// Step is one rise of the ceiling: from AtMs (Unix ms) the slots freed
// rise towards Freed at Rate (all at once when 0).
type Step struct {
	AtMs  int64     `dynamodbav:"at"`
	Freed int64     `dynamodbav:"freed"`
	Rate  pace.Rate `dynamodbav:"rate"`
}

// Capacity is a program's capacity state, which only the fold writes.
type Capacity struct {
	// Level is how many slots were freed before the first of Steps.
	Level int64 `dynamodbav:"level"`
	// Steps are the ceiling's latest rises, oldest first.
	Steps []Step `dynamodbav:"steps"`
	// ReleaseRate is the rate at which slots were freed lately, smoothed
	// over TurnoverWindow; ReleaseSpread its uncertainty.
	ReleaseRate     pace.Rate `dynamodbav:"releaseRate"`
	ReleaseSpread   pace.Rate `dynamodbav:"releaseSpread"`
	MeasuredSinceMs int64     `dynamodbav:"measuredSinceMs"` // the first fold
	// BoundRate is the turnover a waiting answer may count on: no faster
	// than it after a burst (0: none yet). The folds release the slots they
	// free into the ceiling from Budget and keep the rest as Backlog;
	// Budget refills at the least of BoundRate and BoundMarks, the bounds
	// of the last AnswerLife, the latest made at BoundMarkAtMs.
	BoundRate     pace.Rate   `dynamodbav:"boundRate"`
	BoundMarks    []pace.Rate `dynamodbav:"boundMarks"`
	BoundMarkAtMs int64       `dynamodbav:"boundMarkAtMs"`
	Budget        int64       `dynamodbav:"budget"` // thousandths of a slot
	Backlog       int64       `dynamodbav:"backlog"`
	// CapRaisedSeen is the Program.CapRaised the folds took as freed;
	// the places admitted from GraceFromMs to GraceUntilMs (Unix ms), after
	// a raise, have AnswerLife more to show.
	CapRaisedSeen int64 `dynamodbav:"capRaisedSeen"`
	GraceFromMs   int64 `dynamodbav:"graceFromMs"`
	GraceUntilMs  int64 `dynamodbav:"graceUntilMs"`

	// FoldedAtMs is when the last fold was made (Unix ms; 0: never).
	FoldedAtMs int64 `dynamodbav:"foldedAtMs"`
	// EndsThrough is the last end quantum whose index the folds counted.
	EndsThrough int64 `dynamodbav:"endsThrough"`
	// NoShowThrough is the last place whose sighting the folds sealed.
	NoShowThrough int64 `dynamodbav:"noShowThrough"`
	// ExpiredThrough is the last place whose window the folds expired.
	ExpiredThrough int64 `dynamodbav:"expiredThrough"`
	// Owed are no-shows of a program without a cap.
	Owed int64 `dynamodbav:"owed"`
	// The totals of no-shows, ends and windows over.
	NoShows int64 `dynamodbav:"noShows"`
	Ended   int64 `dynamodbav:"ended"`
	Expired int64 `dynamodbav:"expired"`
}

// FreedAt is how many slots are freed at Unix ms.
func (c Capacity) FreedAt(ms int64) int64 {
	level := c.Level
	for i, st := range c.Steps {
		if ms < st.AtMs {
			break
		}
		end := ms
		if i+1 < len(c.Steps) {
			end = min(end, c.Steps[i+1].AtMs)
		}
		level = st.rise(level, end)
	}
	return level
}

// ReachMs is the first Unix ms from from on at which FreedAt reaches n.
func (c Capacity) ReachMs(n, from int64) (int64, bool) {
	if c.FreedAt(from) >= n {
		return from, true
	}
	level := c.Level
	for i, st := range c.Steps {
		end := int64(-1) // none: the last step rises for good
		if i+1 < len(c.Steps) {
			end = c.Steps[i+1].AtMs
		}
		if level < st.Freed && n <= st.Freed {
			at := st.AtMs
			if st.Rate > 0 {
				d, _ := pace.MulDiv(uint64(n-level-1), 1e6, uint64(st.Rate), true)
				at = pace.AddSat(st.AtMs, d)
			}
			if st.Rate <= 0 || end < 0 || at <= end {
				return max(at, from), true
			}
		}
		if end >= 0 {
			level = st.rise(level, end)
		}
	}
	return 0, false
}

// rise is the level after st has risen from level until end ≥ st.AtMs.
func (st Step) rise(level, end int64) int64 {
	switch {
	case st.Freed <= level:
		return level
	case st.Rate <= 0:
		return st.Freed
	}
	return min(st.Freed, pace.AddSat(level, releasedBy(st.AtMs, end, st.Rate)))
}

// releasedBy is how many slots a release at r from fromMs freed by toMs.
func releasedBy(fromMs, toMs int64, r pace.Rate) int64 {
	n, _ := pace.MulDiv(uint64(toMs-fromMs), uint64(r), 1e6, false)
	return pace.AddSat(n, 1)
}

// Group is one capacity group of a program as stored.
type Group struct {
	// Sighted are the places whose admission was seen (the pass fetched).
	Sighted []int64
	// SealedThrough is the no-show seal; Seals are its moves, in order.
	SealedThrough int64
	Seals         []Seal
	// Ended maps each place that ended early to its end quantum.
	Ended map[int64]int64
	// ExpiredThrough is the expiry seal.
	ExpiredThrough int64
}

// Seal is one move of a group's no-show seal.
type Seal struct {
	Through int64
	At      time.Time
}

// SealedAt is when place was sealed against new sightings, if it was.
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

// Store keeps the capacity records; its other errors are package store's.
type Store interface {
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
	// and returns the group.
	ExpireGroup(ctx context.Context, programID string, g, through int64) (Group, error)
	// AddEnd adds place to the end index of quantum q, shard k, unless it
	// is sealed without it (ErrSealed).
	AddEnd(ctx context.Context, programID string, q int64, k int, place int64) error
	// SealEnds seals the end index of quantum q, shard k, and returns its
	// places.
	SealEnds(ctx context.Context, programID string, q int64, k int) ([]int64, error)
	// PutMark stores m (the same mark again changes nothing).
	PutMark(ctx context.Context, programID string, m Mark) error
	// MarkBefore returns the latest mark at or before Unix ms;
	// store.ErrNotFound if there is none.
	MarkBefore(ctx context.Context, programID string, ms int64) (Mark, error)
	// ApplyFold stores next as the program's capacity if its stored
	// capacity is still from the fold made at prevFoldedAtMs;
	// store.ErrConflict otherwise, store.ErrNotFound without the program.
	ApplyFold(ctx context.Context, programID string, prevFoldedAtMs int64, next Capacity) error
}
