// Package tickets implements queue.Tickets: above a rate, enters take their
// numbers from ticket shards, each a block reserved from the program item
// with one write (docs/design.md, "Ticket shards").
package tickets

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/example/waitingroom/internal/admission"
	"github.com/example/waitingroom/internal/clock"
	"github.com/example/waitingroom/internal/queue"
)

// Shards decides, per program and instance, where an enter's ticket comes
// from, and keeps the instance's share of the shards. Build one per Service.
type Shards struct {
	store       Store
	writeUnits  float64
	log         *slog.Logger
	clock       clock.Clock
	rng         *rand.Rand
	fixedShards int // with fixedBlock, when set: WithFixedSizing
	fixedBlock  int64

	mu       sync.Mutex
	programs map[string]*programState
	sweptAt  time.Time // the last sweep of idle programs
}

var _ queue.Tickets = (*Shards)(nil)

// Option configures Shards.
type Option func(*Shards)

// WithItemWriteLimit sizes the shards for items of units write units a second
// (default DefaultItemWriteUnits); 0 or less takes every ticket from the program item.
func WithItemWriteLimit(units float64) Option { return func(s *Shards) { s.writeUnits = units } }

// WithFixedSizing makes a program on shards use k of them, blocks of n
// numbers and one number a take, whatever its pace (docs/benchmarks.md).
func WithFixedSizing(k int, n int64) Option {
	return func(s *Shards) { s.fixedShards, s.fixedBlock = min(max(k, 1), MaxShards), max(n, 1) }
}

// WithLogger logs failed shard writes to l (slog.Default() otherwise).
func WithLogger(l *slog.Logger) Option { return func(s *Shards) { s.log = l } }

// WithClock replaces the real clock; pass the Service's.
func WithClock(c clock.Clock) Option { return func(s *Shards) { s.clock = c } }

// WithRand makes shard choices come from rng (the Service's; for single-goroutine tests).
func WithRand(rng *rand.Rand) Option { return func(s *Shards) { s.rng = rng } }

// New returns the ticket shards of one Service over store.
func New(store Store, opts ...Option) *Shards {
	s := &Shards{store: store, writeUnits: DefaultItemWriteUnits, clock: clock.Real{}}
	for _, o := range opts {
		o(s)
	}
	return s
}

// Take hands out the next ticket of programID for an enter asked at now:
// from numbers held, a ticket shard, or the program item.
func (s *Shards) Take(ctx context.Context, programs queue.Programs, programID string, now time.Time) (queue.Taken, error) {
	if !s.enabled(programs.TTL()) {
		return s.takeSingle(ctx, programID, now)
	}
	c, ok := programs.Recent(programID, now)
	asked, run, opensAt := s.recordAsk(programID, now, ok)
	if !ok {
		c.OpensAt = opensAt
	}
	if !c.Closed {
		ticket, ok, done, err := s.takeHeld(ctx, programID, c.OpensAt, run > 1)
		now = s.clock.Now()
		if err != nil || ok {
			return queue.Taken{Ticket: ticket, At: now}, err
		}
		defer done()
		start := now
		defer func() { s.recordFetch(programID, s.clock.Now().Sub(start)) }()
		c = s.withShardCount(ctx, c, programID, programs.TTL(), asked, run, now)
		if c.Shards > 0 {
			t, ok, err := s.takeFromShards(ctx, c, run, now)
			if err != nil || ok {
				t.At = now
				return t, err
			}
		}
	}
	return s.takeFromItem(ctx, programs, programID, now)
}

// withShardCount is c (program id as last read) with the shard count learnt
// since, or one set when this instance's enters alone call for shards.
func (s *Shards) withShardCount(ctx context.Context, c admission.Program, id string, ttl time.Duration, asked float64, run int64, now time.Time) admission.Program {
	if k, ok := s.shardCount(id, now, ttl); ok {
		c.ID, c.Shards = id, k
	}
	if c.Shards == 0 && asked >= s.switchOnRate() {
		c.ID, c.Shards = id, s.shardsFor(asked/float64(run))
		s.switchOn(ctx, id, c.Shards, now)
	}
	return c
}

