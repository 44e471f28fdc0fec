package queue

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/example/waitingroom/internal/clock"
)

// Tickets past one hot item: at low rates every enter takes its ticket
// from the program item (IssueTicket), as it always has; above a rate the
// program spreads its enters over ticket shards, each handing out a block
// of numbers reserved from the program with one write, and an instance
// that alone sees many enters takes a few numbers at a time from a shard.
// See the README, "Tickets past one hot item", for the design and its
// guarantees.

// Shard is one ticket shard of a program as stored: a block of ticket
// numbers reserved from the program, handed out one at a time, and the
// claim of whoever is refilling it.
type Shard struct {
	// Start..End is the block; Next is the number handed out next (Next >
	// End: used up). All 0 for a shard never filled.
	Start, Next, End int64
	// ReservedAt is when the block was reserved: its numbers are handed
	// out for BlockLifetime after, no longer.
	ReservedAt time.Time
	// Takes counts the takes of the block (each of one number or more).
	Takes int64
	// Claim is the id of the refill in progress, made at ClaimedAt ("" and
	// zero when none is).
	Claim     string
	ClaimedAt time.Time
}

// Run is numbers handed out together, First..Last, from a block reserved
// at ReservedAt.
type Run struct {
	First, Last int64
	ReservedAt  time.Time
	// Block and After, of a take from a shard: the first number of its
	// block, and the shard's next number right after the take.
	Block, After int64
}

// empty reports whether r holds no number (ticket numbers start at 1).
func (r Run) empty() bool { return r.First < 1 || r.First > r.Last }

// used is how many numbers of the block were handed out.
func (b Shard) used() int64 {
	if b.End < b.Start {
		return 0
	}
	return min(b.Next, b.End+1) - b.Start
}

// TicketStore is what a Store offers beyond IssueTicket to take enters
// past the write limit of one item: blocks of tickets, and ticket shards
// that hand them out. memstore and dynamostore implement it; a Service on
// a store without it takes every ticket from the program item.
type TicketStore interface {
	// IssueTickets atomically hands out n ≥ 1 consecutive tickets at now,
	// applying Program.WithTicketsIssued, and returns the program after:
	// the tickets are Issued-n+1..Issued. Errors as IssueTicket.
	IssueTickets(ctx context.Context, programID string, now time.Time, n int64) (Program, error)
	// TakeShardTickets hands out the next m ≥ 1 numbers of shard i's block
	// (fewer if fewer are left) and counts a take, if the block was
	// reserved at or after notBefore and is not used up: the numbers and
	// true. Otherwise false, and nothing changes.
	TakeShardTickets(ctx context.Context, programID string, i int, notBefore time.Time, m int64) (Run, bool, error)
	// ClaimShard makes claim the refiller of shard i at now, if its block
	// is used up or was reserved before notBefore, and it is not claimed
	// by another claim made at or after claimNotBefore (a claim made again
	// by the same id succeeds again). It returns the shard as it was and
	// true, or false when it is taken or still usable. A claim creates the
	// shard when there is none: callers claim only programs that exist.
	ClaimShard(ctx context.Context, programID string, i int, claim string, now, notBefore, claimNotBefore time.Time) (Shard, bool, error)
	// FillShard installs b's block (Start, Next, End, ReservedAt; no takes
	// yet) in shard i and clears the claim, if claim still holds it (made
	// at claimedAt); false otherwise. Filled, the claim no longer holds
	// it: a fill is never applied twice, and the same fill again (a retry
	// after a lost answer) answers true while the shard still shows it.
	// An error means the block may or may not be in the shard.
	FillShard(ctx context.Context, programID string, i int, claim string, claimedAt time.Time, b Shard) (bool, error)
	// SetShards sets the program's ticket shard count to k if it is from,
	// and answers whether the count is k (true also when it was k
	// already: a retry after a lost answer). It changes nothing else (not
	// the version).
	SetShards(ctx context.Context, programID string, from, k int) (bool, error)
	// TrimShard ends shard i's block, if it is the block that starts at
	// start and was reserved at reservedAt, before its next number, so
	// that it hands out no more, and returns the numbers it retired (none
	// handed out). If back is not empty and the shard's next number is
	// still back.After, back's numbers are taken back and retired first.
	// False when the block is another or had nothing left.
	TrimShard(ctx context.Context, programID string, i int, start int64, reservedAt time.Time, back Run) (Run, bool, error)
	// ReturnTickets gives tickets from..p.Issued, held by nobody, back to
	// the program, if it is still p (its Version, Issued and pre-queue):
	// it stores p.WithTicketsReturned(from). False when the program
	// changed.
	ReturnTickets(ctx context.Context, p Program, from int64) (bool, error)
}

