package storetest

import (
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/example/waitingroom/internal/queue"
)

// groupDiff compares capacity groups, an absent Ended map as an empty one.
func groupDiff(want, got queue.Group) string {
	return cmp.Diff(want, got, cmpopts.EquateEmpty())
}

func testCapacity(t *testing.T, s queue.CapacityStore, ps queue.Store) {
	ctx := t.Context()
	const id = "capped"
	t.Run("sightings and their seal", func(t *testing.T) {
		for _, place := range []int64{5, 2, 5, 9} { // 5 twice: one sighting
			if _, err := s.Sight(ctx, id, place); err != nil {
				t.Fatalf("Sight(%d): %v", place, err)
			}
		}
		g, err := s.SealSightings(ctx, id, 0, 6, t0)
		checkErr(t, "SealSightings", err, nil)
		want := queue.Group{Sighted: []int64{2, 5, 9}, SealedThrough: 6, Seals: []queue.Seal{{Through: 6, At: t0}}}
		if d := groupDiff(want, g); d != "" {
			t.Fatalf("sealed group (-want +got):\n%s", d)
		}
		_, err = s.Sight(ctx, id, 3)
		checkErr(t, "Sight of a sealed place", err, queue.ErrSealed)
		g, err = s.Sight(ctx, id, 5) // a retry after a lost answer
		checkErr(t, "Sight again of a sealed place seen before", err, nil)
		if d := groupDiff(want, g); d != "" {
			t.Fatalf("group after a repeat (-want +got):\n%s", d)
		}
		g, err = s.SealSightings(ctx, id, 0, 4, t0.Add(ms(500))) // never back
		checkErr(t, "SealSightings back", err, nil)
		if d := groupDiff(want, g); d != "" {
			t.Fatalf("group after a seal below (-want +got):\n%s", d)
		}
		g, err = s.Sight(ctx, id, 7)
		checkErr(t, "Sight past the seal", err, nil)
		if !slices.Equal(g.Sighted, []int64{2, 5, 7, 9}) {
			t.Fatalf("Sighted %v, want [2 5 7 9]", g.Sighted)
		}
		g, err = s.SealSightings(ctx, id, 0, 8, t0.Add(ms(900))) // a second move
		checkErr(t, "SealSightings further", err, nil)
		for _, tt := range []struct {
			place int64
			at    time.Time
			ok    bool
		}{{5, t0, true}, {6, t0, true}, {7, t0.Add(ms(900)), true}, {9, time.Time{}, false}} {
			if at, ok := g.SealedAt(tt.place); !at.Equal(tt.at) || ok != tt.ok {
				t.Errorf("SealedAt(%d) = %v, %v; want %v, %v", tt.place, at, ok, tt.at, tt.ok)
			}
		}
		// Another group, another program: untouched.
		g, err = s.Sight(ctx, id, queue.GroupSize+1)
		checkErr(t, "Sight in group 1", err, nil)
		if d := groupDiff(queue.Group{Sighted: []int64{queue.GroupSize + 1}}, g); d != "" {
			t.Fatalf("group 1 (-want +got):\n%s", d)
		}
		g, err = s.SealSightings(ctx, "other", 0, 1, t0)
		checkErr(t, "SealSightings of another program", err, nil)
		if len(g.Sighted) != 0 {
			t.Fatalf("another program's group has sightings %v", g.Sighted)
		}
	})
	t.Run("ends and the expiry seal", func(t *testing.T) {
		const g1 = 3 * queue.GroupSize
		if _, err := s.EndPlace(ctx, id, g1+1, 10); err != nil {
			t.Fatalf("EndPlace: %v", err)
		}
		g, err := s.EndPlace(ctx, id, g1+1, 11) // the first stays
		checkErr(t, "EndPlace again", err, nil)
		if d := groupDiff(queue.Group{Ended: map[int64]int64{g1 + 1: 10}}, g); d != "" {
			t.Fatalf("group (-want +got):\n%s", d)
		}
		g, err = s.MoveEnd(ctx, id, g1+1, 9, 12) // not from 9: unchanged
		checkErr(t, "MoveEnd from another quantum", err, nil)
		if g.Ended[g1+1] != 10 {
			t.Fatalf("MoveEnd from 9 moved the end to %d", g.Ended[g1+1])
		}
		g, err = s.MoveEnd(ctx, id, g1+1, 10, 12)
		checkErr(t, "MoveEnd", err, nil)
		if g.Ended[g1+1] != 12 {
			t.Fatalf("MoveEnd from 10 to 12: the end is in %d", g.Ended[g1+1])
		}
		if _, err := s.EndPlace(ctx, id, g1+2, 13); err != nil {
			t.Fatalf("EndPlace: %v", err)
		}
		g, err = s.ExpireGroup(ctx, id, 3, g1+3)
		checkErr(t, "ExpireGroup", err, nil)
		if d := groupDiff(queue.Group{Ended: map[int64]int64{g1 + 1: 12, g1 + 2: 13}, ExpiredThrough: g1 + 3}, g); d != "" {
			t.Fatalf("expired group (-want +got):\n%s", d)
		}
		g, err = s.ExpireGroup(ctx, id, 3, g1+1) // never back
		checkErr(t, "ExpireGroup back", err, nil)
		if g.ExpiredThrough != g1+3 {
			t.Fatalf("the expiry seal moved back to %d", g.ExpiredThrough)
		}
		_, err = s.EndPlace(ctx, id, g1+3, 14)
		checkErr(t, "EndPlace of an expired place", err, queue.ErrSealed)
		g, err = s.EndPlace(ctx, id, g1+4, 14)
		checkErr(t, "EndPlace past the expiry seal", err, nil)
		if g.Ended[g1+4] != 14 {
			t.Fatalf("the end past the expiry seal is in %d", g.Ended[g1+4])
		}
		g, err = s.EndPlace(ctx, id, g1+2, 15) // a retry of an end made before the seal
		checkErr(t, "EndPlace again in an expired group", err, nil)
		if g.Ended[g1+2] != 13 {
			t.Fatalf("a repeated end moved to quantum %d", g.Ended[g1+2])
		}
	})
	t.Run("end indexes", func(t *testing.T) {
		for _, place := range []int64{40, 7, 40} {
			checkErr(t, "AddEnd", s.AddEnd(ctx, id, 100, 1, place), nil)
		}
		checkErr(t, "AddEnd to another shard", s.AddEnd(ctx, id, 100, 2, 8), nil)
		for range 2 { // sealing again reads the same
			got, err := s.SealEnds(ctx, id, 100, 1)
			checkErr(t, "SealEnds", err, nil)
			if !slices.Equal(got, []int64{7, 40}) {
				t.Fatalf("SealEnds = %v, want [7 40]", got)
			}
		}
		checkErr(t, "AddEnd to a sealed index", s.AddEnd(ctx, id, 100, 1, 9), queue.ErrSealed)
		checkErr(t, "AddEnd again to a sealed index that has it", s.AddEnd(ctx, id, 100, 1, 40), nil)
		got, err := s.SealEnds(ctx, id, 101, 0)
		checkErr(t, "SealEnds of an empty index", err, nil)
		if len(got) != 0 {
			t.Fatalf("an empty index sealed with %v", got)
		}
		checkErr(t, "AddEnd to a sealed empty index", s.AddEnd(ctx, id, 101, 0, 9), queue.ErrSealed)
	})
	t.Run("marks", func(t *testing.T) {
		_, err := s.MarkBefore(ctx, id, 5_000)
		checkErr(t, "MarkBefore with none", err, queue.ErrNotFound)
		marks := []queue.Mark{{AtMs: 2_000, Counter: 20, NoShowThrough: 3}, {AtMs: 1_000, Counter: 10}, {AtMs: 3_000, Counter: 35, NoShowThrough: 9}}
		for _, m := range append(marks, marks[0]) {
			checkErr(t, "PutMark", s.PutMark(ctx, id, m), nil)
		}
		for _, tt := range []struct {
			ms   int64
			want queue.Mark
			err  error
		}{
			{999, queue.Mark{}, queue.ErrNotFound},
			{1_000, marks[1], nil},
			{2_999, marks[0], nil},
			{3_000, marks[2], nil},
			{1 << 50, marks[2], nil},
		} {
			got, err := s.MarkBefore(ctx, id, tt.ms)
			checkErr(t, "MarkBefore", err, tt.err)
			if got != tt.want {
				t.Errorf("MarkBefore(%d) = %+v, want %+v", tt.ms, got, tt.want)
			}
		}
		_, err = s.MarkBefore(ctx, "other", 1<<50)
		checkErr(t, "MarkBefore of another program", err, queue.ErrNotFound)
	})
	t.Run("ApplyFold", func(t *testing.T) {
		p := program("folded")
		checkErr(t, "CreateProgram", ps.CreateProgram(ctx, p), nil)
		next := queue.Capacity{Level: 2, Steps: []queue.Step{{AtMs: 5_000, Freed: 9, Rate: 2_000}, {AtMs: 6_000, Freed: 11}},
			ReleaseRate: 1_500, FoldedAtMs: 4_000, EndsThrough: 15, NoShowThrough: 300, ExpiredThrough: 256, Owed: 1, NoShows: 7, Ended: 3, Expired: 4}
		checkErr(t, "ApplyFold", s.ApplyFold(ctx, p.ID, 0, next), nil)
		checkErr(t, "ApplyFold from the same fold again", s.ApplyFold(ctx, p.ID, 0, next), queue.ErrConflict)
		checkErr(t, "ApplyFold of an absent program", s.ApplyFold(ctx, "absent", 0, next), queue.ErrNotFound)
		// Neither an admin write nor a ticket touches the fold's state.
		upd := p
		upd.Version++
		upd.MaxActiveUsers = 50
		checkErr(t, "UpdateProgram", ps.UpdateProgram(ctx, upd, p.Issued), nil)
		if _, err := ps.IssueTicket(ctx, p.ID, t0.Add(ms(10))); err != nil {
			t.Fatalf("IssueTicket: %v", err)
		}
		got, err := ps.GetProgram(ctx, p.ID)
		checkErr(t, "GetProgram", err, nil)
		if d := cmp.Diff(next, got.Capacity, cmpopts.EquateEmpty()); d != "" {
			t.Fatalf("stored capacity (-want +got):\n%s", d)
		}
		if got.MaxActiveUsers != 50 {
			t.Fatalf("MaxActiveUsers %d, want 50", got.MaxActiveUsers)
		}
		next2 := next
		next2.FoldedAtMs, next2.Steps = 5_000, nil
		checkErr(t, "ApplyFold from the last fold", s.ApplyFold(ctx, p.ID, 4_000, next2), nil)
		got, err = ps.GetProgram(ctx, p.ID)
		checkErr(t, "GetProgram", err, nil)
		if d := cmp.Diff(next2, got.Capacity, cmpopts.EquateEmpty()); d != "" {
			t.Fatalf("stored capacity after a second fold (-want +got):\n%s", d)
		}
	})
}