// switchOn learns k shards for program id, and sets them if mayWiden.
func (s *Shards) switchOn(ctx context.Context, id string, k int, now time.Time) {
	s.learnShards(id, k, now)
	if s.mayWiden(id, now) {
		_, _ = s.setShardCount(ctx, id, 0, k)
	}
}

func (s *Shards) takeSingle(ctx context.Context, programID string, now time.Time) (queue.Taken, error) {
	p, err := s.store.IssueTicket(ctx, programID, now)
	if err != nil {
		return queue.Taken{At: now}, err
	}
	return queue.Taken{Ticket: p.Issued, Program: p, Fresh: true, At: now}, nil
}

// takeFromItem takes one ticket from the program item (from a shard when it
// is throttled), turning the program to shards when its rate calls for them.
func (s *Shards) takeFromItem(ctx context.Context, programs queue.Programs, programID string, now time.Time) (queue.Taken, error) {
	t, err := s.takeSingle(ctx, programID, now)
	switch {
	case errors.Is(err, queue.ErrThrottled):
		return s.takeThrottled(ctx, programs, programID, err, now)
	case err != nil:
		return t, err
	}
	p := &t.Program
	s.recordAnswer(*p, now)
	served, asked, run := s.rates(programID, now)
	rate := max(served, asked)
	if p.BurstRate() >= 5*s.switchOnRate() {
		rate = max(rate, 5*s.switchOnRate()) // a burst of single tickets in one answer
	}
	if rate >= s.switchOnRate() && p.Shards == 0 && !p.Closed {
		k := s.shardsFor(rate / float64(run))
		if set, err := s.setShardCount(ctx, programID, 0, k); err == nil && set {
			p.Shards = k
			s.learnShards(programID, k, now)
		}
	}
	return t, nil
}

// takeThrottled takes a ticket from one of two shards after the program item
// refused it with err: ErrNotFound when the program does not exist, err when no shard answered.
func (s *Shards) takeThrottled(ctx context.Context, programs queue.Programs, programID string, err error, now time.Time) (queue.Taken, error) {
	if xerr := s.exists(ctx, programs, programID, now); xerr != nil {
		if errors.Is(xerr, queue.ErrNotFound) {
			err = xerr
		}
		return queue.Taken{At: now}, err
	}
	k := max(2, s.fixedShards)
	s.switchOn(ctx, programID, k, now)
	t, ok, serr := s.takeFromShards(ctx, admission.Program{ID: programID, Shards: k}, 1, now)
	if serr != nil || !ok {
		return queue.Taken{At: now}, err
	}
	t.At = now
	return t, nil
}

// exists answers nil when programID is known to exist (state, the cache, or a read now).
func (s *Shards) exists(ctx context.Context, programs queue.Programs, programID string, now time.Time) error {
	s.mu.Lock()
	known := s.programs[programID] != nil
	s.mu.Unlock()
	if _, ok := programs.Recent(programID, now); ok || known {
		return nil
	}
	p, err := s.store.GetProgram(ctx, programID)
	if err != nil {
		return fmt.Errorf("read program after a throttled ticket: %w", err)
	}
	programs.Put(p, now)
	return nil
}

