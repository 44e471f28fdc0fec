package memstore

import (
	"cmp"
	"context"
	"maps"
	"slices"
	"time"

	"github.com/example/waitingroom/internal/admission"
	"github.com/example/waitingroom/internal/capacity"
	"github.com/example/waitingroom/internal/catalog"
	"github.com/example/waitingroom/internal/history"
	"github.com/example/waitingroom/internal/queue"
	"github.com/example/waitingroom/internal/tickets"
)

// maxChanges bounds the changes kept per program: the oldest go first.
const maxChanges = 1000

// catalogRecords is the list of programs, the deleted ids and the histories.
type catalogRecords struct {
	listed  map[string]struct{}
	deleted map[string]time.Time // id → taken until
	history map[string][]history.Change
}

// IndexProgram implements queue.CatalogStore.
func (s *Store) IndexProgram(ctx context.Context, id string) error {
	return s.do(ctx, func() error {
		s.cat.listed[id] = struct{}{}
		return nil
	})
}

// ListPrograms implements queue.CatalogStore.
func (s *Store) ListPrograms(ctx context.Context, after string, limit int) ([]string, bool, error) {
	return locked2(ctx, s, func() ([]string, bool) {
		ids := slices.DeleteFunc(slices.Sorted(maps.Keys(s.cat.listed)), func(id string) bool { return id <= after })
		return ids[:min(limit, len(ids))], len(ids) > limit
	})
}

// DeleteProgram implements queue.CatalogStore, forgetting the program's records at once.
func (s *Store) DeleteProgram(ctx context.Context, p admission.Program, until time.Time) error {
	return s.do(ctx, func() error {
		maps.DeleteFunc(s.cat.deleted, func(_ string, u time.Time) bool { return u.Before(until.Add(-catalog.DeletedRetention)) })
		s.cat.deleted[p.ID] = until
		cur, ok := s.programs[p.ID]
		if ok && cur.Version != p.Version {
			delete(s.cat.deleted, p.ID)
			return queue.ErrConflict
		}
		delete(s.programs, p.ID)
		delete(s.changeIssued, p.ID)
		delete(s.cat.listed, p.ID)
		delete(s.cat.history, p.ID)
		delete(s.cap.marks, p.ID)
		maps.DeleteFunc(s.shards, func(k shardKey, _ tickets.Shard) bool { return k.program == p.ID })
		maps.DeleteFunc(s.cap.groups, func(k groupKey, _ expiring[capacity.Group]) bool { return k.program == p.ID })
		maps.DeleteFunc(s.cap.ends, func(k endsKey, _ ends) bool { return k.program == p.ID })
		return nil
	})
}

// PutChange implements queue.CatalogStore.
func (s *Store) PutChange(ctx context.Context, programID string, c history.Change) error {
	return s.do(ctx, func() error {
		h := s.cat.history[programID]
		i, found := slices.BinarySearchFunc(h, c.Key(), compareChange)
		if found {
			h[i] = c
			return nil
		}
		h = slices.Insert(h, i, c)
		if len(h) > maxChanges {
			h = slices.Delete(h, 0, len(h)-maxChanges)
		}
		s.cat.history[programID] = h
		return nil
	})
}

// CommitChange implements queue.CatalogStore.
func (s *Store) CommitChange(ctx context.Context, programID string, at time.Time, id string) error {
	return s.do(ctx, func() error {
		h := s.cat.history[programID]
		if i, found := slices.BinarySearchFunc(h, history.Key{At: at, ID: id}, compareChange); found {
			h[i].Committed = true
		}
		return nil
	})
}

// Changes implements queue.CatalogStore.
func (s *Store) Changes(ctx context.Context, programID string, from history.Key, limit int) ([]history.Change, bool, error) {
	return locked2(ctx, s, func() ([]history.Change, bool) {
		h := s.cat.history[programID]
		end := len(h)
		if from != (history.Key{}) {
			end, _ = slices.BinarySearchFunc(h, from, compareChange)
		}
		page := slices.Clone(h[end-min(max(limit, 0), end) : end])
		slices.Reverse(page)
		return page, end > len(page)
	})
}

func compareChange(c history.Change, k history.Key) int {
	return cmp.Or(c.At.Compare(k.At), cmp.Compare(c.ID, k.ID))
}
