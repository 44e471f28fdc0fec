package memstore

import (
	"cmp"
	"context"
	"maps"
	"slices"
	"time"

	"github.com/example/waitingroom/internal/queue"
)

var _ queue.CapacityStore = (*Store)(nil)

type groupKey struct {
	program string
	g       int64
}

type endsKey struct {
	program string
	q       int64
	k       int
}

// How long the capacity records stay after the write that made them (a
// mark: after its last write), as dynamostore's TTL keeps them: Sweep
// drops them then, once no fold can read them.
const (
	capGroupTTL = 3 * 24 * time.Hour
	capMarkTTL  = 3 * 24 * time.Hour
	capEndsTTL  = 24 * time.Hour
)

// group is one capacity group and when Sweep drops it.
type group struct {
	queue.Group
	expires time.Time
}

// ends is one end index: its places, whether a fold sealed it, and when
// Sweep drops it.
type ends struct {
	places  map[int64]bool
	sealed  bool
	expires time.Time
}

// mark is one mark and when Sweep drops it.
type mark struct {
	queue.Mark
	expires time.Time
}

// capacity holds the capacity records (queue.CapacityStore).
type capacity struct {
	groups map[groupKey]group
	ends   map[endsKey]ends
	marks  map[string][]mark // by program, in time order
}

// sweepCapacity deletes the capacity records past their expiry; s.mu is
// held.
func (s *Store) sweepCapacity(now time.Time) {
	for k, g := range s.cap.groups {
		if now.After(g.expires) {
			delete(s.cap.groups, k)
		}
	}
	for k, e := range s.cap.ends {
		if now.After(e.expires) {
			delete(s.cap.ends, k)
		}
	}
	for id, marks := range s.cap.marks {
		marks = slices.DeleteFunc(marks, func(m mark) bool { return now.After(m.expires) })
		if len(marks) == 0 {
			delete(s.cap.marks, id)
		} else {
			s.cap.marks[id] = marks
		}
	}
}