// Bounds of the ticket shards; see the README, "Tickets past one hot item".
const (
	// BlockLifetime bounds how long after its reservation a block's
	// numbers are handed out: someone who entered this much before another
	// is never behind them. Never more than the program cache's TTL.
	BlockLifetime = 900 * time.Millisecond
	// MaxShards bounds a program's ticket shards.
	MaxShards = 100
	// DefaultItemWriteUnits is DynamoDB's write limit of one item (its
	// partition), in write units a second.
	DefaultItemWriteUnits = 1000
	// claimTimeout is how long a refill may take before another instance
	// may take it over.
	claimTimeout = time.Second
	// shardTries is how many shards an enter tries before it takes a
	// single ticket from the program item.
	shardTries = 3
	// Block sizes aim at blocks used up in this range of time, the longest
	// well within BlockLifetime, so that a shard's block is used up before
	// it goes stale even when its share of the crowd runs thin for a while.
	minBlockTime, maxBlockTime = 50 * time.Millisecond, 360 * time.Millisecond
	// An instance takes from a shard as many numbers as it expects enters
	// in runTime, or in one and a half times what its last fetches took
	// (so that the enters waiting on a fetch do not outrun it), at most
	// maxRun.
	runTime, maxRun = 50 * time.Millisecond, 500
	// measureEvery is the shortest span over which a rate is measured; the
	// measures are smoothed over rateSmoothing, forgotten after
	// staleMeasure.
	measureEvery, rateSmoothing, staleMeasure = 20 * time.Millisecond, time.Second, 5 * time.Second
)

// WithItemWriteLimit sizes the ticket shards for a store whose items each
// take units write units a second (DynamoDB: DefaultItemWriteUnits; the
// local server's -partition-limits scale it). 0 or less takes every
// ticket from the program item, as before ticket shards.
func WithItemWriteLimit(units float64) Option {
	return func(s *Service) { s.tickets.writeUnits = units }
}

// WithLogger makes the service log the ticket shard writes that failed
// outside a request's answer (shard count changes, fills, trims, give
// backs), and admin changes stored whose drain instant was not moved, to
// l; slog.Default() otherwise.
func WithLogger(l *slog.Logger) Option {
	return func(s *Service) { s.tickets.log = l }
}

// failed logs that a ticket shard write op of programID failed with err,
// and what it cost.
func (t *ticketer) failed(ctx context.Context, op, programID string, err error, cost string) {
	t.logger().LogAttrs(ctx, slog.LevelWarn, "ticket shard write failed", slog.String("op", op), slog.String("programId", programID),
		slog.String("error", err.Error()), slog.String("cost", cost))
}

// logger is the service's logger (WithLogger).
func (t *ticketer) logger() *slog.Logger {
	if t.log == nil {
		return slog.Default()
	}
	return t.log
}

// setShards changes programID's shard count from from to k (SetShards),
// logging a failure: the count stays as it was.
func (s *Service) setShards(ctx context.Context, ts TicketStore, programID string, from, k int) (bool, error) {
	set, err := ts.SetShards(ctx, programID, from, k)
	if err != nil {
		s.tickets.failed(ctx, "set shards", programID, err, "none: the shard count stays as it was")
	}
	return set, err
}

// ticketer decides, per program and per instance, where tickets come from.
// It keeps state only for programs the store has shown to exist, and drops
// a program's state once it has been idle past its use (idleAfter).
type ticketer struct {
	writeUnits float64
	log        *slog.Logger

	mu       sync.Mutex
	programs map[string]*programTickets
	sweptAt  time.Time // the last sweep of idle programs
}

// programTickets is what an instance knows of one program's tickets.
type programTickets struct {
	served measure // the program's tickets, from its answers (all instances')
	asked  measure // this instance's enters, served or not
	tried  int64   // this instance's enters so far
	// shards is the shard count as this instance last learnt it, at
	// shardsAt; widened is when it last widened it after a throttle;
	// wider the larger count it had before, until widerUntil.
	shards            int
	shardsAt, widened time.Time
	wider             int
	widerUntil        time.Time
	opensAt           time.Time // the program's opening, as last seen
	local             Run       // numbers this instance holds, handed out one an enter
	// localShard is the shard local came from; localFilled is false when
	// the shard never held its block (the fill failed).
	localShard  int
	localFilled bool
	// blocks are the blocks this instance reserved lately, to trim once
	// stale; returns the numbers retired that nobody holds, to give back;
	// lastAsk the last enter asked of this instance; tidyAt the last tidy
	// (tidying: one is out).
	blocks          []shardBlock
	returns         []Run
	lastAsk, tidyAt time.Time
	tidying         bool
	used            time.Time     // the last enter or store answer about the program
	fetchTook       time.Duration // how long fetching more numbers took lately
	// fetching is closed when the enter that went to fetch more numbers
	// for this instance is back; nil when none is out.
	fetching chan struct{}
}

// measure is a rate measured from a growing count.
type measure struct {
	count  int64     // the count at at, the start of the current span
	at     time.Time // when it was seen
	rate   float64   // the smoothed rate, a second; 0 if none
	rateAt time.Time // when rate was last updated
}

