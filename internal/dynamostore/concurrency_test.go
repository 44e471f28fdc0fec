package dynamostore_test

// The queue's invariants under concurrency, against the DynamoDB API server:
// people entering, polling, refreshing and leaving while an admin admits,
// pauses, resumes and changes the rate, on one function instance and on two
// that share the table, each with its own program cache.

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/example/waitingroom/internal/admission"
	"github.com/example/waitingroom/internal/api"
	"github.com/example/waitingroom/internal/dynamostore"
	"github.com/example/waitingroom/internal/polling"
	"github.com/example/waitingroom/internal/queue"
	"github.com/example/waitingroom/internal/testing/clocktest"
	"github.com/example/waitingroom/internal/testing/dynamotest"
	"github.com/example/waitingroom/internal/tickets"
)

// Sizes: the run is rounds of the instances' clock; in each, 8 people make
// a few calls each at once and the admin makes one operation, and the
// round ends when all have answered. 40 rounds of 250 ms make some
// hundred tokens and about a thousand calls, enough to interleave every
// kind of call with every other, and 10 s of the clock: admissions at the
// rate, shard blocks going stale, changes taking effect. The work is the
// same on any machine; concurrencyTimeout is a hang guard.
const (
	concurrencyWorkers     = 8
	concurrencyRounds      = 40
	callsPerRound          = 3
	roundStep              = 250 * time.Millisecond
	concurrencyTimeout     = 2 * time.Minute
	initialTokensPerWorker = 6
	maxTokensPerWorker     = 40
	concurrencyProgram     = "rush"
)

// observation is what one call told about one token.
type observation struct {
	seq      int // per worker, in the order the calls ended
	instance int
	op       string // enter, refresh, poll, leave, sweep
	status   queue.Status
	position int64 // WAITING only
}

func (o observation) String() string {
	s := fmt.Sprintf("#%d %s@%d %s", o.seq, o.op, o.instance, o.status)
	if o.status == queue.StatusWaiting {
		s += fmt.Sprintf(" pos %d", o.position)
	}
	return s
}

// history is every observation of one token, in order: each token belongs
// to one worker, whose calls are sequential.
type history struct {
	id          string
	obs         []observation
	leaveFailed bool // a leave answered with an error: the token may or may not have left
}

func (h *history) last() observation { return h.obs[len(h.obs)-1] }

// allowedMoves are the status changes a token may show between two
// observations (a status may also repeat).
var allowedMoves = map[[2]queue.Status]bool{
	{queue.StatusWaiting, queue.StatusAdmitted}: true,
	{queue.StatusWaiting, queue.StatusLeft}:     true,
	{queue.StatusAdmitted, queue.StatusExpired}: true,
	{queue.StatusAdmitted, queue.StatusLeft}:    true, // an admission ended early
}

// tally counts the calls' outcomes that are not observations.
type tally struct {
	calls, unavailable, slow, busy atomic.Int64
}

func TestConcurrency(t *testing.T) {
	t.Parallel()
	// Each run leases a server of its own, so the runs go in parallel.
	run := func(name string, instances int, writeUnits float64, bursts bool) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			testConcurrency(t, instances, writeUnits, bursts)
		})
	}
	run("OneInstance", 1, 0, false)
	run("TwoInstances", 2, 0, false)
	// An item write limit of 5 units a second puts the program on ticket
	// shards at a couple of enters a second: the same invariants with
	// tickets from shard blocks, refills and shard count changes racing.
	run("TwoInstancesSharded", 2, 5, false)
	// Enters in bursts (two rounds in ten), with quiet spells of polls
	// between them longer than a block lifetime: the instances trim their
	// blocks and give numbers back while the workers poll, leave and are
	// admitted. Through one instance every block at the top is its own and
	// each burst ends with numbers left there (forceLeftAtTop), so it must
	// give some back; through two the same invariants hold whatever it gives.
	run("OneInstanceShardedBursts", 1, 20, true)
	run("TwoInstancesShardedBursts", 2, 20, true)
}

// adminOp is one of the admin's operations: an admission of admit, a
// change to set, or else a read.
type adminOp struct {
	what  string
	admit int64
	set   *api.ProgramSettings
}

