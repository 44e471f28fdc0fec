package storetest

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/example/waitingroom/internal/capacity"
	"github.com/example/waitingroom/internal/pace"
	"github.com/example/waitingroom/internal/queue"
)

func testCapacity(t *testing.T, ps queue.Store) {
	s := ps.(capacity.Store)
	ctx := t.Context()
	const id = "capped"
	t.Run("sightings and their seal", func(t *testing.T) {
		for _, place := range []int64{5, 2, 5, 9} { // 5 twice: one sighting
			checkErr(t, fmt.Sprintf("Sight(%d)", place), errOf(s.Sight(ctx, id, place)), nil)
		}
		want := capacity.Group{Sighted: []int64{2, 5, 9}, SealedThrough: 6, Seals: []capacity.Seal{{Through: 6, At: t0}}}
		checkCall(t, "SealSightings", answer(s.SealSightings(ctx, id, 0, 6, t0)), want)
		checkErr(t, "Sight of a sealed place", errOf(s.Sight(ctx, id, 3)), capacity.ErrSealed)
		// A retry after a lost answer.
		checkCall(t, "Sight again of a sealed place seen before", answer(s.Sight(ctx, id, 5)), want)
		checkCall(t, "SealSightings back (never)", answer(s.SealSightings(ctx, id, 0, 4, t0.Add(ms(500)))), want)
		want.Sighted = []int64{2, 5, 7, 9}
		checkCall(t, "Sight past the seal", answer(s.Sight(ctx, id, 7)), want)
		g := answer(s.SealSightings(ctx, id, 0, 8, t0.Add(ms(900)))).must(t, "SealSightings further, a second move")
		for place, want := range map[int64]time.Time{5: t0, 6: t0, 7: t0.Add(ms(900)), 9: {}} { // 9: not sealed
			if at, ok := g.SealedAt(place); !at.Equal(want) || ok == want.IsZero() {
				t.Errorf("SealedAt(%d) = %v, %v; want %v, %v", place, at, ok, want, !want.IsZero())
			}
		}
		// Another group, another program: untouched.
		checkCall(t, "Sight in group 1", answer(s.Sight(ctx, id, capacity.GroupSize+1)), capacity.Group{Sighted: []int64{capacity.GroupSize + 1}})
		g = answer(s.SealSightings(ctx, "other", 0, 1, t0)).must(t, "SealSightings of another program")
		check(t, "another program's group's sightings", g.Sighted, nil)
	})
	t.Run("ends and the expiry seal", func(t *testing.T) {
		const g1 = 3 * capacity.GroupSize
		ended := map[int64]int64{g1 + 1: 10}
		checkCall(t, "EndPlace", answer(s.EndPlace(ctx, id, g1+1, 10)), capacity.Group{Ended: ended})
		checkCall(t, "EndPlace again (the first stays)", answer(s.EndPlace(ctx, id, g1+1, 11)), capacity.Group{Ended: ended})
		checkCall(t, "MoveEnd from another quantum (unchanged)", answer(s.MoveEnd(ctx, id, g1+1, 9, 12)), capacity.Group{Ended: ended})
		ended[g1+1] = 12
		checkCall(t, "MoveEnd from 10 to 12", answer(s.MoveEnd(ctx, id, g1+1, 10, 12)), capacity.Group{Ended: ended})
		ended[g1+2] = 13
		checkCall(t, "EndPlace", answer(s.EndPlace(ctx, id, g1+2, 13)), capacity.Group{Ended: ended})
		expired := capacity.Group{Ended: ended, ExpiredThrough: g1 + 3}
		checkCall(t, "ExpireGroup", answer(s.ExpireGroup(ctx, id, 3, g1+3)), expired)
		checkCall(t, "ExpireGroup back (never)", answer(s.ExpireGroup(ctx, id, 3, g1+1)), expired)
		checkErr(t, "EndPlace of an expired place", errOf(s.EndPlace(ctx, id, g1+3, 14)), capacity.ErrSealed)
		ended[g1+4] = 14
		checkCall(t, "EndPlace past the expiry seal", answer(s.EndPlace(ctx, id, g1+4, 14)), expired)
		// A retry of an end made before the seal.
		checkCall(t, "EndPlace again in an expired group", answer(s.EndPlace(ctx, id, g1+2, 15)), expired)
	})
	t.Run("end indexes", func(t *testing.T) {
		for _, place := range []int64{40, 7, 40} {
			checkErr(t, "AddEnd", s.AddEnd(ctx, id, 100, 1, place), nil)
		}
		checkErr(t, "AddEnd to another shard", s.AddEnd(ctx, id, 100, 2, 8), nil)
		for range 2 { // sealing again reads the same
			checkCall(t, "SealEnds", answer(s.SealEnds(ctx, id, 100, 1)), []int64{7, 40})
		}
		checkErr(t, "AddEnd to a sealed index", s.AddEnd(ctx, id, 100, 1, 9), capacity.ErrSealed)
		checkErr(t, "AddEnd again to a sealed index that has it", s.AddEnd(ctx, id, 100, 1, 40), nil)
		checkCall(t, "SealEnds of an empty index", answer(s.SealEnds(ctx, id, 101, 0)), nil)
		checkErr(t, "AddEnd to a sealed empty index", s.AddEnd(ctx, id, 101, 0, 9), capacity.ErrSealed)
	})
	t.Run("marks", func(t *testing.T) {
		checkErr(t, "MarkBefore with none", errOf(s.MarkBefore(ctx, id, 5_000)), queue.ErrNotFound)
		marks := []capacity.Mark{{AtMs: 2_000, Counter: 20, NoShowThrough: 3}, {AtMs: 1_000, Counter: 10}, {AtMs: 3_000, Counter: 35, NoShowThrough: 9}}
		for _, m := range append(marks, marks[0]) {
			checkErr(t, "PutMark", s.PutMark(ctx, id, m), nil)
		}
		for _, tt := range []struct {
			ms   int64
			want capacity.Mark
			err  error
		}{
			{999, capacity.Mark{}, queue.ErrNotFound},
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
		checkErr(t, "MarkBefore of another program", errOf(s.MarkBefore(ctx, "other", 1<<50)), queue.ErrNotFound)
	})
	t.Run("ApplyFold", func(t *testing.T) {
		p := program("folded")
		create(t, ps, p)
		next := capacity.Capacity{Level: 2, Steps: []capacity.Step{{AtMs: 5_000, Freed: 9, Rate: 2_000}, {AtMs: 6_000, Freed: 11}},
			ReleaseRate: 1_500, ReleaseSpread: 120, MeasuredSinceMs: 1_000, BoundRate: 3_240, BoundMarks: []pace.Rate{3_240, 2_900}, BoundMarkAtMs: 3_500,
			Budget: 9_720, Backlog: 4, CapRaisedSeen: 20,
			FoldedAtMs: 4_000, EndsThrough: 15, NoShowThrough: 300, ExpiredThrough: 256, Owed: 1, NoShows: 7, Ended: 3, Expired: 4}
		checkErr(t, "ApplyFold", s.ApplyFold(ctx, p.ID, 0, next), nil)
		checkErr(t, "ApplyFold from the same fold again", s.ApplyFold(ctx, p.ID, 0, next), queue.ErrConflict)
		checkErr(t, "ApplyFold of an absent program", s.ApplyFold(ctx, "absent", 0, next), queue.ErrNotFound)
		// Neither an admin write nor a ticket touches the fold's state.
		upd := p
		upd.Version++
		upd.MaxActiveUsers, upd.CapRaised = 50, 30
		checkErr(t, "UpdateProgram", ps.UpdateProgram(ctx, upd, p.Issued), nil)
		checkErr(t, "IssueTicket", errOf(ps.IssueTicket(ctx, p.ID, t0.Add(ms(10)))), nil)
		got := storedProgram(t, ps, p.ID)
		check(t, "stored capacity", got.Capacity, next)
		if got.MaxActiveUsers != 50 || got.CapRaised != 30 {
			t.Fatalf("MaxActiveUsers %d, CapRaised %d; want 50 and 30", got.MaxActiveUsers, got.CapRaised)
		}
		next2 := next
		next2.FoldedAtMs, next2.Steps = 5_000, nil
		checkErr(t, "ApplyFold from the last fold", s.ApplyFold(ctx, p.ID, 4_000, next2), nil)
		check(t, "stored capacity after a second fold", storedProgram(t, ps, p.ID).Capacity, next2)
	})
}

// testCapacityConcurrent: sightings racing their group's seal. Every
// sighting accepted for a place at or below the seal is in the group the
// seal returned: what the fold counts is what was accepted.
func testCapacityConcurrent(t *testing.T, qs queue.Store) {
	s := qs.(capacity.Store)
	const id, places, through = "race", 48, 24
	var mu sync.Mutex
	accepted := map[int64]bool{}
	var sealed capacity.Group
	var wg sync.WaitGroup
	wg.Go(func() {
		inParallel(places, func(i int) {
			place := int64(i + 1)
			_, err := s.Sight(t.Context(), id, place)
			switch {
			case err == nil:
				mu.Lock()
				accepted[place] = true
				mu.Unlock()
			case !errors.Is(err, capacity.ErrSealed) || place > through:
				t.Errorf("Sight(%d): %v", place, err)
			}
		})
	})
	wg.Go(func() {
		var err error
		if sealed, err = s.SealSightings(t.Context(), id, 0, through, t0); err != nil {
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
