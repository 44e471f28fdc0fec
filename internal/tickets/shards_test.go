package tickets_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/example/waitingroom/internal/admission"
	"github.com/example/waitingroom/internal/api"
	"github.com/example/waitingroom/internal/clock"
	"github.com/example/waitingroom/internal/polling"
	"github.com/example/waitingroom/internal/queue"
	"github.com/example/waitingroom/internal/testing/queuetest"
	"github.com/example/waitingroom/internal/tickets"
	"github.com/example/waitingroom/internal/tools/bench"
	"github.com/example/waitingroom/internal/tools/memstore"
	"github.com/example/waitingroom/internal/tools/partitionmodel"
	"github.com/example/waitingroom/internal/tools/simclock"
)

// countingStore charges every write of the program item and of the shard
// items to DynamoDB's per-partition model (one write unit each: the items
// are under 1 KB), on the crowd's clock.
type countingStore struct {
	*memstore.Store
	clock clock.Clock
	model *partitionmodel.Model
}

func (c *countingStore) charge(key string) {
	c.model.Take(key, partitionmodel.Write, 1, c.clock.Now())
}

func (c *countingStore) IssueTicket(ctx context.Context, id string, now time.Time) (admission.Program, error) {
	c.charge("program")
	return c.Store.IssueTicket(ctx, id, now)
}

func (c *countingStore) IssueTickets(ctx context.Context, id string, now time.Time, n int64) (admission.Program, error) {
	c.charge("program")
	return c.Store.IssueTickets(ctx, id, now, n)
}

func (c *countingStore) SetShards(ctx context.Context, id string, from, k int) (bool, error) {
	c.charge("program")
	return c.Store.SetShards(ctx, id, from, k)
}

func (c *countingStore) TakeShardTickets(ctx context.Context, id string, i int, notBefore time.Time, m int64) (tickets.Run, bool, error) {
	c.charge(fmt.Sprint("shard", i))
	return c.Store.TakeShardTickets(ctx, id, i, notBefore, m)
}

func (c *countingStore) ClaimShard(ctx context.Context, id string, i int, claim string, now, notBefore, claimNotBefore time.Time) (tickets.Shard, bool, error) {
	c.charge(fmt.Sprint("shard", i))
	return c.Store.ClaimShard(ctx, id, i, claim, now, notBefore, claimNotBefore)
}

func (c *countingStore) FillShard(ctx context.Context, id string, i int, claim string, claimedAt time.Time, b tickets.Shard) (bool, error) {
	c.charge(fmt.Sprint("shard", i))
	return c.Store.FillShard(ctx, id, i, claim, claimedAt, b)
}

func (c *countingStore) TrimShard(ctx context.Context, id string, i int, start int64, reservedAt time.Time, back tickets.Run) (tickets.Run, bool, error) {
	c.charge(fmt.Sprint("shard", i))
	return c.Store.TrimShard(ctx, id, i, start, reservedAt, back)
}

func (c *countingStore) ReturnTickets(ctx context.Context, p admission.Program, from int64) (bool, error) {
	c.charge("program")
	return c.Store.ReturnTickets(ctx, p, from)
}

// programWrites is the most writes the program item took in a second.
func (c *countingStore) programWrites() int64 {
	for _, p := range c.model.Stats() {
		if p.Key == "program" {
			return p.MaxWritesPerSecond
		}
	}
	return 0
}

// throttled is how many writes the model refused, of any item.
func (c *countingStore) throttled() int64 { return c.model.Summarize().ThrottledWrites }

// crowd is a run of enters through several instances sharing one store
// and one clock: what each entrant got.
type crowd struct {
	store     *countingStore
	clock     *simclock.Fake
	instances []*queue.Service
	rng       *rand.Rand
	entrants  []bench.Entrant
	tokens    []string
	tickets   map[int64]int
}