// adminCycle is the admin's operations in the order it makes them, each
// kind at least once: admissions, a pause and a resume, a rate change, a
// read. Like an operator, the admin makes a change only once the previous
// one has taken effect, and reads meanwhile.
var adminCycle = []adminOp{
	{what: "admit 3", admit: 3},
	{what: "paused=true", set: &api.ProgramSettings{Paused: new(true)}},
	{what: "rate=8", set: &api.ProgramSettings{AdmissionRatePerSecond: new(api.Rate(8))}},
	{what: "paused=false", set: &api.ProgramSettings{Paused: new(false)}},
	{what: "admit 8", admit: 8},
	{what: "read"},
}

// burstPeriod is the period of the bursts of enters, in rounds: enters in
// its first burstOn, polls, leaves and admin reads all along.
const burstPeriod, burstOn = 10, 2

// givingBack counts the tickets a store gave back.
type givingBack struct {
	*dynamostore.Store
	returned *atomic.Int64
}

func (g givingBack) ReturnTickets(ctx context.Context, p admission.Program, from int64) (bool, error) {
	ok, err := g.Store.ReturnTickets(ctx, p, from)
	if ok {
		g.returned.Add(p.Issued - from + 1)
	}
	return ok, err
}

// testConcurrency runs the workers on instances sharing the table and a
// clock; with writeUnits > 0 the instances size their ticket shards for
// items of that write limit (tickets.WithItemWriteLimit), else take every
// ticket from the program item; with bursts, enters come in bursts
// (burstPeriod).
func testConcurrency(t *testing.T, instances int, writeUnits float64, bursts bool) {
	endpoint := dynamotest.Lease(t)
	var (
		table  string
		client *dynamodb.Client
	)
	// The instances' clock moves between rounds only: within one, every
	// call happens at one instant, and a wait (a conflict's backoff) does
	// not move it.
	clk := clocktest.NewFrozen(t0)
	svcs := make([]*queue.Service, instances)
	var returned atomic.Int64
	for i := range svcs {
		// One client per instance, as each Lambda instance has its own.
		c := newClientAt(t, endpoint)
		if i == 0 {
			client, table = c, dynamotest.NewTable(t, c)
		}
		store := givingBack{dynamostore.New(c, table), &returned}
		svcs[i] = queue.NewService(store, polling.DefaultTiers(), queue.WithProgramCache(time.Second), queue.WithClock(clk),
			queue.WithTickets(tickets.New(store, tickets.WithItemWriteLimit(writeUnits), tickets.WithClock(clk))))
	}
	rate, paused := 4.0, false
	if bursts {
		rate = 3 // a queue long enough that the counter stays far from the numbers to give back
	}
	if _, _, err := svcs[0].PutProgram(t.Context(), concurrencyProgram, api.ProgramSettings{AdmissionRatePerSecond: new(api.Rate(rate)), Paused: &paused}); err != nil {
		t.Fatal(err)
	}

	var (
		tl        tally
		mu        sync.Mutex
		histories []*history
		counters  []admission.Counters
		failures  []string
	)
	fail := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		failures = append(failures, fmt.Sprintf(format, args...))
	}
	// unexpected sorts a call's error: store faults and BUSY are counted,
	// anything else is a failure.
	unexpected := func(what string, err error) {
		var qe *queue.Error
		switch {
		case errors.As(err, &qe) && qe.Code == api.CodeBusy:
			tl.busy.Add(1)
		case errors.As(err, &qe) && qe.Kind == queue.KindUnavailable && timedOut(err):
			tl.slow.Add(1)
		case errors.As(err, &qe) && qe.Kind == queue.KindUnavailable:
			tl.unavailable.Add(1)
		default:
			fail("%s: %v", what, err)
		}
	}
	runCtx, cancelRun := context.WithTimeout(t.Context(), concurrencyTimeout) // a hang guard
	defer cancelRun()
	// call runs one request, counted.
	call := func(f func(ctx context.Context) error) error {
		tl.calls.Add(1)
		return f(runCtx)
	}

	// enterShare is the share of a worker's calls in round that are
	// enters: 8 %, with bursts 40 % within a burst (enough for runs of
	// numbers and blocks with numbers left when it ends) and none between.
	enterShare := func(round int) float64 {
		switch {
		case !bursts:
			return 0.08
		case round%burstPeriod < burstOn:
			return 0.4
		}
		return 0
	}
	// A worker is one person's browser tabs: its tokens, its random
	// choices, and its calls so far.
	type worker struct {
		rng   *rand.Rand
		mine  []*history
		focus *history
		seq   int
	}
	workers := make([]*worker, concurrencyWorkers)
	for w := range workers {
		workers[w] = &worker{rng: rand.New(rand.NewPCG(uint64(instances), uint64(w)))}
	}
	// observe records what a call told of h.
	observe := func(wk *worker, h *history, instance int, op string, v queue.View) {
		wk.seq++
		h.obs = append(h.obs, observation{seq: wk.seq, instance: instance, op: op, status: v.Status, position: v.Position})
	}
	// step makes one call of wk's in round: an enter, a refresh, a leave
	// (for sure with leave) or a poll, on a random instance.
	step := func(wk *worker, round int, leave bool) {
		in := wk.rng.IntN(instances)
		svc := svcs[in]
		r := wk.rng.Float64()
		switch {
		// A crowd arrives first; then mostly polls, as in a real
		// queue, so that the instances' program caches age between
		// enters (each enter refreshes its instance's cache).
		case !leave && (len(wk.mine) < initialTokensPerWorker || r < enterShare(round) && len(wk.mine) < maxTokensPerWorker):
			var v queue.View
			err := call(func(ctx context.Context) (err error) {
				v, _, err = svc.Enter(ctx, concurrencyProgram, queue.Entry{})
				return
			})
			if err != nil {
				unexpected("enter", err)
				return
			}
			h := &history{id: v.TokenID}
			observe(wk, h, in, "enter", v)
			wk.mine = append(wk.mine, h)
		case !leave && r < 0.12:
			h := wk.mine[wk.rng.IntN(len(wk.mine))]
			if h.leaveFailed || h.last().status == queue.StatusLeft {
				return
			}
			var v queue.View
			var created bool
			err := call(func(ctx context.Context) (err error) {
				v, created, err = svc.Enter(ctx, concurrencyProgram, queue.Entry{Token: h.id})
				return
			})
			switch {
			case err != nil:
				unexpected("refresh", err)
			case created:
				fail("refresh of %s (last %v) got a new token: a still valid token lost its place", h.id, h.last())
			default:
				observe(wk, h, in, "refresh", v)
			}
		case leave || r < 0.18:
			// Mostly people still waiting leave; now and then one who was
			// admitted meanwhile tries.
			h := wk.mine[wk.rng.IntN(len(wk.mine))]
			if leave || wk.rng.IntN(4) != 0 {
				for _, i := range wk.rng.Perm(len(wk.mine)) {
					if wk.mine[i].last().status == queue.StatusWaiting {
						h = wk.mine[i]
						break
					}
				}
			}
			err := call(func(ctx context.Context) error { return svc.Leave(ctx, concurrencyProgram, h.id) })
			switch {
			case err != nil:
				h.leaveFailed = true
				unexpected("leave", err)
			case h.last().status == queue.StatusExpired:
				// An admission over stays EXPIRED.
			default:
				// Waiting, or admitted: it reads LEFT either way.
				observe(wk, h, in, "leave", queue.View{Status: queue.StatusLeft})
			}
		default:
			// People poll their own token again and again (through
			// whichever instance), and now and then another one's.
			if wk.focus == nil || wk.focus.last().status == queue.StatusLeft || wk.rng.IntN(4) == 0 {
				wk.focus = wk.mine[wk.rng.IntN(len(wk.mine))]
			}
			h := wk.focus
			var v queue.View
			err := call(func(ctx context.Context) (err error) { v, err = svc.Poll(ctx, concurrencyProgram, h.id); return })
			if err != nil {
				unexpected("poll", err)
				return
			}
			observe(wk, h, in, "poll", v)
		}
	}
	// The admin: one operation a round, through a random instance (the
	// admin function is yet another one; what matters is that the others
	// learn of it only through the table): the next of adminCycle once the
	// last change has taken effect, else a read; with bursts only reads (a
	// change is pending for a cache TTL and holds numbers back meanwhile:
	// the rate admits).
	adminRng := rand.New(rand.NewPCG(uint64(instances), 99))
	var next int
	var effective time.Time // of the admin's last change
	admin := func() {
		svc := svcs[adminRng.IntN(instances)]
		op := adminOp{what: "read"}
		if !bursts && !clk.Now().Before(effective) {
			op = adminCycle[next%len(adminCycle)]
			next++
		}
		var c admission.Counters
		var err error
		switch {
		case op.admit > 0:
			err = call(func(ctx context.Context) (err error) { c, err = svc.Admit(ctx, concurrencyProgram, op.admit); return })
		case op.set != nil:
			err = call(func(ctx context.Context) (err error) {
				c, _, err = svc.PutProgram(ctx, concurrencyProgram, *op.set)
				return
			})
		default:
			err = call(func(ctx context.Context) (err error) { c, err = svc.Program(ctx, concurrencyProgram); return })
		}
		if err != nil {
			unexpected(op.what, err)
			return
		}
		if op.admit > 0 || op.set != nil {
			effective = c.EffectiveAt
		}
		mu.Lock()
		counters = append(counters, c)
		mu.Unlock()
	}
	// The run is concurrencyRounds, and longer if the admin's cycle is not
	// done by then: when a change takes effect depends on the state the
	// crowd's calls in its round left (shard blocks out, a pending change),
	// which the order of calls within a round decides.
	for round := 0; round < concurrencyRounds || !bursts && next < len(adminCycle); round++ {
		if round == 2*concurrencyRounds {
			t.Fatalf("the admin made %d operations of its cycle of %d in %d rounds", next, len(adminCycle), round)
		}
		clk.Advance(roundStep)
		var wg sync.WaitGroup
		for _, wk := range workers {
			wg.Go(func() {
				for i := range callsPerRound {
					// In the round after the crowd's, each person's
					// first call leaves a place still waiting.
					step(wk, round, round == initialTokensPerWorker/callsPerRound && i == 0)
				}
			})
		}
		wg.Go(admin)
		wg.Wait()
		if runCtx.Err() != nil {
			t.Fatalf("round %d: the run did not end within %v", round, concurrencyTimeout)
		}
		if bursts && instances == 1 && round%burstPeriod == burstOn-1 {
			// Whether the burst's last enters left numbers in the top
			// block depends on their interleaving: enter until it holds
			// some, so that there is something to give back.
			forceLeftAtTop(t, svcs[0], dynamostore.New(client, table), func(h *history, v queue.View) {
				workers[0].seq++
				h.obs = append(h.obs, observation{seq: workers[0].seq, op: "enter", status: v.Status, position: v.Position})
				workers[0].mine = append(workers[0].mine, h)
			})
		}
	}
	for _, wk := range workers {
		histories = append(histories, wk.mine...)
	}

	// The sweep: pause once the last change has taken effect, let the
	// pause and every admission window run out, and read every token once
	// more. Admitted tokens now read EXPIRED, waiting ones stay WAITING
	// behind the paused counter.
	ctx := t.Context()
	if clk.Now().Before(effective) {
		clk.Advance(effective.Sub(clk.Now()))
	}
	paused = true
	if _, _, err := svcs[0].PutProgram(ctx, concurrencyProgram, api.ProgramSettings{Paused: &paused}); err != nil {
		t.Fatalf("pause: %v", err)
	}
	clk.Advance(admission.DefaultAdmissionWindow + time.Minute)
	final, err := svcs[0].Program(ctx, concurrencyProgram)
	if err != nil {
		t.Fatal(err)
	}
	counters = append(counters, final)
	if writeUnits > 0 {
		if sh, err := dynamostore.New(client, table).GetShard(ctx, concurrencyProgram, 0); err != nil || sh.End == 0 {
			t.Errorf("shard 0 after the run: %+v, %v; want it filled at least once", sh, err)
		}
	}
	var sweep sync.WaitGroup
	nextToken := atomic.Int64{}
	for range 4 {
		sweep.Go(func() {
			for i := int(nextToken.Add(1) - 1); i < len(histories); i = int(nextToken.Add(1) - 1) {
				h := histories[i]
				in := i % instances
				v, err := svcs[in].Poll(ctx, concurrencyProgram, h.id)
				if err != nil {
					fail("sweep poll of %s: %v", h.id, err)
					continue
				}
				h.obs = append(h.obs, observation{seq: 1 << 30, instance: in, op: "sweep", status: v.Status, position: v.Position})
			}
		})
	}
	sweep.Wait()

	// The checks.
	for _, f := range failures {
		t.Error(f)
	}
	for _, c := range counters {
		if c.Admitted > c.Issued || c.Admitted < 0 || c.Waiting != c.Issued-c.Admitted {
			t.Errorf("counters %+v: admitted above issued", c)
		}
	}
	moves := map[string]int{}
	for _, h := range histories {
		for i := 1; i < len(h.obs); i++ {
			prev, cur := h.obs[i-1], h.obs[i]
			if prev.status != cur.status {
				moves[string(prev.status)+"→"+string(cur.status)]++
				if !allowedMoves[[2]queue.Status{prev.status, cur.status}] {
					t.Errorf("token %s: status %s → %s\n%s", h.id, prev.status, cur.status, h)
				}
			}
			if prev.status == queue.StatusWaiting && cur.status == queue.StatusWaiting && cur.position > prev.position {
				t.Errorf("token %s: position %d → %d\n%s", h.id, prev.position, cur.position, h)
			}
		}
		if n := len(h.obs); n > 1 && h.obs[n-2].status == queue.StatusAdmitted && h.obs[n-1].status != queue.StatusExpired && h.obs[n-1].status != queue.StatusLeft {
			t.Errorf("token %s: not EXPIRED after its admission window\n%s", h.id, h)
		}
	}
	t.Logf("%d instance(s): %d calls, %d tokens, %d store faults, %d store timeouts, %d BUSY; status moves %v; final %d issued, %d admitted, %d given back",
		instances, tl.calls.Load(), len(histories), tl.unavailable.Load(), tl.slow.Load(), tl.busy.Load(), moves,
		final.Issued, final.Admitted, returned.Load())
	if tl.unavailable.Load() > tl.calls.Load()/20 {
		t.Errorf("%d of %d calls failed with a store fault", tl.unavailable.Load(), tl.calls.Load())
	}
	if len(histories) < concurrencyWorkers || moves["WAITING→ADMITTED"] == 0 || moves["WAITING→LEFT"] == 0 {
		t.Errorf("the run did not exercise the queue: %d tokens, moves %v", len(histories), moves)
	}
	if bursts && instances == 1 && returned.Load() == 0 {
		t.Errorf("no ticket given back between the bursts of enters")
	}

	// The tokens as stored: one ticket each, none beyond the counter, and
	// what every token was told agrees with its ticket.
	stored := scanTokens(t, client, table)
	checkTicketsUnique(t, stored)
	for _, h := range histories {
		st, ok := stored[h.id]
		switch {
		case !ok:
			t.Errorf("token %s was answered but is not stored", h.id)
			continue
		case st.ticket < 1 || st.ticket > final.Issued:
			t.Errorf("token %s: ticket %d outside 1..%d", h.id, st.ticket, final.Issued)
		}
		for _, o := range h.obs {
			switch {
			case (o.status == queue.StatusAdmitted || o.status == queue.StatusExpired) && st.ticket > final.Admitted:
				t.Errorf("token %s: ticket %d seen %s but the counter is at %d\n%s", h.id, st.ticket, o.status, final.Admitted, h)
			case o.op == "sweep" && o.status == queue.StatusWaiting && o.position != st.ticket-final.Admitted:
				t.Errorf("token %s: ticket %d at position %d, want %d\n%s", h.id, st.ticket, o.position, st.ticket-final.Admitted, h)
			}
		}
	}
}

