package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/example/waitingroom/internal/queue"
	"github.com/example/waitingroom/internal/tickets"
)

// testIssueTickets: a block of n tickets leaves the program as n single
// tickets would (Program.WithTicketsIssued), in every state a single
// ticket is tested in, and after the time per ticket changed under the
// store's feet.
func testIssueTickets(t *testing.T, s tickets.Store) {
	ctx := t.Context()
	store := s.(queue.Store)
	now := t0.Add(ms(10_345) + 678*time.Microsecond)
	for i, tc := range programStates(now) {
		t.Run(tc.name, func(t *testing.T) {
			p := program(fmt.Sprintf("block-%d", i))
			tc.edit(&p)
			if err := store.CreateProgram(ctx, p); err != nil {
				t.Fatalf("CreateProgram: %v", err)
			}
			want := p
			for _, step := range []struct {
				at time.Time
				n  int64
			}{{now, 50}, {now.Add(time.Microsecond), 2}, {now.Add(time.Hour), 300}, {now.Add(time.Hour + time.Millisecond), 1}} {
				got, err := s.IssueTickets(ctx, p.ID, step.at, step.n)
				if err != nil {
					t.Fatalf("IssueTickets(%d): %v", step.n, err)
				}
				want = want.WithTicketsIssued(step.at, step.n)
				checkProgram(t, fmt.Sprintf("IssueTickets(%d) at %v", step.n, step.at), got, want)
			}
			checkStoredProgram(t, store, want)
		})
	}

	t.Run("time per ticket changed since last seen", func(t *testing.T) {
		p := program("block-rate")
		if err := store.CreateProgram(ctx, p); err != nil {
			t.Fatal(err)
		}
		want := p.WithTicketsIssued(now, 10)
		if _, err := s.IssueTickets(ctx, p.ID, now, 10); err != nil {
			t.Fatal(err)
		}
		upd := want.Rebased(now, perSecond(7), false, 0, 0)
		if err := store.UpdateProgram(ctx, upd, want.Issued); err != nil {
			t.Fatal(err)
		}
		got, err := s.IssueTickets(ctx, p.ID, now.Add(ms(1)), 25)
		if err != nil {
			t.Fatal(err)
		}
		checkProgram(t, "IssueTickets after a rate change", got, upd.WithTicketsIssued(now.Add(ms(1)), 25))
	})

	t.Run("ErrClosed and ErrNotFound", func(t *testing.T) {
		p := program("block-closed")
		p.Closed = true
		if err := store.CreateProgram(ctx, p); err != nil {
			t.Fatal(err)
		}
		_, err := s.IssueTickets(ctx, p.ID, now, 40)
		checkErr(t, "IssueTickets on a closed program", err, queue.ErrClosed)
		checkStoredProgram(t, store, p)
		_, err = s.IssueTickets(ctx, "missing", now, 40)
		checkErr(t, "IssueTickets on a missing program", err, queue.ErrNotFound)
	})
}