// updateGroup applies edit to a copy of group k and stores it, unless edit
// fails; it returns the group as stored afterwards.
func (s *Store) updateGroup(ctx context.Context, k groupKey, edit func(g *queue.Group) error) (queue.Group, error) {
	if err := ctx.Err(); err != nil {
		return queue.Group{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	stored, ok := s.cap.groups[k]
	g := stored.Group
	g.Sighted, g.Seals, g.Ended = slices.Clone(g.Sighted), slices.Clone(g.Seals), maps.Clone(g.Ended)
	if err := edit(&g); err != nil {
		return queue.Group{}, err
	}
	if !ok {
		stored.expires = s.clock.Now().Add(capGroupTTL)
	}
	s.cap.groups[k] = group{Group: g, expires: stored.expires}
	g.Sighted, g.Seals, g.Ended = slices.Clone(g.Sighted), slices.Clone(g.Seals), maps.Clone(g.Ended)
	return g, nil
}

// Sight implements queue.CapacityStore.
func (s *Store) Sight(ctx context.Context, programID string, place int64) (queue.Group, error) {
	return s.updateGroup(ctx, groupKey{programID, queue.GroupOf(place)}, func(g *queue.Group) error {
		i, found := slices.BinarySearch(g.Sighted, place)
		switch {
		case found:
		case g.SealedThrough >= place:
			return queue.ErrSealed
		default:
			g.Sighted = slices.Insert(g.Sighted, i, place)
		}
		return nil
	})
}

// SealSightings implements queue.CapacityStore.
func (s *Store) SealSightings(ctx context.Context, programID string, g, through int64, now time.Time) (queue.Group, error) {
	return s.updateGroup(ctx, groupKey{programID, g}, func(g *queue.Group) error {
		if through > g.SealedThrough {
			g.SealedThrough = through
			g.Seals = append(g.Seals, queue.Seal{Through: through, At: now.Truncate(time.Millisecond)})
		}
		return nil
	})
}

// EndPlace implements queue.CapacityStore.
func (s *Store) EndPlace(ctx context.Context, programID string, place, q int64) (queue.Group, error) {
	return s.updateGroup(ctx, groupKey{programID, queue.GroupOf(place)}, func(g *queue.Group) error {
		if _, ended := g.Ended[place]; ended {
			return nil
		} else if place <= g.ExpiredThrough {
			return queue.ErrSealed
		}
		if g.Ended == nil {
			g.Ended = map[int64]int64{}
		}
		g.Ended[place] = q
		return nil
	})
}

// MoveEnd implements queue.CapacityStore.
func (s *Store) MoveEnd(ctx context.Context, programID string, place, from, to int64) (queue.Group, error) {
	return s.updateGroup(ctx, groupKey{programID, queue.GroupOf(place)}, func(g *queue.Group) error {
		if q, ok := g.Ended[place]; ok && q == from {
			g.Ended[place] = to
		}
		return nil
	})
}

// ExpireGroup implements queue.CapacityStore.
func (s *Store) ExpireGroup(ctx context.Context, programID string, g, through int64) (queue.Group, error) {
	return s.updateGroup(ctx, groupKey{programID, g}, func(g *queue.Group) error {
		g.ExpiredThrough = max(g.ExpiredThrough, through)
		return nil
	})
}

// AddEnd implements queue.CapacityStore.
func (s *Store) AddEnd(ctx context.Context, programID string, q int64, k int, place int64) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	key := endsKey{programID, q, k}
	e, ok := s.cap.ends[key]
	if e.sealed && !e.places[place] {
		return queue.ErrSealed
	}
	if !ok {
		e.expires = s.clock.Now().Add(capEndsTTL)
	}
	if e.places == nil {
		e.places = map[int64]bool{}
	}
	e.places[place] = true
	s.cap.ends[key] = e
	return nil
}

// SealEnds implements queue.CapacityStore.
func (s *Store) SealEnds(ctx context.Context, programID string, q int64, k int) ([]int64, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	key := endsKey{programID, q, k}
	e, ok := s.cap.ends[key]
	if !ok {
		e.expires = s.clock.Now().Add(capEndsTTL)
	}
	e.sealed = true
	s.cap.ends[key] = e
	return slices.Sorted(maps.Keys(e.places)), nil
}

// PutMark implements queue.CapacityStore.
func (s *Store) PutMark(ctx context.Context, programID string, m queue.Mark) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	marks := s.cap.marks[programID]
	i, found := slices.BinarySearchFunc(marks, m.AtMs, compareMark)
	stored := mark{Mark: m, expires: s.clock.Now().Add(capMarkTTL)}
	if found {
		marks[i] = stored
	} else {
		s.cap.marks[programID] = slices.Insert(marks, i, stored)
	}
	return nil
}

// MarkBefore implements queue.CapacityStore.
func (s *Store) MarkBefore(ctx context.Context, programID string, ms int64) (queue.Mark, error) {
	if err := ctx.Err(); err != nil {
		return queue.Mark{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	marks := s.cap.marks[programID]
	i, found := slices.BinarySearchFunc(marks, ms, compareMark)
	if found {
		return marks[i].Mark, nil
	}
	if i == 0 {
		return queue.Mark{}, queue.ErrNotFound
	}
	return marks[i-1].Mark, nil
}

// compareMark orders a mark against the instant at, in Unix ms.
func compareMark(m mark, at int64) int { return cmp.Compare(m.AtMs, at) }

// ApplyFold implements queue.CapacityStore.
func (s *Store) ApplyFold(ctx context.Context, programID string, prevFoldedAtMs int64, next queue.Capacity) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.programs[programID]
	switch {
	case !ok:
		return queue.ErrNotFound
	case p.Capacity.FoldedAtMs != prevFoldedAtMs:
		return queue.ErrConflict
	}
	next.Steps = slices.Clone(next.Steps)
	p.Capacity = next
	s.programs[programID] = p
	return nil
}
