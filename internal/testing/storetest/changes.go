package storetest

import (
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/example/waitingroom/internal/admission"
	"github.com/example/waitingroom/internal/history"
	"github.com/example/waitingroom/internal/pace"
	"github.com/example/waitingroom/internal/queue"
)

// scheduleNow is when the rig's change is made and its tickets issued.
var scheduleNow = t0.Add(ms(2_000))

// scheduleRig stores read and returns change, to rate in 10 s (of id
// "<version>/change-<version>"), and flooded, read after five more tickets.
func scheduleRig(t *testing.T, s queue.Store, read admission.Program, rate pace.Rate) (change, flooded admission.Program) {
	t.Helper()
	create(t, s, read)
	change = read.Rebased(scheduleNow, rate, false, 0, 10*time.Second)
	change.Changes = append([]string{fmt.Sprintf("%d/change-%d", change.Version, change.Version)}, read.Changes...)
	if !change.Scheduled() {
		t.Fatalf("the change takes effect at once, want it scheduled: %+v", change)
	}
	flooded = read
	for range 5 {
		flooded = answer(s.IssueTicket(t.Context(), read.ID, scheduleNow)).must(t, "IssueTicket")
	}
	return change, flooded
}

// slowedRig is the rig of program id slowed to one ticket per 2 s: the
// tickets since the read drain later than it assumed.
func slowedRig(t *testing.T, s queue.Store, id string) (change, flooded admission.Program) {
	t.Helper()
	return scheduleRig(t, s, program(id), perSecond(0.5))
}

// nearSaturation is a program at the slowest rate with so many waiting that
// a change to it drains 2.5 to 3.5 tickets before the end of int64.
func nearSaturation() admission.Program {
	p := program("schedule-saturated")
	p.Current.Rate = 1
	next := p.Rebased(scheduleNow, 1, false, 0, 10*time.Second)
	step := next.Next.StepNs()
	p.Issued = next.Next.Base + (math.MaxInt64-next.Next.DrainAtNs(next.Next.Base)-5*step/2)/step
	p.DrainAtNs = p.Current.DrainAtNs(p.Issued)
	return p
}

// landedOn is change as a store keeps it over stored (see UpdateProgram).
func landedOn(change, stored admission.Program) admission.Program {
	change.CreatedAt, change.Issued, change.Shards, change.Recent = stored.CreatedAt, stored.Issued, stored.Shards, stored.Recent
	change.Prequeue, change.PrequeueFixed = stored.Prequeue, stored.PrequeueFixed
	return change
}

