package memstore

import (
	"cmp"
	"context"
	"slices"
	"time"

	"github.com/example/waitingroom/internal/queue"
)

// maxChanges bounds the changes kept per program: the oldest go first.
const maxChanges = 1000

// catalog is the list of programs, the deleted ids and the histories.
type catalog struct {
	listed  map[string]struct{}
	deleted map[string]time.Time // id → taken until
	history map[string][]queue.Change
}

// IndexProgram implements queue.CatalogStore.
func (s *Store) IndexProgram(ctx context.Context, id string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cat.listed[id] = struct{}{}
	return nil
}

// ListPrograms implements queue.CatalogStore.
func (s *Store) ListPrograms(ctx context.Context, after string, limit int) ([]string, bool, error) {
	if err := ctx.Err(); err != nil {
		return nil, false, err
	}
	s.mu.Lock()
	ids := make([]string, 0, len(s.cat.listed))
	for id := range s.cat.listed {
		if id > after {
			ids = append(ids, id)
		}
	}
	s.mu.Unlock()
	slices.Sort(ids)
	if len(ids) > limit {
		return ids[:limit], true, nil
	}
	return ids, false, nil
}

// DeleteProgram implements queue.CatalogStore. It forgets the program's
// shards, capacity records and history at once.
func (s *Store) DeleteProgram(ctx context.Context, p queue.Program, until time.Time) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, u := range s.cat.deleted { // bounded: forget the ids free again
		if u.Before(until.Add(-queue.DeletedRetention)) {
			delete(s.cat.deleted, id)
		}
	}
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
	for k := range s.shards {
		if k.program == p.ID {
			delete(s.shards, k)
		}
	}
	for k := range s.cap.groups {
		if k.program == p.ID {
			delete(s.cap.groups, k)
		}
	}
	for k := range s.cap.ends {
		if k.program == p.ID {
			delete(s.cap.ends, k)
		}
	}
	return nil
}

// PutChange implements queue.CatalogStore.
func (s *Store) PutChange(ctx context.Context, programID string, c queue.Change) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
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
}

// CommitChange implements queue.CatalogStore.
func (s *Store) CommitChange(ctx context.Context, programID string, at time.Time, id string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.cat.history[programID]
	if i, found := slices.BinarySearchFunc(h, queue.ChangeKey{At: at, ID: id}, compareChange); found {
		h[i].Committed = true
	}
	return nil
}

// Changes implements queue.CatalogStore.
func (s *Store) Changes(ctx context.Context, programID string, from queue.ChangeKey, limit int) ([]queue.Change, bool, error) {
	if err := ctx.Err(); err != nil {
		return nil, false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.cat.history[programID]
	end := len(h)
	if from != (queue.ChangeKey{}) {
		end, _ = slices.BinarySearchFunc(h, from, compareChange)
	}
	var page []queue.Change
	for i := end - 1; i >= 0 && len(page) < limit; i-- {
		page = append(page, h[i])
	}
	return page, end-len(page) > 0, nil
}

// compareChange orders changes by their key (queue.ChangeKey).
func compareChange(c queue.Change, k queue.ChangeKey) int {
	return cmp.Or(c.At.Compare(k.At), cmp.Compare(c.ID, k.ID))
}