// add is m after the count was seen at count at now: the rate over the
// span since its start, once it reaches measureEvery, smoothed into
// m.rate, and a new span begun.
func (m measure) add(count int64, now time.Time) measure {
	switch d := now.Sub(m.at); {
	case m.at.IsZero() || d > staleMeasure || d < 0 || count < m.count:
		return measure{count: count, at: now, rate: m.current(now), rateAt: m.rateAt}
	case d < measureEvery:
		return m
	default:
		r := float64(count-m.count) / d.Seconds()
		if m.current(now) == 0 {
			m.rate = r
		} else {
			m.rate += (1 - math.Exp(-float64(d)/float64(rateSmoothing))) * (r - m.rate)
		}
		m.rateAt, m.count, m.at = now, count, now
		return m
	}
}

// current is m's rate at now, 0 once stale.
func (m measure) current(now time.Time) float64 {
	if now.Sub(m.rateAt) > staleMeasure {
		return 0
	}
	return m.rate
}

// The ticket shards' settings, all proportional to the item write limit:
// single tickets use at most a fifth of the program item's writes before
// the program turns to shards (and back below a tenth); a shard takes 70 %
// of an item's writes (a shard item is small: one unit a take); block
// reservations take a quarter of the program item's.
func (t *ticketer) switchOn() float64     { return 0.2 * t.writeUnits }
func (t *ticketer) switchOff() float64    { return 0.1 * t.writeUnits }
func (t *ticketer) perShard() float64     { return 0.7 * t.writeUnits }
func (t *ticketer) reservations() float64 { return 0.25 * t.writeUnits }
func (t *ticketer) enabled(ttl time.Duration) bool {
	return t.writeUnits > 0 && ttl >= BlockLifetime
}

// shardsFor is the shard count for takes at rate a second: enough shards
// that each takes 70 % of its limit.
func (t *ticketer) shardsFor(rate float64) int {
	return min(MaxShards, max(1, int(math.Ceil(rate/t.perShard()))))
}

// blockTime is how long a block should last with k shards: long enough
// that their reservations take a quarter of the program item's writes.
func (t *ticketer) blockTime(k int) time.Duration {
	d := time.Duration(float64(k) / t.reservations() * float64(time.Second))
	return min(max(d, minBlockTime), maxBlockTime)
}

// blockSize is the size of a block for a shard handing out perShard
// numbers a second with k shards: after a block of last numbers, at most
// twice that and 16 more; a shard's first block (last 0) half of it,
// since the rate that a ramp's reservations show runs ahead of its enters;
// and at least one run of run numbers (the refiller's own).
func (t *ticketer) blockSize(perShard float64, k int, last, run int64) int64 {
	n := int64(math.Ceil(perShard * t.blockTime(k).Seconds()))
	if last > 0 {
		n = min(n, 2*last+16)
	} else {
		n = (n + 1) / 2
	}
	return max(1, n, run)
}

// Idle program state is dropped: once nothing was asked or answered about
// a program for idleAfter, or for returnsKept while it holds numbers to
// give back; the map is swept at most once a sweepEvery.
const idleAfter, sweepEvery = staleMeasure, staleMeasure

// of returns the state of program id, or a blank one that is not kept when
// the instance keeps none for it (what is recorded there is forgotten);
// t.mu must be held.
func (t *ticketer) of(id string) *programTickets {
	if pt := t.programs[id]; pt != nil {
		return pt
	}
	return &programTickets{}
}

// add returns the state of program id, which the store has just shown to
// exist at now, making it if need be; t.mu must be held.
func (t *ticketer) add(id string, now time.Time) *programTickets {
	if t.programs == nil {
		t.programs = make(map[string]*programTickets)
	}
	pt := t.programs[id]
	if pt == nil {
		t.sweep(now)
		pt = &programTickets{}
		t.programs[id] = pt
	}
	if now.After(pt.used) {
		pt.used = now
	}
	return pt
}

// sweep drops the state of the programs idle at now, if the last sweep
// was sweepEvery ago; t.mu must be held.
func (t *ticketer) sweep(now time.Time) {
	if now.Sub(t.sweptAt) < sweepEvery {
		return
	}
	t.sweptAt = now
	for id, pt := range t.programs {
		if pt.idle(now) {
			delete(t.programs, id)
		}
	}
}

// idle reports whether pt is of no more use at now: no enter and no
// answer for idleAfter (returnsKept when it holds numbers to give back),
// no fetch or tidy out.
func (pt *programTickets) idle(now time.Time) bool {
	if pt.tidying || pt.fetching != nil {
		return false
	}
	after := idleAfter
	if len(pt.blocks) > 0 || len(pt.returns) > 0 || !pt.local.empty() {
		after = returnsKept
	}
	return now.Sub(pt.used) > after
}

