package memstore

import (
	"cmp"
	"context"
	"maps"
	"slices"
	"time"

	"github.com/example/waitingroom/internal/admission"
	"github.com/example/waitingroom/internal/capacity"
	"github.com/example/waitingroom/internal/queue"
)

type groupKey struct {
	program string
	g       int64
}

type endsKey struct {
	program string
	q       int64
	k       int
}

// ends is one end index: its places, whether a fold sealed it, and when Sweep drops it.
type ends struct {
	places  map[int64]bool
	sealed  bool
	expires time.Time
}

type capRecords struct {
	groups map[groupKey]expiring[capacity.Group]
	ends   map[endsKey]ends
	marks  map[string][]expiring[capacity.Mark] // by program, in time order
}

// sweepCapacity deletes the capacity records past their expiry; s.mu is held.
func (s *Store) sweepCapacity(now time.Time) {
	maps.DeleteFunc(s.cap.groups, func(_ groupKey, g expiring[capacity.Group]) bool { return now.After(g.expires) })
	maps.DeleteFunc(s.cap.ends, func(_ endsKey, e ends) bool { return now.After(e.expires) })
	for id, marks := range s.cap.marks {
		s.cap.marks[id] = slices.DeleteFunc(marks, func(m expiring[capacity.Mark]) bool { return now.After(m.expires) })
	}
	maps.DeleteFunc(s.cap.marks, func(_ string, marks []expiring[capacity.Mark]) bool { return len(marks) == 0 })
}

// updateGroup applies edit to a copy of group k and stores it unless edit fails; it returns the group as stored.
func (s *Store) updateGroup(ctx context.Context, k groupKey, edit func(g *capacity.Group) error) (capacity.Group, error) {
	return locked(ctx, s, func() (capacity.Group, error) {
		stored, ok := s.cap.groups[k]
		g := cloneGroup(stored.v)
		if err := edit(&g); err != nil {
			return capacity.Group{}, err
		}
		if !ok {
			stored.expires = s.clock.Now().Add(capacity.GroupTTL)
		}
		s.cap.groups[k] = expiring[capacity.Group]{g, stored.expires}
		return cloneGroup(g), nil
	})
}

// cloneGroup is g with lists and map of its own.
func cloneGroup(g capacity.Group) capacity.Group {
	g.Sighted, g.Seals, g.Ended = slices.Clone(g.Sighted), slices.Clone(g.Seals), maps.Clone(g.Ended)
	return g
}

// Sight implements capacity.Store.
func (s *Store) Sight(ctx context.Context, programID string, place int64) (capacity.Group, error) {
	return s.updateGroup(ctx, groupKey{programID, capacity.GroupOf(place)}, func(g *capacity.Group) error {
		i, found := slices.BinarySearch(g.Sighted, place)
		switch {
		case found:
		case g.SealedThrough >= place:
			return capacity.ErrSealed
		default:
			g.Sighted = slices.Insert(g.Sighted, i, place)
		}
		return nil
	})
}

// SealSightings implements capacity.Store.
func (s *Store) SealSightings(ctx context.Context, programID string, g, through int64, now time.Time) (capacity.Group, error) {
	return s.updateGroup(ctx, groupKey{programID, g}, func(g *capacity.Group) error {
		if through > g.SealedThrough {
			g.SealedThrough = through
			g.Seals = append(g.Seals, capacity.Seal{Through: through, At: now.Truncate(time.Millisecond)})
		}
		return nil
	})
}

// EndPlace implements capacity.Store.
func (s *Store) EndPlace(ctx context.Context, programID string, place, q int64) (capacity.Group, error) {
	return s.updateGroup(ctx, groupKey{programID, capacity.GroupOf(place)}, func(g *capacity.Group) error {
		if _, ended := g.Ended[place]; ended {
			return nil
		} else if place <= g.ExpiredThrough {
			return capacity.ErrSealed
		}
		if g.Ended == nil {
			g.Ended = map[int64]int64{}
		}
		g.Ended[place] = q
		return nil
	})
}