// testCapacityConcurrent: sightings racing their group's seal. Every
// sighting accepted for a place at or below the seal is in the group the
// seal returned: what the fold counts is what was accepted.
func testCapacityConcurrent(t *testing.T, s queue.CapacityStore) {
	ctx := t.Context()
	const id, places, through = "race", 48, 24
	var mu sync.Mutex
	accepted := map[int64]bool{}
	var sealed queue.Group
	var wg sync.WaitGroup
	wg.Go(func() {
		inParallel(places, func(i int) {
			place := int64(i + 1)
			_, err := s.Sight(ctx, id, place)
			switch {
			case err == nil:
				mu.Lock()
				accepted[place] = true
				mu.Unlock()
			case !errors.Is(err, queue.ErrSealed) || place > through:
				t.Errorf("Sight(%d): %v", place, err)
			}
		})
	})
	wg.Go(func() {
		var err error
		if sealed, err = s.SealSightings(ctx, id, 0, through, t0); err != nil {
			t.Errorf("SealSightings: %v", err)
		}
	})
	wg.Wait()
	for place := range accepted {
		if place <= through && !slices.Contains(sealed.Sighted, place) {
			t.Errorf("place %d's sighting was accepted, but the seal did not see it (%v)", place, sealed.Sighted)
		}
	}
	for _, place := range sealed.Sighted {
		if !accepted[place] {
			t.Errorf("the seal saw place %d, whose sighting was refused", place)
		}
	}
}