// ask records an enter asked of this instance at now and returns this
// instance's rate of enters: under throttling the program's answers show
// the rate served, this the rate asked for (all of it on a single
// instance, a share on many). exists tells that the program is known to
// exist (a recent read); an enter to a program the instance keeps no
// state for is not counted otherwise.
func (t *ticketer) ask(id string, now time.Time, exists bool) float64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	pt := t.of(id)
	if exists {
		pt = t.add(id, now)
	} else if now.After(pt.used) {
		pt.used = now
	}
	pt.tried++
	pt.lastAsk = now
	pt.asked = pt.asked.add(pt.tried, now)
	return pt.asked.current(now)
}

// known reports whether the instance keeps state for program id (so the
// store has shown it exists).
func (t *ticketer) known(id string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.programs[id] != nil
}

// serve records that the program had issued tickets at now (the answer of
// a write of the program item) and its shard count.
func (t *ticketer) serve(p Program, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	pt := t.add(p.ID, now)
	pt.served = pt.served.add(p.Issued, now)
	pt.setShards(p.Shards, now)
	pt.opensAt = p.OpensAt
}

// opening is the program's opening as this instance last saw it.
func (t *ticketer) opening(id string) time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.of(id).opensAt
}

// rate is the program's ticket rate as this instance knows it: the larger
// of the program's and this instance's own enters; 0 if none is recent.
func (t *ticketer) rate(id string, now time.Time) float64 {
	served, asked := t.rates(id, now)
	return max(served, asked)
}

// rates are the program's ticket rate from its answers (0 if not
// measured recently) and this instance's rate of enters.
func (t *ticketer) rates(id string, now time.Time) (served, asked float64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	pt := t.of(id)
	return pt.served.current(now), pt.asked.current(now)
}

// learn records that the program has k shards at now.
func (t *ticketer) learn(id string, k int, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	pt := t.of(id)
	pt.setShards(k, now)
}

// shardCount is the program's shard count as this instance learnt it at
// most ttl ago.
func (t *ticketer) shardCount(id string, now time.Time, ttl time.Duration) (int, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	pt := t.of(id)
	if pt.shardsAt.IsZero() || now.Before(pt.shardsAt) || now.Sub(pt.shardsAt) >= ttl {
		return 0, false
	}
	return pt.shards, true
}

// setShards records that the program has k shards at now; t.mu must be
// held. A smaller count than before leaves the blocks of the shards beyond
// it to be taken from (not refilled) while they may be fresh.
func (pt *programTickets) setShards(k int, now time.Time) {
	if k < pt.shards {
		if now.After(pt.widerUntil) {
			pt.wider = 0
		}
		pt.wider, pt.widerUntil = max(pt.wider, pt.shards), now.Add(BlockLifetime)
	}
	pt.shards, pt.shardsAt = k, now
}

// span is how many shards an enter may take from at now when the program
// has k: more than k for a block lifetime after the count fell.
func (t *ticketer) span(id string, k int, now time.Time) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	pt := t.of(id)
	if now.Before(pt.widerUntil) {
		return max(k, pt.wider)
	}
	return k
}

// mayWiden reports whether this instance may change the program's shard
// count on its own at now: once a block lifetime, so that a burst of
// throttles doubles the count once.
func (t *ticketer) mayWiden(id string, now time.Time) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	pt := t.of(id)
	if !pt.widened.IsZero() && now.Sub(pt.widened) < BlockLifetime {
		return false
	}
	pt.widened = now
	return true
}

// local hands out the next number this instance holds, if its block is
// still fresh. When it holds none, and alone is true (the instance takes
// runs of numbers), one enter at a time goes to fetch more: the others
// wait for it (or ctx) and take from what it brought; the one that fetches
// must call done. Without alone every enter fetches its own.
func (t *ticketer) local(ctx context.Context, clk clock.Clock, id string, opensAt time.Time, alone bool) (ticket int64, ok bool, done func(), err error) {
	for {
		now := clk.Now()
		t.mu.Lock()
		pt := t.of(id)
		if pt.local.First <= pt.local.Last && !pt.local.ReservedAt.Before(freshAfter(now, opensAt)) {
			ticket := pt.local.First
			pt.local.First++
			t.mu.Unlock()
			return ticket, true, nil, nil
		}
		if !alone {
			t.mu.Unlock()
			return 0, false, func() {}, nil
		}
		wait := pt.fetching
		if wait == nil {
			ch := make(chan struct{})
			pt.fetching = ch
			t.mu.Unlock()
			return 0, false, func() {
				t.mu.Lock()
				pt.fetching = nil
				t.mu.Unlock()
				close(ch)
			}, nil
		}
		t.mu.Unlock()
		select {
		case <-wait:
		case <-ctx.Done():
			return 0, false, nil, ctx.Err()
		}
	}
}

// keep gives this instance the numbers of r, taken from shard i, to hand
// out (those it still held are gaps now); filled is false when r's block
// is in no shard.
func (t *ticketer) keep(id string, r Run, i int, filled bool, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	pt := t.add(id, now)
	pt.local, pt.localShard, pt.localFilled = r, i, filled
}