// MoveEnd implements capacity.Store.
func (s *Store) MoveEnd(ctx context.Context, programID string, place, from, to int64) (capacity.Group, error) {
	return s.updateGroup(ctx, groupKey{programID, capacity.GroupOf(place)}, func(g *capacity.Group) error {
		if q, ok := g.Ended[place]; ok && q == from {
			g.Ended[place] = to
		}
		return nil
	})
}

// ExpireGroup implements capacity.Store.
func (s *Store) ExpireGroup(ctx context.Context, programID string, g, through int64) (capacity.Group, error) {
	return s.updateGroup(ctx, groupKey{programID, g}, func(g *capacity.Group) error {
		g.ExpiredThrough = max(g.ExpiredThrough, through)
		return nil
	})
}

// AddEnd implements capacity.Store.
func (s *Store) AddEnd(ctx context.Context, programID string, q int64, k int, place int64) error {
	return s.do(ctx, func() error {
		key := endsKey{programID, q, k}
		e := s.endsAt(key)
		if e.sealed && !e.places[place] {
			return capacity.ErrSealed
		}
		e.places[place] = true
		s.cap.ends[key] = e
		return nil
	})
}

// SealEnds implements capacity.Store.
func (s *Store) SealEnds(ctx context.Context, programID string, q int64, k int) ([]int64, error) {
	return locked(ctx, s, func() ([]int64, error) {
		key := endsKey{programID, q, k}
		e := s.endsAt(key)
		e.sealed = true
		s.cap.ends[key] = e
		return slices.Sorted(maps.Keys(e.places)), nil
	})
}

// endsAt returns end index key as stored, or a new one expiring capacity.EndsTTL from now; s.mu is held.
func (s *Store) endsAt(key endsKey) ends {
	e, ok := s.cap.ends[key]
	if !ok {
		e = ends{places: map[int64]bool{}, expires: s.clock.Now().Add(capacity.EndsTTL)}
	}
	return e
}

// PutMark implements capacity.Store.
func (s *Store) PutMark(ctx context.Context, programID string, m capacity.Mark) error {
	return s.do(ctx, func() error {
		marks := s.cap.marks[programID]
		i, found := slices.BinarySearchFunc(marks, m.AtMs, compareMark)
		stored := expiring[capacity.Mark]{m, s.clock.Now().Add(capacity.MarkTTL)}
		if found {
			marks[i] = stored
		} else {
			s.cap.marks[programID] = slices.Insert(marks, i, stored)
		}
		return nil
	})
}

// MarkBefore implements capacity.Store.
func (s *Store) MarkBefore(ctx context.Context, programID string, ms int64) (capacity.Mark, error) {
	return locked(ctx, s, func() (capacity.Mark, error) {
		marks := s.cap.marks[programID]
		i, found := slices.BinarySearchFunc(marks, ms, compareMark)
		if found {
			i++ // the mark at ms
		}
		if i == 0 {
			return capacity.Mark{}, queue.ErrNotFound
		}
		return marks[i-1].v, nil
	})
}

// compareMark orders a mark against the instant at, in Unix ms.
func compareMark(m expiring[capacity.Mark], at int64) int { return cmp.Compare(m.v.AtMs, at) }

// ApplyFold implements capacity.Store.
func (s *Store) ApplyFold(ctx context.Context, programID string, prevFoldedAtMs int64, next capacity.Capacity) error {
	_, err := s.editProgram(ctx, programID, func(p admission.Program) (admission.Program, error) {
		if p.Capacity.FoldedAtMs != prevFoldedAtMs {
			return admission.Program{}, queue.ErrConflict
		}
		next.Steps = slices.Clone(next.Steps)
		p.Capacity = next
		return p, nil
	})
	return err
}