func newCrowd(t *testing.T, instances int, writeUnits float64, rate float64, seed uint64) *crowd {
	t.Helper()
	c := &crowd{clock: simclock.NewFake(t0), rng: rand.New(rand.NewPCG(seed, 1)), tickets: map[int64]int{}}
	c.store = &countingStore{Store: memstore.New(), clock: c.clock, model: partitionmodel.NewModel(partitionmodel.Limits{WriteUnits: writeUnits, ReadUnits: 3 * writeUnits})}
	for i := range instances {
		svc, _ := instance(c.store, c.clock, rand.New(rand.NewPCG(seed, uint64(i))), writeUnits, queue.WithShuffleKey(queuetest.ShuffleKey(t)))
		c.instances = append(c.instances, svc)
	}
	if _, _, err := c.instances[0].PutProgram(t.Context(), "p", api.ProgramSettings{AdmissionRatePerSecond: new(api.Rate(rate))}); err != nil {
		t.Fatal(err)
	}
	return c
}

// arrive makes n people enter at perSecond, each on a random instance.
func (c *crowd) arrive(t *testing.T, n int, perSecond float64) {
	t.Helper()
	gap := time.Duration(float64(time.Second) / perSecond)
	for range n {
		c.clock.Advance(gap)
		svc := c.instances[c.rng.IntN(len(c.instances))]
		v, created, err := svc.Enter(t.Context(), "p", queue.Entry{})
		if err != nil || !created {
			t.Fatalf("enter at +%v: %v (created %v)", c.clock.Now().Sub(t0), err, created)
		}
		c.tickets[v.Ticket]++
		c.tokens = append(c.tokens, v.TokenID)
		c.entrants = append(c.entrants, bench.Entrant{EnteredMs: v.IssuedAt.UnixMilli(), Place: v.Ticket})
	}
}