// freshAfter is the earliest reservation of a block whose numbers may be
// handed out at now: BlockLifetime ago, or the opening if it is between,
// so that who enters after the opening gets a number after every number of
// the pre-queue.
func freshAfter(now, opensAt time.Time) time.Time {
	from := now.Add(-BlockLifetime + time.Millisecond)
	if !opensAt.IsZero() && opensAt.After(from) && !now.Before(opensAt) {
		return opensAt
	}
	return from
}

// runSize is how many numbers this instance takes at a time when it is
// asked for rate enters a second and fetching them takes took.
func runSize(rate float64, took time.Duration) int64 {
	return min(maxRun, max(1, int64(rate*max(runTime, took*3/2).Seconds())))
}

// fetched records that fetching numbers took d.
func (t *ticketer) fetched(id string, d time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	pt := t.of(id)
	pt.fetchTook = (pt.fetchTook + max(d, 0)) / 2
}

// run is how many numbers this instance takes at a time, asked for asked
// enters a second.
func (t *ticketer) run(id string, asked float64) int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return runSize(asked, t.of(id).fetchTook)
}

// takeTicket hands out the next ticket of programID asked for at now: from
// the numbers this instance holds, or from a ticket shard, when the program
// uses them; else from the program item. at is when it was taken (later
// than now when the enter waited for another to fetch numbers); fresh
// reports whether p is the program as the ticket left it (else the caller
// must read it to answer).
func (s *Service) takeTicket(ctx context.Context, programID string, now time.Time) (ticket int64, p Program, fresh bool, at time.Time, err error) {
	ts, sharding := s.store.(TicketStore)
	sharding = sharding && s.tickets.enabled(s.cache.ttl)
	if sharding {
		c, ok := s.cache.shardView(programID, now)
		asked := s.tickets.ask(programID, now, ok)
		if !ok {
			c.OpensAt = s.tickets.opening(programID)
		}
		run := s.tickets.run(programID, asked)
		if !c.Closed {
			ticket, ok, done, err := s.tickets.local(ctx, s.clock, programID, c.OpensAt, run > 1)
			now = s.clock.Now()
			if err != nil || ok {
				return ticket, Program{}, false, now, err
			}
			defer done()
			start := now
			defer func() { s.tickets.fetched(programID, s.clock.Now().Sub(start)) }()
			if k, ok := s.tickets.shardCount(programID, now, s.cache.ttl); ok {
				c.ID, c.Shards = programID, k // learnt since the read, or without one
			}
			if c.Shards == 0 && asked >= s.tickets.switchOn() {
				// This instance alone asks for more than the program item
				// should take: spread its tickets at once, without waiting
				// for the program to say so (the item may be too hot to
				// answer).
				c.ID, c.Shards = programID, s.tickets.shardsFor(asked/float64(run))
				s.tickets.learn(programID, c.Shards, now)
				if s.tickets.mayWiden(programID, now) {
					_, _ = s.setShards(ctx, ts, programID, 0, c.Shards)
				}
			}
			if c.Shards > 0 {
				ticket, p, fresh, ok, err := s.fromShards(ctx, ts, c, run, now)
				if err != nil || ok {
					return ticket, p, fresh, now, err
				}
			}
		}
	}
	p, err = s.store.IssueTicket(ctx, programID, now)
	switch {
	case sharding && errors.Is(err, ErrThrottled):
		// The program item is hot: spread the tickets now, whether or not
		// the program item takes the new count yet (two shards: refills
		// double them as fast as the pace asks). Only for a program that
		// exists: a claim creates the shard item.
		if xerr := s.exists(ctx, programID, now); xerr != nil {
			if errors.Is(xerr, ErrNotFound) {
				err = xerr
			}
			return 0, Program{}, false, now, err
		}
		k := 2
		s.tickets.learn(programID, k, now)
		if s.tickets.mayWiden(programID, now) {
			_, _ = s.setShards(ctx, ts, programID, 0, k)
		}
		ticket, p, fresh, ok, serr := s.fromShards(ctx, ts, Program{ID: programID, Shards: k}, 1, now)
		if serr != nil || !ok {
			return 0, Program{}, false, now, err
		}
		return ticket, p, fresh, now, nil
	case err != nil:
		return 0, Program{}, false, now, err
	}
	if sharding {
		s.tickets.serve(p, now)
		rate := s.tickets.rate(programID, now)
		if burst := p.BurstRate(); burst >= 5*s.tickets.switchOn() {
			// The last single tickets came so close together that one
			// answer tells a crowd, before any instance could measure it
			// (not how big: refills tell that).
			rate = max(rate, 5*s.tickets.switchOn())
		}
		if rate >= s.tickets.switchOn() && p.Shards == 0 && !p.Closed {
			// A shard count that another instance set meanwhile wins. Its
			// takes are counted as this instance's would be (one number
			// each, or runs of them), on the guess that other instances see
			// their share of the crowd as it does: refills correct it.
			_, asked := s.tickets.rates(programID, now)
			k := s.tickets.shardsFor(rate / float64(s.tickets.run(programID, asked)))
			if set, err := s.setShards(ctx, ts, programID, 0, k); err == nil && set {
				p.Shards = k
				s.tickets.learn(programID, k, now)
			}
		}
	}
	return p.Issued, p, true, now, nil
}

