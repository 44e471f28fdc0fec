package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/example/waitingroom/internal/queue"
)

// testCatalog holds the list of programs, their deletion and the history
// of their changes.
func testCatalog(t *testing.T, s queue.Store) {
	ctx := context.Background()
	ids := []string{"c-delta", "c-alpha", "c-charlie", "c-bravo", "c-echo"}
	for _, id := range ids {
		if err := s.IndexProgram(ctx, id); err != nil {
			t.Fatalf("IndexProgram(%s): %v", id, err)
		}
	}
	if err := s.IndexProgram(ctx, "c-alpha"); err != nil { // listed already
		t.Fatalf("IndexProgram again: %v", err)
	}
	var listed []string
	for after, pages := "", 0; ; pages++ {
		page, more, err := s.ListPrograms(ctx, after, 2)
		if err != nil {
			t.Fatalf("ListPrograms(%q): %v", after, err)
		}
		if len(page) > 2 || more && len(page) < 2 || pages > 3 {
			t.Fatalf("ListPrograms(%q, 2) = %v, more %v", after, page, more)
		}
		listed = append(listed, page...)
		if !more {
			break
		}
		after = page[len(page)-1]
	}
	want := []string{"c-alpha", "c-bravo", "c-charlie", "c-delta", "c-echo"}
	if diff := cmp.Diff(want, listed); diff != "" {
		t.Errorf("the list, paged by 2 (-want +got):\n%s", diff)
	}

	// Deleting: only the version read; then the id is taken.
	p := program("c-charlie")
	if err := s.CreateProgram(ctx, p); err != nil {
		t.Fatal(err)
	}
	closed := p
	closed.Version, closed.Closed = p.Version+1, true
	if err := s.UpdateProgram(ctx, closed, p.Issued); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteProgram(ctx, p, t0.Add(time.Hour)); !errors.Is(err, queue.ErrConflict) {
		t.Errorf("DeleteProgram of an older version = %v, want ErrConflict", err)
	}
	if _, err := s.GetProgram(ctx, p.ID); err != nil {
		t.Fatalf("a refused delete removed the program: %v", err)
	}
	if err := s.DeleteProgram(ctx, closed, t0.Add(time.Hour)); err != nil {
		t.Fatalf("DeleteProgram: %v", err)
	}
	if _, err := s.GetProgram(ctx, p.ID); !errors.Is(err, queue.ErrNotFound) {
		t.Errorf("GetProgram after the delete = %v, want ErrNotFound", err)
	}
	if err := s.DeleteProgram(ctx, closed, t0.Add(time.Hour)); err != nil {
		t.Errorf("DeleteProgram again (a retry) = %v, want nil", err)
	}
	if page, _, err := s.ListPrograms(ctx, "c-bravo", 10); err != nil || !cmp.Equal(page, []string{"c-delta", "c-echo"}) {
		t.Errorf("ListPrograms after the delete = %v, %v; want c-delta c-echo", page, err)
	}
	again := program("c-charlie")
	again.CreatedAt = t0.Add(time.Hour - time.Millisecond)
	if err := s.CreateProgram(ctx, again); !errors.Is(err, queue.ErrDeleted) {
		t.Errorf("CreateProgram before the id is free = %v, want ErrDeleted", err)
	}
	again.CreatedAt = t0.Add(time.Hour)
	if err := s.CreateProgram(ctx, again); err != nil {
		t.Errorf("CreateProgram once the id is free = %v", err)
	}
	if got, err := s.GetProgram(ctx, p.ID); err != nil || !got.CreatedAt.Equal(again.CreatedAt) || got.Closed {
		t.Errorf("the program made again = %+v, %v", got, err)
	}

	testChanges(t, s)
}

// testChanges holds a program's history: replaced by key, committed,
// paged newest first.
func testChanges(t *testing.T, s queue.Store) {
	ctx := context.Background()
	const id = "c-history"
	change := func(i int) queue.Change {
		return queue.Change{
			ID: queue.NewTokenID(), At: t0.Add(time.Duration(i/2) * time.Millisecond), // pairs share an instant
			Actor: "arn:aws:iam::123456789012:user/ops", Action: queue.ActionUpdate,
			Fields: json.RawMessage(fmt.Sprintf(`{"message":"change %d"}`, i)), Version: int64(i + 1),
		}
	}
	var all []queue.Change
	for i := range 7 {
		c := change(i)
		if i == 3 {
			c.EffectiveAt = c.At.Add(2 * time.Second)
		}
		if err := s.PutChange(ctx, id, c); err != nil {
			t.Fatalf("PutChange: %v", err)
		}
		all = append(all, c)
	}
	// A put again replaces; a commit marks; a commit of nothing is nil.
	all[2].Fields, all[2].Version = json.RawMessage(`{"paused":true}`), 30
	if err := s.PutChange(ctx, id, all[2]); err != nil {
		t.Fatal(err)
	}
	for _, i := range []int{1, 2} {
		if err := s.CommitChange(ctx, id, all[i].At, all[i].ID); err != nil {
			t.Fatalf("CommitChange: %v", err)
		}
		all[i].Committed = true
	}
	if err := s.CommitChange(ctx, id, t0, queue.NewTokenID()); err != nil {
		t.Errorf("CommitChange of no change = %v, want nil", err)
	}
	if err := s.PutChange(ctx, "c-other", change(9)); err != nil {
		t.Fatal(err)
	}
	newestFirst := make([]queue.Change, len(all))
	copy(newestFirst, all)
	slices.SortFunc(newestFirst, func(a, b queue.Change) int {
		if c := b.At.Compare(a.At); c != 0 {
			return c
		}
		return strings.Compare(b.ID, a.ID)
	})
	var got []queue.Change
	from := queue.ChangeKey{}
	for pages := 0; ; pages++ {
		page, more, err := s.Changes(ctx, id, from, 3)
		if err != nil {
			t.Fatalf("Changes: %v", err)
		}
		if len(page) > 3 || more && len(page) < 3 || pages > 3 {
			t.Fatalf("Changes(from %v, 3) = %d changes, more %v", from, len(page), more)
		}
		got = append(got, page...)
		if !more {
			break
		}
		from = page[len(page)-1].Key()
	}
	opts := cmp.Options{cmpopts.EquateEmpty(), cmp.Comparer(func(a, b time.Time) bool { return a.Equal(b) }),
		cmp.Transformer("json", func(r json.RawMessage) string { return string(r) })}
	if diff := cmp.Diff(newestFirst, got, opts); diff != "" {
		t.Errorf("the history, paged by 3 (-want +got):\n%s", diff)
	}
}
