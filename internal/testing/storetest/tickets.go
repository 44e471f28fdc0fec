package storetest

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/example/waitingroom/internal/admission"
	"github.com/example/waitingroom/internal/pace"
	"github.com/example/waitingroom/internal/queue"
	"github.com/example/waitingroom/internal/settings"
	"github.com/example/waitingroom/internal/tickets"
)

// testIssueTickets: a block of n tickets leaves the program as n single
// tickets would (WithTicketsIssued), in every state, and after the time per
// ticket changed.
func testIssueTickets(t *testing.T, s tickets.Store) {
	ctx := t.Context()
	store := s.(queue.Store)
	now := t0.Add(ms(10_345) + 678*time.Microsecond)
	steps := []time.Time{now, now.Add(time.Microsecond), now.Add(time.Hour), now.Add(time.Hour + time.Millisecond)}
	issueInStates(t, store, "block", now, s.IssueTickets, steps, 50, 2, 300, 1)

	t.Run("time per ticket changed since last seen", func(t *testing.T) {
		p := program("block-rate")
		create(t, store, p)
		issueSteps(t, store, p, s.IssueTickets, []time.Time{now}, 10)
		upd := p.WithTicketsIssued(now, 10).Rebased(now, perSecond(7), false, 0, 0)
		checkErr(t, "UpdateProgram", store.UpdateProgram(ctx, upd, upd.Issued), nil)
		issueSteps(t, store, upd, s.IssueTickets, []time.Time{now.Add(ms(1))}, 25)
	})

	t.Run("ErrClosed and ErrNotFound", func(t *testing.T) {
		p := program("block-closed")
		p.Closed = true
		create(t, store, p)
		checkErr(t, "IssueTickets on a closed program", errOf(s.IssueTickets(ctx, p.ID, now, 40)), queue.ErrClosed)
		checkStoredProgram(t, store, p)
		checkErr(t, "IssueTickets on a missing program", errOf(s.IssueTickets(ctx, "missing", now, 40)), queue.ErrNotFound)
	})
}