// exists answers nil when programID is known to exist: the instance keeps
// ticket state for it or read it within a cache TTL, else a read now shows
// it (and is cached). ErrNotFound when it does not exist; the read's error
// when it fails.
func (s *Service) exists(ctx context.Context, programID string, now time.Time) error {
	if _, ok := s.cache.shardView(programID, now); ok || s.tickets.known(programID) {
		return nil
	}
	p, err := s.store.GetProgram(ctx, programID)
	if err != nil {
		return fmt.Errorf("read program after a throttled ticket: %w", err)
	}
	s.cache.put(p, now)
	return nil
}

// fromShards takes run numbers (one for this enter, the others for this
// instance's next ones) from one of c's shards: ok false when every shard
// it tried was being refilled by another instance (or throttled), or when
// the program should take its tickets from the program item again.
func (s *Service) fromShards(ctx context.Context, ts TicketStore, c Program, run int64, now time.Time) (ticket int64, p Program, fresh, ok bool, err error) {
	k := c.Shards
	notBefore := freshAfter(now, c.OpensAt)
	for range shardTries {
		i := s.intN(s.tickets.span(c.ID, k, now))
		r, ok, err := ts.TakeShardTickets(ctx, c.ID, i, notBefore, run)
		if errors.Is(err, ErrThrottled) {
			k = s.widen(ctx, ts, c.ID, k)
			continue
		}
		if err != nil {
			return 0, Program{}, false, false, err
		}
		if ok {
			if r.Last > r.First {
				rest := r
				rest.First++
				s.tickets.keep(c.ID, rest, i, true, now)
			}
			return r.First, Program{}, false, true, nil
		}
		if i >= k {
			continue // a shard beyond the count: taken from, never refilled
		}
		claim := NewTokenID()
		old, won, err := ts.ClaimShard(ctx, c.ID, i, claim, now, notBefore, now.Add(-claimTimeout))
		if errors.Is(err, ErrThrottled) {
			k = s.widen(ctx, ts, c.ID, k)
			continue
		}
		if err != nil {
			return 0, Program{}, false, false, err
		}
		if !won {
			continue
		}
		return s.refill(ctx, ts, c.ID, i, k, claim, old, run, now)
	}
	return 0, Program{}, false, false, nil
}

// refill reserves a new block for shard i of k, which claim holds, sized
// from the shard's pace, and fills the shard with it: the first run
// numbers are this enter's and this instance's next ones. It also changes
// the shard count when the pace says so: doubled when this shard took
// more takes a second than a shard should, halved when its block went
// stale with few takes, none when the program's whole pace fell below the
// switch-off rate (then the shard takes no new block).
func (s *Service) refill(ctx context.Context, ts TicketStore, id string, i, k int, claim string, old Shard, run int64, now time.Time) (ticket int64, p Program, fresh, ok bool, err error) {
	served, asked := s.tickets.rates(id, now)
	// The shard's own pace: numbers and takes of its old block over its
	// life (a used-up block is refilled by its next taker, at once when
	// the shard is busy).
	// Numbers a take: as many as the old block's takes carried, or as
	// this instance's own (the guess that instances see their share of the
	// crowd alike).
	perShard, perTake := 0.0, float64(run)
	stale := false
	if old.End > 0 {
		age := max(now.Sub(old.ReservedAt), time.Millisecond).Seconds()
		perShard, stale = float64(old.used())/age, old.Next <= old.End
		if old.Takes > 0 {
			perTake = max(perTake, float64(old.used())/float64(old.Takes))
		}
	}
	// The program's pace: this shard's times the count when its block
	// lived its whole life (the program's answers count reservations,
	// used or not); else every instance's tickets from the program's
	// answers (smoothed), at least what this shard's used-up block shows;
	// at least what this instance alone is asked.
	program, full := served, served > 0 || stale
	switch {
	case stale:
		program = perShard * float64(k)
	case old.End > 0:
		program = max(served, perShard*float64(k))
	}
	program = max(program, asked)
	want := k
	switch w := s.tickets.shardsFor(program / perTake); {
	case old.End == 0: // nothing measured on this shard yet
	case full && program < s.tickets.switchOff():
		want = 0
	case old.Takes >= 4 && asked > 0 && 2*w >= 3*k: // grows on a few takes' evidence, by doubling at most: a ramp's reservations run ahead of its enters
		want = min(w, 2*k)
	case full && w <= k/2: // a count holds until the pace moves a lot
		want = w
	}
	if want != k {
		if _, err := s.setShards(ctx, ts, id, k, want); err != nil && !errors.Is(err, ErrThrottled) {
			return 0, Program{}, false, false, err
		}
		s.tickets.learn(id, want, now)
	}
	n := int64(1) // going back to the program item: this enter's ticket only
	if want > 0 {
		if old.End == 0 || perShard == 0 {
			perShard = program / float64(want)
		}
		last := int64(0)
		if old.End > 0 {
			last = old.End - old.Start + 1
		}
		n = s.tickets.blockSize(perShard*float64(k)/float64(want), want, last, run)
	}
	q, err := ts.IssueTickets(ctx, id, now, n)
	if err != nil {
		return 0, Program{}, false, false, err
	}
	s.tickets.serve(q, now)
	first := q.Issued - n + 1
	next := first + min(run, n)
	// Filled or not (the claim lapsed, the store failed), the block's first
	// numbers are this instance's; unfilled, the others are nobody's: given
	// back when the fill surely failed, else gaps.
	filled, err := ts.FillShard(ctx, id, i, claim, now, Shard{Start: first, Next: next, End: q.Issued, ReservedAt: now})
	if err != nil {
		s.tickets.failed(ctx, "fill shard", id, err, "the block's numbers may be in the shard: never given back, gaps if not")
	}
	s.tickets.reserved(id, shardBlock{shard: i, start: first, reservedAt: now}, Run{First: next, Last: q.Issued}, filled, err == nil)
	if next-1 > first {
		s.tickets.keep(id, Run{First: first + 1, Last: next - 1, ReservedAt: now, Block: first, After: next}, i, filled, now)
	}
	return first, q, true, true, nil
}