func testSchedule(t *testing.T, store queue.Store) {
	ctx := t.Context()
	s := struct {
		queue.Store
		queue.ScheduleStore
	}{store, store.(queue.ScheduleStore)}
	updated := func(t *testing.T, what string, p admission.Program, want int64) {
		t.Helper()
		if issued := answer(s.UpdateScheduled(ctx, p)).must(t, what); issued != want {
			t.Errorf("%s: %d tickets issued, want %d", what, issued, want)
		}
	}

	t.Run("lands through tickets, moves the drain once", func(t *testing.T) {
		change, flooded := slowedRig(t, s, "schedule-lands")
		checkErr(t, "UpdateProgram after tickets", s.UpdateProgram(ctx, change, change.Issued), queue.ErrConflict)

		updated(t, "UpdateScheduled", change, flooded.Issued)
		landed := landedOn(change, flooded)
		checkStoredProgram(t, s, landed)
		// A retry recognises its change and applies nothing, and reports the
		// tickets issued when the change landed, even after one more.
		updated(t, "UpdateScheduled repeated", change, flooded.Issued)
		checkStoredProgram(t, s, landed)
		checkErr(t, "IssueTicket", errOf(s.IssueTicket(ctx, change.ID, scheduleNow)), nil)
		updated(t, "UpdateScheduled repeated after a ticket", change, flooded.Issued)

		before := storedProgram(t, s, change.ID)
		move := change.ScheduledDrainAtNs(flooded.Issued) - change.DrainAtNs
		if move == 0 {
			t.Fatalf("the rig's tickets leave the drain instant where it was")
		}
		checkErr(t, "MoveDrain", s.MoveDrain(ctx, change, flooded.Issued), nil)
		moved := before
		moved.DrainAtNs += move
		checkStoredProgram(t, s, moved)
		if want := change.ScheduledDrainAtNs(before.Issued); moved.DrainAtNs != want {
			t.Errorf("drain instant %d after the move, want %d for %d tickets (%+d)", moved.DrainAtNs, want, before.Issued, moved.DrainAtNs-want)
		}
		checkErr(t, "MoveDrain repeated", s.MoveDrain(ctx, change, flooded.Issued), nil)
		checkStoredProgram(t, s, moved)
		// Both writes retried after the move: together they change nothing.
		issued := answer(s.UpdateScheduled(ctx, change)).must(t, "UpdateScheduled repeated after the move")
		checkErr(t, "MoveDrain after that", s.MoveDrain(ctx, change, issued), nil)
		checkStoredProgram(t, s, moved)
	})

	t.Run("moves the drain to the end of int64, not past it", func(t *testing.T) {
		change, flooded := scheduleRig(t, s, nearSaturation(), 1)
		updated(t, "UpdateScheduled", change, flooded.Issued)
		// A ticket between the writes leaves less room than the move.
		checkErr(t, "IssueTicket", errOf(s.IssueTicket(ctx, change.ID, scheduleNow)), nil)
		before := storedProgram(t, s, change.ID)
		if move := change.ScheduledDrainAtNs(flooded.Issued) - change.DrainAtNs; before.DrainAtNs <= math.MaxInt64-move {
			t.Fatalf("drain instant %d stored, moved by %d it stays within int64", before.DrainAtNs, move)
		}
		checkErr(t, "MoveDrain", s.MoveDrain(ctx, change, flooded.Issued), nil)
		moved := before
		moved.DrainAtNs = math.MaxInt64
		checkStoredProgram(t, s, moved)
	})

	t.Run("ErrConflict", func(t *testing.T) {
		for i, tc := range []struct {
			name    string
			edit    func(p *admission.Program)
			landed  bool // another change landed first
			missing bool // a program never created
		}{
			{name: "stale version", edit: func(p *admission.Program) { p.Version-- }},
			{name: "version ahead", edit: func(p *admission.Program) { p.Version++ }},
			{name: "another change at the version", landed: true, edit: func(p *admission.Program) { p.Changes[0] = "4/change-other" }},
			{name: "no change id at the version", landed: true, edit: func(p *admission.Program) { p.Changes = nil }},
			{name: "missing program", missing: true},
		} {
			t.Run(tc.name, func(t *testing.T) {
				change, flooded := slowedRig(t, s, fmt.Sprintf("schedule-conflict-%d", i))
				want := flooded
				if tc.landed {
					updated(t, "UpdateScheduled of the first change", change, flooded.Issued)
					want = landedOn(change, flooded)
				}
				p := change
				p.Changes = append([]string(nil), p.Changes...)
				p.Current.Rate, p.DrainAtNs = perSecond(7), p.DrainAtNs+1
				if tc.missing {
					p.ID = p.ID + "-missing"
				}
				if tc.edit != nil {
					tc.edit(&p)
				}
				checkErr(t, "UpdateScheduled", errOf(s.UpdateScheduled(ctx, p)), queue.ErrConflict)
				checkStoredProgram(t, s, want)
				if tc.missing {
					checkNoProgram(t, s, p.ID, "UpdateScheduled")
				}
			})
		}
	})

	t.Run("MoveDrain of another count or version", func(t *testing.T) {
		change, flooded := slowedRig(t, s, "schedule-superseded")
		updated(t, "UpdateScheduled", change, flooded.Issued)
		landed := landedOn(change, flooded)
		checkErr(t, "MoveDrain of another count", s.MoveDrain(ctx, change, flooded.Issued-1), nil)
		checkStoredProgram(t, s, landed)
		// A later change sets the drain instant afresh: the move is superseded.
		later := landed
		later.Version++
		later.Next, later.DrainAtNs = pace.Segment{}, landed.DrainAtNs+5e9
		later.Changes = append([]string{fmt.Sprintf("%d/change-later", later.Version)}, landed.Changes...)
		checkErr(t, "UpdateProgram", s.UpdateProgram(ctx, later, later.Issued), nil)
		checkErr(t, "MoveDrain of the superseded change", s.MoveDrain(ctx, change, flooded.Issued), nil)
		checkStoredProgram(t, s, later)
	})
}