// pollAll advances the clock by d, a poll of a random token on every
// instance each 100 ms.
func (c *crowd) pollAll(t *testing.T, d time.Duration) {
	t.Helper()
	for end := c.clock.Now().Add(d); c.clock.Now().Before(end); {
		c.clock.Advance(100 * time.Millisecond)
		for _, svc := range c.instances {
			if _, err := svc.Poll(t.Context(), "p", c.tokens[c.rng.IntN(len(c.tokens))]); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func (c *crowd) program(t *testing.T) admission.Program {
	t.Helper()
	p, err := c.store.GetProgram(t.Context(), "p")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// check asserts the guarantees of the ticket order: no ticket twice, none
// beyond the counter, gaps at most maxGaps of the tickets, nobody who
// entered BlockLifetime before another behind them.
func (c *crowd) check(t *testing.T, maxGaps float64) (gaps int64) {
	t.Helper()
	p := c.program(t)
	for tk, n := range c.tickets {
		if n > 1 || tk < 1 || tk > p.Issued {
			t.Fatalf("ticket %d handed out %d times (issued %d)", tk, n, p.Issued)
		}
	}
	gaps = p.Issued - int64(len(c.tickets))
	if float64(gaps) > maxGaps*float64(p.Issued) {
		t.Errorf("%d gaps among %d tickets, over %g %%", gaps, p.Issued, 100*maxGaps)
	}
	if inv := bench.MaxInversion(c.entrants); inv >= tickets.BlockLifetime.Milliseconds() {
		t.Errorf("worst inversion %d ms, want under %v", inv, tickets.BlockLifetime)
	}
	return gaps
}

// TestTicketShardsCrowd: 50,000 people at 5,000 a second, ten times the
// program item's comfortable rate at a 1,000-unit write limit, through 8
// instances that each take a few numbers at a time, and through 200 (as
// many Lambda instances, each asked for 25 a second) that take one: every
// ticket once, gaps under 1 %, inversions under the block lifetime, no
// shard item over 70 % of its limit, and the program item written at most
// half its limit in any second. Then the rate falls and the program goes
// back to single tickets.
func TestTicketShardsCrowd(t *testing.T) {
	for _, instances := range []int{8, 200} {
		for seed := range uint64(2) {
			c := newCrowd(t, instances, tickets.DefaultItemWriteUnits, 200, seed)
			c.arrive(t, 50_000, 5_000)
			if p := c.program(t); p.Shards < 1 {
				t.Errorf("%d instances, seed %d: no shards at 5,000 enters a second", instances, seed)
			}
			gaps := c.check(t, 0.01)
			if w, n := c.store.programWrites(), c.store.throttled(); w > tickets.DefaultItemWriteUnits/2 || n > 0 {
				t.Errorf("%d instances, seed %d: %d program item writes in one second (want at most half the limit), %d writes throttled (want none)", instances, seed, w, n)
			}
			t.Logf("%d instances, seed %d: %d shards, %d gaps, worst inversion %d ms, at most %d program writes a second",
				instances, seed, c.program(t).Shards, gaps, bench.MaxInversion(c.entrants), c.store.programWrites())
			c.clock.Advance(5 * time.Second)
			c.arrive(t, 200, 20)
			if p := c.program(t); p.Shards != 0 {
				t.Errorf("%d instances, seed %d: %d shards at 20 enters a second, want 0 (single tickets again)", instances, seed, p.Shards)
			}
			c.check(t, 0.01)
		}
	}
}

// TestTicketShardsGiveBack: when a crowd on ticket shards stops, the
// numbers its blocks reserved and nobody took are given back once the
// instances see polls: the gaps shrink (through one instance, to none), nobody's position goes up, and the next
// crowd is handed the numbers again, each once. A queue that drains as
// fast as it fills gives nothing back (its counter is too close).
func TestTicketShardsGiveBack(t *testing.T) {
	for _, tc := range []struct {
		name        string
		instances   int
		units, rate float64
		n           int
		perSecond   float64
		wantReturns bool
		wantNone    bool
		maxGaps     float64
	}{
		{"one instance at scale 0.1", 1, tickets.DefaultItemWriteUnits / 10, 100, 3_000, 1_000, true, true, 0.01},
		{"8 instances", 8, tickets.DefaultItemWriteUnits, 200, 30_000, 5_000, true, false, 0.01},
		{"50 instances", 50, tickets.DefaultItemWriteUnits, 200, 30_000, 5_000, true, false, 0.01},
		// Its gaps are passed at once: nobody waits behind them.
		{"a queue that drains at once", 8, tickets.DefaultItemWriteUnits, 100_000, 20_000, 5_000, false, false, 0.03},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var before, after int64 // gaps, over three crowds
			for seed := range uint64(3) {
				b, a := giveBack(t, newCrowd(t, tc.instances, tc.units, tc.rate, seed), tc.n, tc.perSecond, tc.maxGaps)
				before, after = before+b, after+a
			}
			t.Logf("gaps %d before the give-back, %d after, of %d tickets", before, after, 3*tc.n)
			switch {
			case tc.wantReturns && (before == 0 || after >= before):
				t.Errorf("gaps %d before the polls, %d after: want fewer", before, after)
			case !tc.wantReturns && after != before:
				t.Errorf("gaps %d before the polls, %d after: want them kept (the counter is at them)", before, after)
			case tc.wantNone && after != 0:
				t.Errorf("%d gaps left after the give-back: want none through one instance", after)
			}
		})
	}
}

// giveBack runs n people entering at perSecond through c, then 3 s of
// polls, and returns the gaps before and after the polls; it checks that
// no position went up, and that a second crowd (half as large, polled
// after too) gets every number once, with at most maxGaps gaps.
func giveBack(t *testing.T, c *crowd, n int, perSecond, maxGaps float64) (before, after int64) {
	t.Helper()
	c.arrive(t, n, perSecond)
	before = c.program(t).Issued - int64(len(c.tickets))
	sample := func() map[string]int64 {
		pos := map[string]int64{}
		for i := 0; i < len(c.tokens); i += len(c.tokens) / 50 {
			v, err := c.instances[i%len(c.instances)].Poll(t.Context(), "p", c.tokens[i])
			if err != nil {
				t.Fatal(err)
			}
			pos[c.tokens[i]] = v.Position
		}
		return pos
	}
	was := sample()
	c.pollAll(t, 3*time.Second)
	for tok, pos := range sample() {
		if pos > was[tok] {
			t.Errorf("token %s: position %d after the give-back, %d before", tok, pos, was[tok])
		}
	}
	after = c.program(t).Issued - int64(len(c.tickets))
	c.arrive(t, n/2, perSecond)
	c.pollAll(t, 3*time.Second)
	c.check(t, maxGaps)
	return before, after
}

// TestTicketShardsLowRate: below the switch rate an enter is exactly what
// it always was: one ticket from the program item, consecutive, the
// program as WithTicketIssued leaves it.
func TestTicketShardsLowRate(t *testing.T) {
	c := newCrowd(t, 4, tickets.DefaultItemWriteUnits, 10, 7)
	want := c.program(t)
	gap := time.Second / 150
	for i := range 3_000 {
		c.clock.Advance(gap)
		v, _, err := c.instances[i%4].Enter(t.Context(), "p", queue.Entry{})
		if err != nil {
			t.Fatal(err)
		}
		want = want.WithTicketIssued(c.clock.Now())
		if v.Ticket != int64(i+1) {
			t.Fatalf("enter %d got ticket %d", i+1, v.Ticket)
		}
	}
	got := c.program(t)
	if got.Shards != 0 || got.Issued != want.Issued || got.DrainAtNs != want.DrainAtNs || got.Current != want.Current {
		t.Errorf("after 3,000 enters at 150/s: %+v, want single tickets: %+v", got, want)
	}
}

// TestTicketShardsScaled: at a tenth of the limits (the local server's
// -partition-limits scale=0.1), 1,000 enters a second through one
// instance: no write throttled, the program item under half its 100 writes
// a second, and the gaps (the blocks' last numbers when the crowd stops)
// within 5 %.
func TestTicketShardsScaled(t *testing.T) {
	c := newCrowd(t, 1, tickets.DefaultItemWriteUnits/10, 100, 3)
	c.arrive(t, 10_000, 1_000)
	gaps := c.check(t, 0.05)
	if w, n := c.store.programWrites(), c.store.throttled(); w > 50 || n > 0 {
		t.Errorf("%d program item writes in one second (want ≤ 50), %d throttled (want none)", w, n)
	}
	t.Logf("%d gaps of 10,000, at most %d program writes a second", gaps, c.store.programWrites())
}

// TestTicketShardsClose: closing a program on shards refuses new entries
// on the instance that closed it at once, and on every instance once the
// blocks reserved before it have gone stale.
func TestTicketShardsClose(t *testing.T) {
	c := newCrowd(t, 4, tickets.DefaultItemWriteUnits, 200, 5)
	c.arrive(t, 5_000, 5_000)
	if c.program(t).Shards == 0 {
		t.Fatal("no shards at 5,000 enters a second")
	}
	closed := true
	if _, _, err := c.instances[0].PutProgram(t.Context(), "p", api.ProgramSettings{Closed: &closed}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.instances[0].Enter(t.Context(), "p", queue.Entry{}); queue.ErrorKind(err) != queue.KindConflict {
		t.Errorf("enter on the instance that closed the program: %v, want PROGRAM_CLOSED", err)
	}
	c.clock.Advance(tickets.BlockLifetime)
	for i, svc := range c.instances {
		if _, _, err := svc.Enter(t.Context(), "p", queue.Entry{}); queue.ErrorKind(err) != queue.KindConflict {
			t.Errorf("enter on instance %d a block lifetime after the close: %v, want PROGRAM_CLOSED", i, err)
		}
	}
}

// failingFills is a store whose shard fills fail: every refill's block
// but its first number is lost.
type failingFills struct{ *memstore.Store }

func (failingFills) FillShard(context.Context, string, int, string, time.Time, tickets.Shard) (bool, error) {
	return false, context.DeadlineExceeded
}

// TestTicketShardsFillFails: refills that never land cost at most gaps,
// never a duplicate, and enters go on (from the refiller's own numbers,
// other shards, else the program item).
func TestTicketShardsFillFails(t *testing.T) {
	clk := simclock.NewFake(t0)
	store := failingFills{memstore.New()}
	svc, _ := instance(store, clk, rand.New(rand.NewPCG(1, 2)), 100)
	rate := 10.0
	if _, _, err := svc.PutProgram(t.Context(), "p", api.ProgramSettings{AdmissionRatePerSecond: new(api.Rate(rate))}); err != nil {
		t.Fatal(err)
	}
	seen := map[int64]bool{}
	for i := range 2_000 {
		clk.Advance(time.Millisecond)
		v, _, err := svc.Enter(t.Context(), "p", queue.Entry{})
		if err != nil {
			t.Fatalf("enter %d: %v", i, err)
		}
		if seen[v.Ticket] {
			t.Fatalf("ticket %d handed out twice", v.Ticket)
		}
		seen[v.Ticket] = true
	}
	if p, _ := store.GetProgram(t.Context(), "p"); p.Shards == 0 {
		t.Errorf("program %+v: want shards in use", p)
	}
}

// TestTicketShardsOpening: a crowd on ticket shards before and after a
// shuffled opening: every ticket of who entered before it is in the
// pre-queue, every ticket of who entered after it behind, whatever blocks
// the shards held at the opening (their numbers left are gaps).
func TestTicketShardsOpening(t *testing.T) {
	c := newCrowd(t, 50, tickets.DefaultItemWriteUnits, 200, 9)
	opens, yes := t0.Add(10*time.Second), true
	if _, _, err := c.instances[0].PutProgram(t.Context(), "p", api.ProgramSettings{OpensAt: new(opens.Format(time.RFC3339Nano)), ShuffleAtOpen: &yes}); err != nil {
		t.Fatal(err)
	}
	c.clock.Advance(9 * time.Second)
	c.arrive(t, 4_999, 5_000) // up to just before the opening
	before := len(c.entrants)
	c.arrive(t, 10_000, 5_000)
	p := c.program(t)
	if !p.PrequeueFixed || p.Shards == 0 {
		t.Fatalf("program after the opening: %+v; want the pre-queue fixed, on shards", p)
	}
	for i, e := range c.entrants {
		entered := time.UnixMilli(e.EnteredMs)
		if inPrequeue := e.Place <= p.Prequeue; inPrequeue != entered.Before(opens) {
			t.Fatalf("entrant %d entered at %v (opening %v) holds ticket %d, pre-queue 1..%d", i, entered, opens, e.Place, p.Prequeue)
		}
	}
	t.Logf("%d before the opening, pre-queue of %d tickets; %d after", before, p.Prequeue, len(c.entrants)-before)
	// The blocks in flight at the opening are dropped: gaps, about a
	// block's time of arrivals twice (the opening and the end).
	c.check(t, 0.03)
}

// retriedFills is a store whose shard fills are each applied and then
// tried again, as the SDK retries a write whose answer was lost: the
// caller gets the retry's answer.
type retriedFills struct{ *memstore.Store }

func (s retriedFills) FillShard(ctx context.Context, id string, i int, claim string, claimedAt time.Time, b tickets.Shard) (bool, error) {
	if ok, err := s.Store.FillShard(ctx, id, i, claim, claimedAt, b); !ok || err != nil {
		return ok, err
	}
	return s.Store.FillShard(ctx, id, i, claim, claimedAt, b)
}

// TestTicketShardsFillAnswerLost: a fill applied but answered on its
// retry is a fill: its numbers are never given back while the shard hands
// them out. After a crowd on a, b refills a shard and a takes from b's
// block; when the crowd stops both give back only what nobody took: no
// ticket is above the program's last, none handed out twice when enters
// come again.
func TestTicketShardsFillAnswerLost(t *testing.T) {
	clk := simclock.NewFake(t0)
	store := retriedFills{memstore.New()}
	var svcs [2]*queue.Service
	for i := range svcs {
		svcs[i], _ = instance(store, clk, rand.New(rand.NewPCG(1, uint64(i))), 100)
	}
	a, b := svcs[0], svcs[1]
	rate := 10.0
	if _, _, err := a.PutProgram(t.Context(), "p", api.ProgramSettings{AdmissionRatePerSecond: new(api.Rate(rate))}); err != nil {
		t.Fatal(err)
	}
	holder := map[int64]string{}
	enter := func(svc *queue.Service, n int, every time.Duration) {
		t.Helper()
		for i := range n {
			clk.Advance(every)
			v, _, err := svc.Enter(t.Context(), "p", queue.Entry{})
			if err != nil {
				t.Fatalf("enter %d: %v", i, err)
			}
			if other, ok := holder[v.Ticket]; ok {
				t.Fatalf("ticket %d handed out twice: to %s and %s", v.Ticket, other, v.TokenID)
			}
			holder[v.Ticket] = v.TokenID
		}
	}
	check := func() {
		t.Helper()
		p, err := store.GetProgram(t.Context(), "p")
		if err != nil {
			t.Fatal(err)
		}
		for tk, tok := range holder {
			if tk > p.Issued {
				t.Fatalf("token %s holds ticket %d, above the last ticket %d: given back while held", tok, tk, p.Issued)
			}
		}
	}
	for range 3 {
		enter(a, 2_000, time.Millisecond)
		enter(b, 5, time.Millisecond) // from a's last block
		// Quiet: a poll makes a trim its blocks and give back.
		enter(a, 5, time.Millisecond) // from b's block
		clk.Advance(2 * time.Second)
		for _, tok := range holder {
			for _, svc := range svcs {
				if _, err := svc.Poll(t.Context(), "p", tok); err != nil {
					t.Fatal(err)
				}
			}
			break
		}
		check()
		clk.Advance(2 * time.Second)
		enter(a, 50, 100*time.Millisecond) // single tickets: the numbers given back
		check()
	}
}

// TestTicketShardsFixedSizing: with tickets.WithFixedSizing a program on
// shards uses the fixed count whatever its pace, and no ticket is handed
// out twice.
func TestTicketShardsFixedSizing(t *testing.T) {
	clk := simclock.NewFake(t0)
	st := memstore.New()
	shards := tickets.New(st, tickets.WithItemWriteLimit(tickets.DefaultItemWriteUnits), tickets.WithClock(clk),
		tickets.WithRand(rand.New(rand.NewPCG(1, 3))), tickets.WithFixedSizing(24, 200))
	svc := queue.NewService(st, polling.DefaultTiers(), queue.WithClock(clk), queue.WithProgramCache(time.Second), queue.WithTickets(shards))
	if _, _, err := svc.PutProgram(t.Context(), "p", api.ProgramSettings{AdmissionRatePerSecond: new(api.Rate(200))}); err != nil {
		t.Fatal(err)
	}
	seen := map[int64]bool{}
	for i := range 5_000 {
		clk.Advance(200 * time.Microsecond)
		v, _, err := svc.Enter(t.Context(), "p", queue.Entry{})
		if err != nil || seen[v.Ticket] {
			t.Fatalf("enter %d: ticket %d (handed out before: %v), %v", i, v.Ticket, seen[v.Ticket], err)
		}
		seen[v.Ticket] = true
	}
	if p, err := st.GetProgram(t.Context(), "p"); err != nil || p.Shards != 24 {
		t.Errorf("program after 5,000 enters at 5,000 a second: %d shards (%v); want the fixed 24", p.Shards, err)
	}
}