// widen doubles the program's shard count after a shard was throttled
// (once a block lifetime per instance; another instance may have done it
// already) and returns the count to spread the next try over.
func (s *Service) widen(ctx context.Context, ts TicketStore, programID string, k int) int {
	now := s.clock.Now()
	if !s.tickets.mayWiden(programID, now) {
		return k
	}
	w := min(2*k, MaxShards)
	_, _ = s.setShards(ctx, ts, programID, k, w)
	s.tickets.learn(programID, w, now)
	return w
}

// intN is a uniform int in [0, n), from the service's rng if it has one.
func (s *Service) intN(n int) int {
	if s.rng != nil {
		return s.rng.IntN(n)
	}
	return rand.IntN(n)
}

// Giving numbers back: when a crowd stops, the numbers reserved but never
// handed out would be gaps. An instance that has had no enter for a block
// lifetime trims the stale blocks it reserved and the one its numbers came
// from, and gives what they retired back to the program while it is the
// top of its tickets. See the README, "Tickets past one hot item".

// shardBlock names a block: shard's block that starts at start, reserved
// at reservedAt.
type shardBlock struct {
	shard      int
	start      int64
	reservedAt time.Time
}

// same reports whether b and o name the same block (stores keep the
// reservation to the millisecond).
func (b shardBlock) same(o shardBlock) bool {
	return b.shard == o.shard && b.start == o.start && b.reservedAt.UnixMilli() == o.reservedAt.UnixMilli()
}

// Bounds of the giving back: an instance tidies at most once a tidyEvery
// per program; it remembers maxOwnBlocks blocks and maxReturns runs to
// give back, these for returnsKept at most.
const (
	tidyEvery                = 250 * time.Millisecond
	maxOwnBlocks, maxReturns = 32, 64
	returnsKept              = time.Minute
)

// reserved records that this instance reserved block b: filled (its shard
// holds it), to trim once stale; surely not filled, its numbers left (left)
// to give back.
func (t *ticketer) reserved(id string, b shardBlock, left Run, filled, sure bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	pt := t.add(id, b.reservedAt)
	switch {
	case filled:
		// An older block of the same shard is no longer in it, and blocks
		// reserved a block lifetime before this one went stale while this
		// instance was busy: either is used up, or left below the top.
		pt.blocks = slices.DeleteFunc(pt.blocks, func(o shardBlock) bool {
			return o.shard == b.shard || o.reservedAt.Before(b.reservedAt.Add(-BlockLifetime))
		})
		pt.blocks = append(pt.blocks, b)
		if len(pt.blocks) > maxOwnBlocks {
			pt.blocks = pt.blocks[1:]
		}
	case sure && left.First <= left.Last:
		left.ReservedAt = b.reservedAt
		pt.addReturns(left)
	}
}

// addReturns adds runs to give back, keeping the newest maxReturns; t.mu
// must be held.
func (pt *programTickets) addReturns(runs ...Run) {
	pt.returns = append(pt.returns, runs...)
	if n := len(pt.returns) - maxReturns; n > 0 {
		slices.SortFunc(pt.returns, func(a, b Run) int { return cmp.Compare(a.Last, b.Last) })
		pt.returns = slices.Delete(pt.returns, 0, n)
	}
}

// tidyWork is what one tidy does: trim blocks (the one back came from
// taking back) and give back runs.
type tidyWork struct {
	trims   []shardBlock
	back    Run // this instance's numbers left, from backOf
	backOf  shardBlock
	returns []Run
}