// testCatalog holds the list of programs, their deletion and their history.
func testCatalog(t *testing.T, s queue.Store) {
	ctx := t.Context()
	ids := []string{"c-delta", "c-alpha", "c-charlie", "c-bravo", "c-echo"}
	for _, id := range append(ids, "c-alpha") { // c-alpha again: listed already
		checkErr(t, "IndexProgram "+id, s.IndexProgram(ctx, id), nil)
	}
	listed := paged(t, "ListPrograms", 2, func(after string) ([]string, bool, error) {
		return s.ListPrograms(ctx, after, 2)
	}, func(id string) string { return id })
	check(t, "the list, paged by 2", listed, []string{"c-alpha", "c-bravo", "c-charlie", "c-delta", "c-echo"})

	// Deleting: only the version read; then the id is taken.
	p := program("c-charlie")
	create(t, s, p)
	closed := p
	closed.Version, closed.Closed = p.Version+1, true
	checkErr(t, "UpdateProgram", s.UpdateProgram(ctx, closed, p.Issued), nil)
	checkErr(t, "DeleteProgram of an older version", s.DeleteProgram(ctx, p, t0.Add(time.Hour)), queue.ErrConflict)
	checkStoredProgram(t, s, closed) // a refused delete keeps the program
	checkErr(t, "DeleteProgram", s.DeleteProgram(ctx, closed, t0.Add(time.Hour)), nil)
	checkNoProgram(t, s, p.ID, "the delete")
	checkErr(t, "DeleteProgram again (a retry)", s.DeleteProgram(ctx, closed, t0.Add(time.Hour)), nil)
	page, _, err := s.ListPrograms(ctx, "c-bravo", 10)
	checkErr(t, "ListPrograms after the delete", err, nil)
	check(t, "ListPrograms after the delete", page, []string{"c-delta", "c-echo"})
	again := program("c-charlie")
	again.CreatedAt = t0.Add(time.Hour - time.Millisecond)
	checkErr(t, "CreateProgram before the id is free", s.CreateProgram(ctx, again), queue.ErrDeleted)
	again.CreatedAt = t0.Add(time.Hour)
	checkErr(t, "CreateProgram once the id is free", s.CreateProgram(ctx, again), nil)
	checkStoredProgram(t, s, again)

	testChanges(t, s)
}

// testChanges holds a program's history: replaced by key, committed, paged newest first.
func testChanges(t *testing.T, s queue.Store) {
	ctx := t.Context()
	const id = "c-history"
	change := func(i int) history.Change {
		return history.Change{
			ID: queue.NewTokenID(), At: t0.Add(time.Duration(i/2) * time.Millisecond), // pairs share an instant
			Actor: "arn:aws:iam::123456789012:user/ops", Action: history.ActionUpdate,
			Fields: json.RawMessage(fmt.Sprintf(`{"message":"change %d"}`, i)), Version: int64(i + 1),
		}
	}
	var all []history.Change
	for i := range 7 {
		c := change(i)
		if i == 3 {
			c.EffectiveAt = c.At.Add(2 * time.Second)
		}
		checkErr(t, "PutChange", s.PutChange(ctx, id, c), nil)
		all = append(all, c)
	}
	// A put again replaces; a commit marks; a commit of nothing is nil.
	all[2].Fields, all[2].Version = json.RawMessage(`{"paused":true}`), 30
	checkErr(t, "PutChange again", s.PutChange(ctx, id, all[2]), nil)
	for _, i := range []int{1, 2} {
		checkErr(t, "CommitChange", s.CommitChange(ctx, id, all[i].At, all[i].ID), nil)
		all[i].Committed = true
	}
	checkErr(t, "CommitChange of no change", s.CommitChange(ctx, id, t0, queue.NewTokenID()), nil)
	checkErr(t, "PutChange of another program", s.PutChange(ctx, "c-other", change(9)), nil)
	newestFirst := slices.Clone(all)
	slices.SortFunc(newestFirst, func(a, b history.Change) int {
		return cmp.Or(b.At.Compare(a.At), strings.Compare(b.ID, a.ID))
	})
	got := paged(t, "Changes", 3, func(from history.Key) ([]history.Change, bool, error) {
		return s.Changes(ctx, id, from, 3)
	}, history.Change.Key)
	check(t, "the history, paged by 3", got, newestFirst)
}