// testIssueTicketsConcurrent: blocks issued at once never overlap, and
// together they are every ticket.
func testIssueTicketsConcurrent(t *testing.T, s tickets.Store) {
	store := s.(queue.Store)
	now := t0.Add(time.Minute)
	p := admission.Program{ID: "blocks", CreatedAt: t0, Version: 2, Current: pace.Segment{AnchorMs: t0.UnixMilli(), Rate: perSecond(1000)}, DrainAtNs: now.UnixNano() - 1e6, Options: settings.Options{AdmissionWindow: time.Minute}}
	create(t, store, p)
	var mu sync.Mutex
	var held []int64
	var total int64
	inParallel(concurrentReanchors, func(i int) {
		n := int64(1 + i%7*5) // 1, 6, 11, …, 31
		q, err := s.IssueTickets(t.Context(), p.ID, now, n)
		if err != nil {
			t.Errorf("IssueTickets(%d): %v", n, err)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		total += n
		for tk := q.Issued - n + 1; tk <= q.Issued; tk++ {
			held = append(held, tk)
		}
	})
	checkEach(t, "tickets issued in blocks", held, 1, total)
	got := storedProgram(t, store, p.ID)
	if want := p.WithTicketsIssued(now, total); got.Issued != total || got.DrainAtNs != want.DrainAtNs || got.Current != want.Current {
		t.Errorf("after %d tickets in blocks: %+v, want %+v", total, got, want)
	}
}

// checkEach stops the test unless got, in any order, is each of first..last once.
func checkEach(t *testing.T, what string, got []int64, first, last int64) {
	t.Helper()
	slices.Sort(got)
	if int64(len(got)) != last-first+1 {
		t.Fatalf("%s: %d numbers, want each of %d..%d once", what, len(got), first, last)
	}
	for i, n := range got {
		if n != first+int64(i) {
			t.Fatalf("%s: sorted [%d] = %d, want each of %d..%d once", what, i, n, first, last)
		}
	}
}

// testShards: the life of a ticket shard, step by step.
func testShards(t *testing.T, s tickets.Store) {
	ctx := t.Context()
	now := t0.Add(time.Minute)
	fresh, claimLapse := now.Add(-tickets.BlockLifetime), now.Add(-time.Second)
	// claim claims shard 3; fill fills it; take takes one number of shard i (0: none).
	claim := func(what, c string, at, notBefore, claimNotBefore time.Time, want bool) tickets.Shard {
		t.Helper()
		old, ok, err := s.ClaimShard(ctx, "p", 3, c, at, notBefore, claimNotBefore)
		checkOK(t, what, ok, err, want)
		return old
	}
	fill := func(what, c string, at time.Time, b tickets.Shard, want bool) {
		t.Helper()
		checkCall(t, what, answer(s.FillShard(ctx, "p", 3, c, at, b)), want)
	}
	take := func(what string, i int, notBefore time.Time, want int64) {
		t.Helper()
		r, ok, err := s.TakeShardTickets(ctx, "p", i, notBefore, 1)
		if err != nil || ok != (want != 0) || ok && (r.First != want || r.Last != want || r.ReservedAt.IsZero()) {
			t.Fatalf("%s: %+v ok=%v %v; want %d", what, r, ok, err, want)
		}
	}

	take("TakeShardTicket on a shard never filled", 3, fresh, 0)
	old := claim("first ClaimShard", "claim-a", now, fresh, claimLapse, true)
	check(t, "first ClaimShard", old, tickets.Shard{})
	claim("ClaimShard by another while claimed", "claim-b", now.Add(ms(5)), fresh, claimLapse, false)
	claim("ClaimShard again by the same claim (a retry)", "claim-a", now, fresh, claimLapse, true)
	block := tickets.Shard{Start: 101, Next: 102, End: 104, ReservedAt: now}
	fill("FillShard by a claim that does not hold it", "claim-b", now, block, false)
	fill("FillShard", "claim-a", now, block, true)
	fill("FillShard twice (a fill never applies twice)", "claim-a", now, tickets.Shard{Start: 1, Next: 1, End: 9, ReservedAt: now}, false)
	// The same fill again (a retry): true, and the block goes on where it was.
	take("TakeShardTicket", 3, fresh, 102)
	fill("the same FillShard again (it was applied)", "claim-a", now, block, true)
	claim("ClaimShard on a usable block", "claim-c", now.Add(ms(1)), fresh, claimLapse, false)
	take("TakeShardTicket on another shard", 4, fresh, 0)
	take("TakeShardTicket", 3, fresh, 103)
	take("TakeShardTicket", 3, fresh, 104)
	take("TakeShardTicket on a used-up block", 3, fresh, 0)
	later := now.Add(ms(10))
	old = claim("ClaimShard on a used-up block", "claim-d", later, later.Add(-tickets.BlockLifetime), later.Add(-time.Second), true)
	if want := (tickets.Shard{Start: 101, Next: 105, End: 104, ReservedAt: now, Takes: 3}); old.Start != want.Start || old.Next != want.Next || old.End != want.End || old.Takes != want.Takes || !old.ReservedAt.Equal(want.ReservedAt) {
		t.Fatalf("ClaimShard on a used-up block: %+v; want the old block %+v", old, want)
	}
	fill("second FillShard", "claim-d", later, tickets.Shard{Start: 200, Next: 200, End: 207, ReservedAt: later}, true)
	// Several numbers a take: as many as asked, fewer when fewer are left.
	for _, want := range []tickets.Run{{First: 200, Last: 202}, {First: 203, Last: 205}, {First: 206, Last: 207}} {
		r, ok, err := s.TakeShardTickets(ctx, "p", 3, later.Add(-tickets.BlockLifetime), 3)
		if err != nil || !ok || r.First != want.First || r.Last != want.Last || !r.ReservedAt.Equal(later) {
			t.Fatalf("TakeShardTickets(3): %+v ok=%v %v; want %d..%d reserved at %v", r, ok, err, want.First, want.Last, later)
		}
	}
	_, ok, err := s.TakeShardTickets(ctx, "p", 3, later.Add(-tickets.BlockLifetime), 3)
	checkOK(t, "TakeShardTickets on a used-up block", ok, err, false)
	old = claim("ClaimShard after three takes", "claim-g", later.Add(ms(1)), later.Add(-tickets.BlockLifetime), later.Add(-time.Second), true)
	if old.Takes != 3 || old.Start != 200 || old.End != 207 {
		t.Fatalf("ClaimShard after three takes: %+v; want the block 200..207 with 3 takes", old)
	}
	fill("third FillShard", "claim-g", later.Add(ms(1)), tickets.Shard{Start: 200, Next: 200, End: 201, ReservedAt: later}, true)
	// A block reserved before notBefore hands out nothing, and can be claimed.
	stale := later.Add(tickets.BlockLifetime + ms(1))
	take("TakeShardTicket on a stale block", 3, stale.Add(-tickets.BlockLifetime), 0)
	take("TakeShardTicket on the fresh block", 3, later.Add(-tickets.BlockLifetime), 200)
	old = claim("ClaimShard on a stale block", "claim-e", stale, stale.Add(-tickets.BlockLifetime), stale.Add(-time.Second), true)
	if old.Next != 201 || old.End != 201 {
		t.Fatalf("ClaimShard on a stale block: %+v; want it, Next 201", old)
	}
	// A claim that lapsed (its refiller gone) is taken over.
	claim("ClaimShard half a second into another's claim", "claim-f", stale.Add(ms(500)), stale, stale.Add(ms(500)-time.Second), false)
	claim("ClaimShard after another's claim lapsed", "claim-f", stale.Add(ms(1001)), stale, stale.Add(ms(1)), true)
	fill("FillShard by a lapsed claim", "claim-e", stale, tickets.Shard{Start: 300, Next: 300, End: 310, ReservedAt: stale}, false)
}

// testShardsConcurrent: takers racing for a block get each of its numbers
// once; of refillers racing for a used-up shard, exactly one claims it.
func testShardsConcurrent(t *testing.T, s tickets.Store) {
	now := t0.Add(time.Minute)
	fresh := now.Add(-tickets.BlockLifetime)
	const size = concurrentReanchors
	fillShard(t, s, "race", 0, now, tickets.Shard{Start: 1, Next: 1, End: size, ReservedAt: now})
	var mu sync.Mutex
	var got []int64
	var misses atomic.Int32
	var errs []error
	inParallel(size+size/2, func(int) {
		r, ok, err := s.TakeShardTickets(t.Context(), "race", 0, fresh, 1)
		mu.Lock()
		defer mu.Unlock()
		switch {
		case err != nil || ok && (r.First != r.Last || r.ReservedAt.IsZero()):
			errs = append(errs, fmt.Errorf("TakeShardTickets(1): %+v, %w", r, err))
		case !ok:
			misses.Add(1)
		default:
			got = append(got, r.First)
		}
	})
	if err := errors.Join(errs...); err != nil || misses.Load() != size/2 {
		t.Fatalf("%d takers of a block of %d: %d misses, %v", size+size/2, size, misses.Load(), err)
	}
	checkEach(t, "numbers taken", got, 1, size)
	oneWins(t, "refillers' ClaimShard", concurrentMarks, func(i int) (bool, error) {
		_, ok, err := s.ClaimShard(t.Context(), "race", 0, fmt.Sprintf("refiller-%d", i), now.Add(ms(1)), fresh, fresh)
		return ok, err
	})
}

// testSetShards: the shard count changes only from the value expected, and
// nothing else with it.
func testSetShards(t *testing.T, s tickets.Store) {
	store := s.(queue.Store)
	p := program("set-shards")
	create(t, store, p)
	for _, step := range []struct {
		what     string
		id       string
		from, to int
		want     bool
	}{
		{"SetShards from a wrong count", p.ID, 2, 5, false},
		{"SetShards(0→5)", p.ID, 0, 5, true},
		{"SetShards(0→5) again, as a retry after a lost answer (the count is 5)", p.ID, 0, 5, true},
		{"SetShards(5→0)", p.ID, 5, 0, true},
		{"SetShards on a missing program", "missing", 0, 5, false},
	} {
		checkCall(t, step.what, answer(s.SetShards(t.Context(), step.id, step.from, step.to)), step.want)
		if step.id == p.ID && step.want {
			p.Shards = step.to
		}
		checkStoredProgram(t, store, p)
	}
	checkNoProgram(t, store, "missing", "SetShards")
}

// fillShard claims shard i of program id, never claimed, and fills it with b.
func fillShard(t *testing.T, s tickets.Store, id string, i int, at time.Time, b tickets.Shard) {
	t.Helper()
	_, ok, err := s.ClaimShard(t.Context(), id, i, "filler", at, at.Add(-tickets.BlockLifetime), at.Add(-time.Second))
	checkOK(t, fmt.Sprintf("ClaimShard(%d)", i), ok, err, true)
	checkCall(t, fmt.Sprintf("FillShard(%d)", i), answer(s.FillShard(t.Context(), id, i, "filler", at, b)), true)
}

// testTrimShard: a block is trimmed once, only the block named, from its
// next number; a take's numbers come back with it if nobody took after them.
func testTrimShard(t *testing.T, s tickets.Store) {
	ctx := t.Context()
	now := t0.Add(time.Minute)
	fresh := now.Add(-tickets.BlockLifetime)
	takeRun := func(i int, m int64) tickets.Run {
		t.Helper()
		r, ok, err := s.TakeShardTickets(ctx, "p", i, fresh, m)
		checkOK(t, fmt.Sprintf("TakeShardTickets(%d, %d)", i, m), ok, err, true)
		return r
	}
	trim := func(i int, start int64, at time.Time, back tickets.Run, want tickets.Run, wantOK bool) {
		t.Helper()
		got, ok, err := s.TrimShard(ctx, "p", i, start, at, back)
		if err != nil || ok != wantOK || ok && (got.First != want.First || got.Last != want.Last) {
			t.Fatalf("TrimShard(%d, start %d, back %d..%d): %d..%d ok=%v %v; want %d..%d ok=%v", i, start, back.First, back.Last, got.First, got.Last, ok, err, want.First, want.Last, wantOK)
		}
	}

	_, ok, err := s.TrimShard(ctx, "p", 1, 1, now, tickets.Run{})
	checkOK(t, "TrimShard on a shard never filled", ok, err, false)
	// A plain trim: the numbers not handed out, once.
	fillShard(t, s, "p", 1, now, tickets.Shard{Start: 100, Next: 100, End: 119, ReservedAt: now})
	if r := takeRun(1, 3); r.First != 100 || r.Last != 102 || r.Block != 100 || r.After != 103 {
		t.Fatalf("TakeShardTickets(3): %+v; want 100..102 of block 100, next 103", r)
	}
	trim(1, 101, now, tickets.Run{}, tickets.Run{}, false)            // another block
	trim(1, 100, now.Add(ms(1)), tickets.Run{}, tickets.Run{}, false) // reserved at another instant
	trim(1, 100, now, tickets.Run{}, tickets.Run{First: 103, Last: 119}, true)
	trim(1, 100, now, tickets.Run{}, tickets.Run{}, false) // nothing left
	_, ok, err = s.TakeShardTickets(ctx, "p", 1, fresh, 1)
	checkOK(t, "TakeShardTickets after a trim (used up)", ok, err, false)

	// A take given back: only when nobody took after it.
	fillShard(t, s, "p", 2, now, tickets.Shard{Start: 200, Next: 200, End: 229, ReservedAt: now})
	mine := takeRun(2, 5)
	mine.First++ // the first number went to an enter; 201..204 are left
	trim(2, 200, now, mine, tickets.Run{First: 201, Last: 229}, true)
	fillShard(t, s, "p", 3, now, tickets.Shard{Start: 300, Next: 300, End: 329, ReservedAt: now})
	mine = takeRun(3, 5)
	takeRun(3, 2) // another instance's take: 305, 306
	trim(3, 300, now, mine, tickets.Run{First: 307, Last: 329}, true)
	// A take cut short at the block's end, given back.
	fillShard(t, s, "p", 4, now, tickets.Shard{Start: 400, Next: 400, End: 409, ReservedAt: now})
	takeRun(4, 6)
	mine = takeRun(4, 6)
	if mine.First != 406 || mine.Last != 409 || mine.After != 412 {
		t.Fatalf("TakeShardTickets past the end: %+v; want 406..409, next 412", mine)
	}
	trim(4, 400, now, mine, tickets.Run{First: 406, Last: 409}, true)
	trim(4, 400, now, mine, tickets.Run{}, false) // a repeated give-back retires nothing
}

// testReturnTickets: tickets given back leave the program as
// WithTicketsReturned says, only from the program as the caller read it.
func testReturnTickets(t *testing.T, s tickets.Store) {
	ctx := t.Context()
	store := s.(queue.Store)
	p := program("return")
	create(t, store, p)
	stale := p
	stale.Version--
	checkCall(t, "ReturnTickets from an older version", answer(s.ReturnTickets(ctx, stale, 35)), false)
	checkCall(t, "ReturnTickets(35)", answer(s.ReturnTickets(ctx, p, 35)), true)
	want := p.WithTicketsReturned(35)
	if want.Issued != 34 || want.Version != p.Version+1 || want.DrainAtNs >= p.DrainAtNs {
		t.Fatalf("WithTicketsReturned(35) of %+v: %+v; want 34 issued, the version bumped, an earlier drain", p, want)
	}
	checkStoredProgram(t, store, want)
	checkCall(t, "ReturnTickets again (a repeat never applies)", answer(s.ReturnTickets(ctx, p, 35)), false)
	got, err := s.IssueTickets(ctx, p.ID, t0.Add(ms(2000)), 3)
	if err != nil || got.Issued != 37 {
		t.Fatalf("IssueTickets(3) after the return: issued %d, %v; want 35..37 handed out again", got.Issued, err)
	}
	moved := got
	moved.Issued = 36 // read before the last ticket
	checkCall(t, "ReturnTickets below the top", answer(s.ReturnTickets(ctx, moved, 36)), false)
	// A pre-queue fixed since the caller read the program.
	q := program("return-opened")
	q.OpensAt, q.Shuffle, q.ShuffleNonce = t0.Add(time.Second), true, "cd"
	create(t, store, q)
	checkErr(t, "FixPrequeue", errOf(s.(queue.PrequeueStore).FixPrequeue(ctx, q.ID, t0.Add(2*time.Second))), nil)
	checkCall(t, "ReturnTickets after the pre-queue was fixed", answer(s.ReturnTickets(ctx, q, 40)), false)
}