// testIssueTicketsConcurrent: blocks and single tickets issued at once
// never overlap, and together they are every ticket.
func testIssueTicketsConcurrent(t *testing.T, s tickets.Store) {
	ctx := t.Context()
	store := s.(queue.Store)
	now := t0.Add(time.Minute)
	p := queue.Program{ID: "blocks", CreatedAt: t0, Version: 2, Current: queue.Segment{AnchorMs: t0.UnixMilli(), Rate: perSecond(1000)}, DrainAtNs: unixNs(now) - 1e6, Options: queue.Options{AdmissionWindow: time.Minute}}
	if err := store.CreateProgram(ctx, p); err != nil {
		t.Fatal(err)
	}
	const calls = concurrentReanchors
	var mu sync.Mutex
	var held []int64
	var total int64
	inParallel(calls, func(i int) {
		n := int64(1 + i%7*5) // 1, 6, 11, …, 31
		q, err := s.IssueTickets(ctx, p.ID, now, n)
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
	slices.Sort(held)
	for i, tk := range held {
		if tk != int64(i)+1 {
			t.Fatalf("sorted tickets[%d] = %d: blocks overlap or skip (want each of 1..%d once)", i, tk, total)
		}
	}
	got, err := store.GetProgram(ctx, p.ID)
	if err != nil {
		t.Fatal(err)
	}
	if want := p.WithTicketsIssued(now, total); got.Issued != total || got.DrainAtNs != want.DrainAtNs || got.Current != want.Current {
		t.Errorf("after %d tickets in blocks: %+v, want %+v", total, got, want)
	}
}

// take1 takes one number from a shard.
func take1(ctx context.Context, s tickets.Store, id string, i int, notBefore time.Time) (int64, bool, error) {
	r, ok, err := s.TakeShardTickets(ctx, id, i, notBefore, 1)
	if ok && (r.First != r.Last || r.ReservedAt.IsZero()) {
		return 0, false, fmt.Errorf("a take of one number answered %+v", r)
	}
	return r.First, ok, err
}

// testShards: the life of a ticket shard, step by step.
func testShards(t *testing.T, s tickets.Store) {
	ctx := t.Context()
	now := t0.Add(time.Minute)
	fresh, claimLapse := now.Add(-tickets.BlockLifetime), now.Add(-time.Second)

	if _, ok, err := take1(ctx, s, "p", 3, fresh); err != nil || ok {
		t.Fatalf("TakeShardTicket on a shard never filled: ok=%v, %v; want false", ok, err)
	}
	old, ok, err := s.ClaimShard(ctx, "p", 3, "claim-a", now, fresh, claimLapse)
	if err != nil || !ok || old != (tickets.Shard{}) {
		t.Fatalf("first ClaimShard: %+v ok=%v %v; want the zero shard, true", old, ok, err)
	}
	if _, ok, err := s.ClaimShard(ctx, "p", 3, "claim-b", now.Add(ms(5)), fresh, claimLapse); err != nil || ok {
		t.Fatalf("ClaimShard by another while claimed: ok=%v %v; want false", ok, err)
	}
	if _, ok, err := s.ClaimShard(ctx, "p", 3, "claim-a", now, fresh, claimLapse); err != nil || !ok {
		t.Fatalf("ClaimShard again by the same claim (a retry): ok=%v %v; want true", ok, err)
	}
	block := tickets.Shard{Start: 101, Next: 102, End: 104, ReservedAt: now}
	if ok, err := s.FillShard(ctx, "p", 3, "claim-b", now, block); err != nil || ok {
		t.Fatalf("FillShard by a claim that does not hold it: ok=%v %v; want false", ok, err)
	}
	if ok, err := s.FillShard(ctx, "p", 3, "claim-a", now, block); err != nil || !ok {
		t.Fatalf("FillShard: ok=%v %v; want true", ok, err)
	}
	if ok, err := s.FillShard(ctx, "p", 3, "claim-a", now, tickets.Shard{Start: 1, Next: 1, End: 9, ReservedAt: now}); err != nil || ok {
		t.Fatalf("FillShard twice: ok=%v %v; want false (a fill never applies twice)", ok, err)
	}
	// The same fill again, as the retry of a fill whose answer was lost:
	// true, and the block goes on from where it was.
	if got, ok, err := take1(ctx, s, "p", 3, fresh); err != nil || !ok || got != 102 {
		t.Fatalf("TakeShardTicket: %d ok=%v %v; want 102", got, ok, err)
	}
	if ok, err := s.FillShard(ctx, "p", 3, "claim-a", now, block); err != nil || !ok {
		t.Fatalf("the same FillShard again: ok=%v %v; want true (it was applied)", ok, err)
	}
	if _, ok, err := s.ClaimShard(ctx, "p", 3, "claim-c", now.Add(ms(1)), fresh, claimLapse); err != nil || ok {
		t.Fatalf("ClaimShard on a usable block: ok=%v %v; want false", ok, err)
	}
	if _, ok, err := take1(ctx, s, "p", 4, fresh); err != nil || ok {
		t.Fatalf("TakeShardTicket on another shard: ok=%v %v; want false", ok, err)
	}
	for _, want := range []int64{103, 104} {
		got, ok, err := take1(ctx, s, "p", 3, fresh)
		if err != nil || !ok || got != want {
			t.Fatalf("TakeShardTicket: %d ok=%v %v; want %d", got, ok, err, want)
		}
	}
	if _, ok, err := take1(ctx, s, "p", 3, fresh); err != nil || ok {
		t.Fatalf("TakeShardTicket on a used-up block: ok=%v %v; want false", ok, err)
	}
	later := now.Add(ms(10))
	old, ok, err = s.ClaimShard(ctx, "p", 3, "claim-d", later, later.Add(-tickets.BlockLifetime), later.Add(-time.Second))
	if want := (tickets.Shard{Start: 101, Next: 105, End: 104, ReservedAt: now, Takes: 3, Claim: "claim-a"}); err != nil || !ok || old.Start != want.Start || old.Next != want.Next || old.End != want.End || old.Takes != want.Takes || !old.ReservedAt.Equal(want.ReservedAt) {
		t.Fatalf("ClaimShard on a used-up block: %+v ok=%v %v; want the old block %+v", old, ok, err, want)
	}
	if ok, err := s.FillShard(ctx, "p", 3, "claim-d", later, tickets.Shard{Start: 200, Next: 200, End: 207, ReservedAt: later}); err != nil || !ok {
		t.Fatalf("second FillShard: ok=%v %v", ok, err)
	}
	// Several numbers a take: as many as asked, fewer when fewer are left.
	for _, want := range []tickets.Run{{First: 200, Last: 202}, {First: 203, Last: 205}, {First: 206, Last: 207}} {
		r, ok, err := s.TakeShardTickets(ctx, "p", 3, later.Add(-tickets.BlockLifetime), 3)
		if err != nil || !ok || r.First != want.First || r.Last != want.Last || !r.ReservedAt.Equal(later) {
			t.Fatalf("TakeShardTickets(3): %+v ok=%v %v; want %d..%d reserved at %v", r, ok, err, want.First, want.Last, later)
		}
	}
	if _, ok, err := s.TakeShardTickets(ctx, "p", 3, later.Add(-tickets.BlockLifetime), 3); err != nil || ok {
		t.Fatalf("TakeShardTickets on a used-up block: ok=%v %v; want false", ok, err)
	}
	old, ok, err = s.ClaimShard(ctx, "p", 3, "claim-g", later.Add(ms(1)), later.Add(-tickets.BlockLifetime), later.Add(-time.Second))
	if err != nil || !ok || old.Takes != 3 || old.Start != 200 || old.End != 207 {
		t.Fatalf("ClaimShard after three takes: %+v ok=%v %v; want the block 200..207 with 3 takes", old, ok, err)
	}
	if ok, err := s.FillShard(ctx, "p", 3, "claim-g", later.Add(ms(1)), tickets.Shard{Start: 200, Next: 200, End: 201, ReservedAt: later}); err != nil || !ok {
		t.Fatalf("third FillShard: ok=%v %v", ok, err)
	}
	// Stale: a block reserved before notBefore hands out nothing, and can
	// be claimed though not used up.
	stale := later.Add(tickets.BlockLifetime + ms(1))
	if _, ok, err := take1(ctx, s, "p", 3, stale.Add(-tickets.BlockLifetime)); err != nil || ok {
		t.Fatalf("TakeShardTicket on a stale block: ok=%v %v; want false", ok, err)
	}
	if got, ok, err := take1(ctx, s, "p", 3, later.Add(-tickets.BlockLifetime)); err != nil || !ok || got != 200 {
		t.Fatalf("TakeShardTicket on the fresh block: %d ok=%v %v; want 200", got, ok, err)
	}
	old, ok, err = s.ClaimShard(ctx, "p", 3, "claim-e", stale, stale.Add(-tickets.BlockLifetime), stale.Add(-time.Second))
	if err != nil || !ok || old.Next != 201 || old.End != 201 {
		t.Fatalf("ClaimShard on a stale block: %+v ok=%v %v; want it, Next 201", old, ok, err)
	}
	// A claim that lapsed (its refiller gone) is taken over.
	if _, ok, err := s.ClaimShard(ctx, "p", 3, "claim-f", stale.Add(ms(500)), stale, stale.Add(ms(500)-time.Second)); err != nil || ok {
		t.Fatalf("ClaimShard half a second into another's claim: ok=%v %v; want false", ok, err)
	}
	if _, ok, err := s.ClaimShard(ctx, "p", 3, "claim-f", stale.Add(ms(1001)), stale, stale.Add(ms(1))); err != nil || !ok {
		t.Fatalf("ClaimShard after another's claim lapsed: ok=%v %v; want true", ok, err)
	}
	if ok, err := s.FillShard(ctx, "p", 3, "claim-e", stale, tickets.Shard{Start: 300, Next: 300, End: 310, ReservedAt: stale}); err != nil || ok {
		t.Fatalf("FillShard by a lapsed claim: ok=%v %v; want false", ok, err)
	}
}

// testShardsConcurrent: takers racing for a block get each of its numbers
// once; refillers racing for a used-up shard: exactly one claims it.
func testShardsConcurrent(t *testing.T, s tickets.Store) {
	ctx := t.Context()
	now := t0.Add(time.Minute)
	fresh := now.Add(-tickets.BlockLifetime)
	if _, ok, err := s.ClaimShard(ctx, "race", 0, "filler", now, fresh, fresh); err != nil || !ok {
		t.Fatalf("ClaimShard: %v %v", ok, err)
	}
	const size = concurrentReanchors
	if ok, err := s.FillShard(ctx, "race", 0, "filler", now, tickets.Shard{Start: 1, Next: 1, End: size, ReservedAt: now}); err != nil || !ok {
		t.Fatalf("FillShard: %v %v", ok, err)
	}
	var mu sync.Mutex
	var got []int64
	var misses atomic.Int32
	inParallel(size+size/2, func(int) {
		tk, ok, err := take1(ctx, s, "race", 0, fresh)
		switch {
		case err != nil:
			t.Errorf("TakeShardTicket: %v", err)
		case !ok:
			misses.Add(1)
		default:
			mu.Lock()
			got = append(got, tk)
			mu.Unlock()
		}
	})
	slices.Sort(got)
	if len(got) != size || misses.Load() != size/2 {
		t.Fatalf("%d takers of a block of %d: %d numbers, %d misses", size+size/2, size, len(got), misses.Load())
	}
	for i, tk := range got {
		if tk != int64(i)+1 {
			t.Fatalf("sorted numbers[%d] = %d: each of 1..%d once", i, tk, size)
		}
	}
	var won atomic.Int32
	var errs []error
	inParallel(concurrentMarks, func(i int) {
		_, ok, err := s.ClaimShard(ctx, "race", 0, fmt.Sprintf("refiller-%d", i), now.Add(ms(1)), fresh, fresh)
		if ok {
			won.Add(1)
		}
		if err != nil {
			mu.Lock()
			errs = append(errs, err)
			mu.Unlock()
		}
	})
	if err := errors.Join(errs...); err != nil || won.Load() != 1 {
		t.Errorf("%d refillers: %d claimed the shard (%v), want exactly 1", concurrentMarks, won.Load(), err)
	}
}

// testSetShards: the shard count changes only from the value expected,
// and nothing else of the program with it.
func testSetShards(t *testing.T, s tickets.Store) {
	ctx := t.Context()
	store := s.(queue.Store)
	p := program("set-shards")
	if err := store.CreateProgram(ctx, p); err != nil {
		t.Fatal(err)
	}
	if ok, err := s.SetShards(ctx, p.ID, 2, 5); err != nil || ok {
		t.Fatalf("SetShards from a wrong count: ok=%v %v; want false", ok, err)
	}
	if ok, err := s.SetShards(ctx, p.ID, 0, 5); err != nil || !ok {
		t.Fatalf("SetShards(0→5): ok=%v %v; want true", ok, err)
	}
	p.Shards = 5
	checkStoredProgram(t, store, p)
	if ok, err := s.SetShards(ctx, p.ID, 0, 5); err != nil || !ok {
		t.Fatalf("SetShards(0→5) again, as a retry after a lost answer: ok=%v %v; want true (the count is 5)", ok, err)
	}
	checkStoredProgram(t, store, p)
	if ok, err := s.SetShards(ctx, p.ID, 5, 0); err != nil || !ok {
		t.Fatalf("SetShards(5→0): ok=%v %v; want true", ok, err)
	}
	p.Shards = 0
	checkStoredProgram(t, store, p)
	if ok, err := s.SetShards(ctx, "missing", 0, 5); err != nil || ok {
		t.Fatalf("SetShards on a missing program: ok=%v %v; want false", ok, err)
	}
	if _, err := store.GetProgram(ctx, "missing"); !errors.Is(err, queue.ErrNotFound) {
		t.Fatalf("SetShards created a program: %v", err)
	}
}

// testFixPrequeue: a shuffled program's pre-queue is fixed once, at or
// after its opening, to the tickets issued then.
func testFixPrequeue(t *testing.T, s queue.Store) {
	ctx := t.Context()
	ps := s.(queue.PrequeueStore)
	opens := t0.Add(time.Hour)
	p := program("prequeue")
	p.OpensAt, p.Shuffle, p.ShuffleNonce = opens, true, "cd"
	p.Current.StartMs, p.DrainAtNs = opens.UnixMilli(), unixNs(opens)+28*400e6
	plain := program("no-shuffle")
	plain.OpensAt = opens
	for _, q := range []queue.Program{p, plain} {
		if err := s.CreateProgram(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	fix := func(what, id string, at time.Time, want queue.Program) {
		t.Helper()
		got, err := ps.FixPrequeue(ctx, id, at)
		if err != nil {
			t.Fatalf("%s: FixPrequeue: %v", what, err)
		}
		checkProgram(t, what, got, want)
	}
	fix("before the opening: unchanged", p.ID, opens.Add(-ms(1)), p)
	fix("without a shuffle: unchanged", plain.ID, opens.Add(time.Second), plain)
	fixed := p.WithPrequeueFixed(opens)
	if fixed.Prequeue != 40 || !fixed.PrequeueFixed {
		t.Fatalf("WithPrequeueFixed: pre-queue %d (fixed %v), want the 40 tickets issued", fixed.Prequeue, fixed.PrequeueFixed)
	}
	fix("at the opening: fixed", p.ID, opens, fixed)
	if _, err := s.IssueTicket(ctx, p.ID, opens.Add(ms(1))); err != nil {
		t.Fatal(err)
	}
	fix("again later, with one more ticket: as fixed", p.ID, opens.Add(time.Minute), fixed.WithTicketIssued(opens.Add(ms(1))))
	if _, err := ps.FixPrequeue(ctx, "missing", opens); !errors.Is(err, queue.ErrNotFound) {
		t.Errorf("FixPrequeue of a missing program: %v, want ErrNotFound", err)
	}
}

// testTrimShard: a block is trimmed once, only the block named, before
// the number it would hand out next; a take's numbers are taken back with
// it when nobody took after them.
func testTrimShard(t *testing.T, s tickets.Store) {
	ctx := t.Context()
	now := t0.Add(time.Minute)
	fresh := now.Add(-tickets.BlockLifetime)
	fill := func(i int, claim string, b tickets.Shard) {
		t.Helper()
		if _, ok, err := s.ClaimShard(ctx, "p", i, claim, now, fresh, now.Add(-time.Second)); err != nil || !ok {
			t.Fatalf("ClaimShard(%d): ok=%v %v", i, ok, err)
		}
		if ok, err := s.FillShard(ctx, "p", i, claim, now, b); err != nil || !ok {
			t.Fatalf("FillShard(%d): ok=%v %v", i, ok, err)
		}
	}
	take := func(i int, m int64) tickets.Run {
		t.Helper()
		r, ok, err := s.TakeShardTickets(ctx, "p", i, fresh, m)
		if err != nil || !ok {
			t.Fatalf("TakeShardTickets(%d, %d): ok=%v %v", i, m, ok, err)
		}
		return r
	}
	trim := func(i int, start int64, at time.Time, back tickets.Run, want tickets.Run, wantOK bool) {
		t.Helper()
		got, ok, err := s.TrimShard(ctx, "p", i, start, at, back)
		if err != nil || ok != wantOK || ok && (got.First != want.First || got.Last != want.Last) {
			t.Fatalf("TrimShard(%d, start %d, back %d..%d): %d..%d ok=%v %v; want %d..%d ok=%v", i, start, back.First, back.Last, got.First, got.Last, ok, err, want.First, want.Last, wantOK)
		}
	}

	if _, ok, err := s.TrimShard(ctx, "p", 1, 1, now, tickets.Run{}); err != nil || ok {
		t.Fatalf("TrimShard on a shard never filled: ok=%v %v; want false", ok, err)
	}
	// A plain trim: the numbers not handed out, once.
	fill(1, "a", tickets.Shard{Start: 100, Next: 100, End: 119, ReservedAt: now})
	if r := take(1, 3); r.First != 100 || r.Last != 102 || r.Block != 100 || r.After != 103 {
		t.Fatalf("TakeShardTickets(3): %+v; want 100..102 of block 100, next 103", r)
	}
	trim(1, 101, now, tickets.Run{}, tickets.Run{}, false)            // another block
	trim(1, 100, now.Add(ms(1)), tickets.Run{}, tickets.Run{}, false) // reserved at another instant
	trim(1, 100, now, tickets.Run{}, tickets.Run{First: 103, Last: 119}, true)
	trim(1, 100, now, tickets.Run{}, tickets.Run{}, false) // nothing left
	if _, ok, err := s.TakeShardTickets(ctx, "p", 1, fresh, 1); err != nil || ok {
		t.Fatalf("TakeShardTickets after a trim: ok=%v %v; want false (used up)", ok, err)
	}

	// A take given back: only when nobody took after it.
	fill(2, "b", tickets.Shard{Start: 200, Next: 200, End: 229, ReservedAt: now})
	mine := take(2, 5)
	mine.First++ // the first number went to an enter; 201..204 are left
	trim(2, 200, now, mine, tickets.Run{First: 201, Last: 229}, true)
	fill(3, "c", tickets.Shard{Start: 300, Next: 300, End: 329, ReservedAt: now})
	mine = take(3, 5)
	take(3, 2) // another instance's take: 305, 306
	trim(3, 300, now, mine, tickets.Run{First: 307, Last: 329}, true)
	// A take cut short at the block's end, given back.
	fill(4, "d", tickets.Shard{Start: 400, Next: 400, End: 409, ReservedAt: now})
	take(4, 6)
	mine = take(4, 6)
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
	if err := store.CreateProgram(ctx, p); err != nil {
		t.Fatal(err)
	}
	stale := p
	stale.Version--
	if ok, err := s.ReturnTickets(ctx, stale, 35); err != nil || ok {
		t.Fatalf("ReturnTickets from an older version: ok=%v %v; want false", ok, err)
	}
	if ok, err := s.ReturnTickets(ctx, p, 35); err != nil || !ok {
		t.Fatalf("ReturnTickets(35): ok=%v %v; want true", ok, err)
	}
	want := p.WithTicketsReturned(35)
	if want.Issued != 34 || want.Version != p.Version+1 || want.DrainAtNs >= p.DrainAtNs {
		t.Fatalf("WithTicketsReturned(35) of %+v: %+v; want 34 issued, the version bumped, an earlier drain", p, want)
	}
	checkStoredProgram(t, store, want)
	if ok, err := s.ReturnTickets(ctx, p, 35); err != nil || ok {
		t.Fatalf("ReturnTickets again: ok=%v %v; want false (a repeat never applies)", ok, err)
	}
	got, err := s.IssueTickets(ctx, p.ID, t0.Add(ms(2000)), 3)
	if err != nil || got.Issued != 37 {
		t.Fatalf("IssueTickets(3) after the return: issued %d, %v; want 35..37 handed out again", got.Issued, err)
	}
	moved := got
	moved.Issued = 36 // read before the last ticket
	if ok, err := s.ReturnTickets(ctx, moved, 36); err != nil || ok {
		t.Fatalf("ReturnTickets below the top: ok=%v %v; want false", ok, err)
	}
	// A pre-queue fixed since the caller read the program.
	q := program("return-opened")
	q.OpensAt, q.Shuffle, q.ShuffleNonce = t0.Add(time.Second), true, "cd"
	if err := store.CreateProgram(ctx, q); err != nil {
		t.Fatal(err)
	}
	if _, err := s.(queue.PrequeueStore).FixPrequeue(ctx, q.ID, t0.Add(2*time.Second)); err != nil {
		t.Fatal(err)
	}
	if ok, err := s.ReturnTickets(ctx, q, 40); err != nil || ok {
		t.Fatalf("ReturnTickets after the pre-queue was fixed: ok=%v %v; want false", ok, err)
	}
}