// startTidy hands the tidy due at now to its caller, taking it from the
// instance's state: false when none is due (an enter came within a block
// lifetime, the last tidy was under tidyEvery ago, one is out, or there is
// nothing stale to do). The caller must call endTidy.
func (t *ticketer) startTidy(id string, now time.Time) (tidyWork, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	pt := t.of(id)
	staleBefore := now.Add(-BlockLifetime)
	if pt.tidying || now.Sub(pt.tidyAt) < tidyEvery || now.Sub(pt.lastAsk) < BlockLifetime {
		return tidyWork{}, false
	}
	var w tidyWork
	if !pt.local.empty() && pt.local.ReservedAt.Before(staleBefore) {
		if pt.localFilled {
			w.back, w.backOf = pt.local, shardBlock{shard: pt.localShard, start: pt.local.Block, reservedAt: pt.local.ReservedAt}
			w.trims = append(w.trims, w.backOf)
		} else {
			w.returns = append(w.returns, Run{First: pt.local.First, Last: pt.local.Last, ReservedAt: pt.local.ReservedAt})
		}
		pt.local = Run{}
	}
	pt.blocks = slices.DeleteFunc(pt.blocks, func(b shardBlock) bool {
		if !b.reservedAt.Before(staleBefore) {
			return false
		}
		if !b.same(w.backOf) {
			w.trims = append(w.trims, b)
		}
		return true
	})
	w.returns = append(w.returns, pt.returns...)
	pt.returns = nil
	if len(w.trims) == 0 && len(w.returns) == 0 {
		return tidyWork{}, false
	}
	pt.tidying, pt.tidyAt = true, now
	return w, true
}

// endTidy records the runs a tidy could not give back yet.
func (t *ticketer) endTidy(id string, left []Run) {
	t.mu.Lock()
	defer t.mu.Unlock()
	pt := t.of(id)
	pt.tidying = false
	pt.addReturns(left...)
}

// tidyTickets gives back to programID the numbers this instance reserved
// or holds that nobody took, when a tidy is due (startTidy): it trims the
// stale blocks, then gives back, top down, the runs that end at the
// program's last ticket, as long as the counter is far from them
// (Program.mayReturn). Runs not yet at the top are kept for a later tidy,
// for returnsKept at most; a store error drops the run it was about (the
// write may have been applied). It never fails the request that calls it.
func (s *Service) tidyTickets(ctx context.Context, programID string, now time.Time) {
	ts, ok := s.store.(TicketStore)
	if !ok || !s.tickets.enabled(s.cache.ttl) {
		return
	}
	w, ok := s.tickets.startTidy(programID, now)
	if !ok {
		return
	}
	runs := w.returns
	defer func() { s.tickets.endTidy(programID, runs) }()
	for _, b := range w.trims {
		var back Run
		if b.same(w.backOf) {
			back = w.back
		}
		r, ok, err := ts.TrimShard(ctx, programID, b.shard, b.start, b.reservedAt, back)
		if err != nil {
			s.tickets.failed(ctx, "trim shard", programID, err, "the numbers it may have retired are gaps")
		}
		if err == nil && ok {
			r.ReservedAt = b.reservedAt
			runs = append(runs, r)
		}
	}
	runs = coalesce(runs)
	p, err := s.program(ctx, programID, now)
	if err != nil {
		return
	}
	hold := s.cache.ttl + time.Second
	for len(runs) > 0 {
		top := runs[len(runs)-1]
		if top.Last != p.Issued || !p.mayReturn(top.First, now, hold) {
			break
		}
		ok, err := ts.ReturnTickets(ctx, p, top.First)
		if !ok {
			if err != nil {
				s.tickets.failed(ctx, "return tickets", programID, err, "the run is dropped: gaps if it was not given back")
				runs = runs[:len(runs)-1]
			}
			break
		}
		runs = runs[:len(runs)-1]
		p = p.WithTicketsReturned(top.First)
		s.cache.put(p, now)
	}
	// Runs the counter will have reached, or kept too long, can never
	// be given back.
	reach := UnixMs(now.Add(hold))
	runs = slices.DeleteFunc(runs, func(r Run) bool {
		return now.Sub(r.ReservedAt) > returnsKept || p.segmentAt(reach).Counter(reach) >= r.First-1
	})
}

// coalesce sorts runs by their numbers and joins adjacent ones; a joined
// run keeps the latest ReservedAt.
func coalesce(runs []Run) []Run {
	slices.SortFunc(runs, func(a, b Run) int { return cmp.Compare(a.First, b.First) })
	out := runs[:0]
	for _, r := range runs {
		if n := len(out); n > 0 && out[n-1].Last+1 == r.First {
			out[n-1].Last = r.Last
			if r.ReservedAt.After(out[n-1].ReservedAt) {
				out[n-1].ReservedAt = r.ReservedAt
			}
			continue
		}
		out = append(out, r)
	}
	return out
}