// takeFromShards takes run numbers (one for this enter, the rest held) from
// one of c's shards: false when every shard tried was refilled elsewhere or
// throttled, or the program goes back to its item.
func (s *Shards) takeFromShards(ctx context.Context, c admission.Program, run int64, now time.Time) (t queue.Taken, ok bool, err error) {
	k := c.Shards
	notBefore := freshAfter(now, c.OpensAt)
	for range shardTries {
		i := s.intN(s.shardSpan(c.ID, k, now))
		r, ok, err := s.store.TakeShardTickets(ctx, c.ID, i, notBefore, run)
		var old Shard
		var won bool
		var claim string
		// A shard beyond the count is taken from, never refilled.
		if err == nil && !ok && i < k {
			claim = queue.NewTokenID()
			old, won, err = s.store.ClaimShard(ctx, c.ID, i, claim, now, notBefore, now.Add(-claimTimeout))
		}
		switch {
		case errors.Is(err, queue.ErrThrottled):
			k = s.widen(ctx, c.ID, k)
		case err != nil:
			return queue.Taken{}, false, err
		case ok:
			if r.Last > r.First {
				rest := r
				rest.First++
				s.hold(c.ID, rest, i, true, now)
			}
			return queue.Taken{Ticket: r.First}, true, nil
		case won:
			return s.refill(ctx, c.ID, i, k, claim, old, run, now)
		}
	}
	return queue.Taken{}, false, nil
}

const (
	claimTimeout = time.Second // a refill's time before another instance takes it over
	shardTries   = 3           // the shards an enter tries before the program item
)

// refill reserves a block sized from the pace and fills shard i of k, which claim holds, with it.
func (s *Shards) refill(ctx context.Context, id string, i, k int, claim string, old Shard, run int64, now time.Time) (queue.Taken, bool, error) {
	served, asked, _ := s.rates(id, now)
	pc := paceOf(old, served, asked, k, run, now)
	want := s.wantShards(pc, old, asked, k)
	if want != k {
		if _, err := s.setShardCount(ctx, id, k, want); err != nil && !errors.Is(err, queue.ErrThrottled) {
			return queue.Taken{}, false, err
		}
		s.learnShards(id, want, now)
	}
	n := s.refillSize(pc, old, k, want, run)
	q, err := s.store.IssueTickets(ctx, id, now, n)
	if err != nil {
		return queue.Taken{}, false, err
	}
	s.recordAnswer(q, now)
	first := q.Issued - n + 1
	next := first + min(run, n)
	// Filled or not, the block's first numbers are this instance's.
	filled, err := s.store.FillShard(ctx, id, i, claim, now, Shard{Start: first, Next: next, End: q.Issued, ReservedAt: now})
	if err != nil {
		s.logFailure(ctx, "fill shard", id, err, "the block's numbers may be in the shard: never given back, gaps if not")
	}
	s.recordReserved(id, shardBlock{shard: i, start: first, reservedAt: now}, Run{First: next, Last: q.Issued}, filled, err == nil)
	if next-1 > first {
		s.hold(id, Run{First: first + 1, Last: next - 1, ReservedAt: now, Block: first, After: next}, i, filled, now)
	}
	return queue.Taken{Ticket: first, Program: q, Fresh: true}, true, nil
}

// widen doubles k after a shard was throttled (if mayWiden) and returns the count to try next.
func (s *Shards) widen(ctx context.Context, programID string, k int) int {
	now := s.clock.Now()
	if s.fixedShards > 0 || !s.mayWiden(programID, now) {
		return k
	}
	w := min(2*k, MaxShards)
	_, _ = s.setShardCount(ctx, programID, k, w)
	s.learnShards(programID, w, now)
	return w
}

// setShardCount is Store.SetShards, logging a failure.
func (s *Shards) setShardCount(ctx context.Context, programID string, from, k int) (bool, error) {
	set, err := s.store.SetShards(ctx, programID, from, k)
	if err != nil {
		s.logFailure(ctx, "set shards", programID, err, "none: the shard count stays as it was")
	}
	return set, err
}

// logFailure logs that a shard write op failed with err, at cost.
func (s *Shards) logFailure(ctx context.Context, op, programID string, err error, cost string) {
	cmp.Or(s.log, slog.Default()).LogAttrs(ctx, slog.LevelWarn, "ticket shard write failed", slog.String("op", op), slog.String("programId", programID),
		slog.String("error", err.Error()), slog.String("cost", cost))
}

func (s *Shards) intN(n int) int {
	if s.rng != nil {
		return s.rng.IntN(n)
	}
	return rand.IntN(n)
}