// forceLeftAtTop enters through svc until the top block (the shard's
// block that ends at the last ticket) has numbers left, handing record
// each token it got; it fails t if 64 enters leave none there.
func forceLeftAtTop(t *testing.T, svc *queue.Service, store *dynamostore.Store, record func(*history, queue.View)) {
	t.Helper()
	ctx := t.Context()
	// 64 enters made; a store fault or BUSY under load costs an attempt, not one of them.
	for made, tries := 0, 0; made < 64 && tries < 1024; tries++ {
		p, err := store.GetProgram(ctx, concurrencyProgram)
		if err != nil {
			t.Fatalf("read the program: %v", err)
		}
		for i := range p.Shards {
			sh, err := store.GetShard(ctx, concurrencyProgram, i)
			if err != nil {
				t.Fatalf("read shard %d: %v", i, err)
			}
			if sh.End == p.Issued && sh.Next <= sh.End {
				return
			}
		}
		if v, _, err := svc.Enter(ctx, concurrencyProgram, queue.Entry{}); err == nil {
			record(&history{id: v.TokenID}, v)
			made++
		}
	}
	t.Fatal("64 enters left no number in the top block: nothing to give back")
}

// timedOut reports whether err comes from a store call that ran out of
// time (an attempt's timeout or the call's deadline), not from an answer.
func timedOut(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout()
}

func (h *history) String() string {
	var b strings.Builder
	for _, o := range h.obs {
		b.WriteString("\t" + o.String() + "\n")
	}
	return b.String()
}
