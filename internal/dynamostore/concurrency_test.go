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

	"github.com/example/waitingroom/internal/api"
	"github.com/example/waitingroom/internal/clock"
	"github.com/example/waitingroom/internal/dynamostore"
	"github.com/example/waitingroom/internal/polling"
	"github.com/example/waitingroom/internal/queue"
	"github.com/example/waitingroom/internal/testing/dynamotest"
	"github.com/example/waitingroom/internal/tickets"
)

// Sizes: the test server takes about 75 writes a second; 8 people for a few
// seconds make a few hundred tokens and about a thousand calls, enough to
// interleave every kind of call with every other. The run is sized by
// work, not time: it ends once each worker made concurrencyCalls calls, the
// admin went once through adminCycle, and the run showed what it is for
// (see exercised); on an idle machine it also lasts at least
// concurrencyMinDuration, which only adds work. concurrencyTimeout fails a
// run that cannot get there at all.
const (
	concurrencyWorkers     = 8
	concurrencyCalls       = 30
	concurrencyMinDuration = 5 * time.Second
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

// shiftedClock is the real clock, moved forward by shift.
type shiftedClock struct {
	clock.Real
	shift *atomic.Int64
}

func (c shiftedClock) Now() time.Time { return time.Now().Add(time.Duration(c.shift.Load())) }

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
	// Enters in bursts, with quiet spells of polls between them longer
	// than a block lifetime: the instances trim their blocks and give
	// numbers back while the workers poll, leave and are admitted. Through
	// one instance every block at the top is its own, so it must give
	// some back; through two the same invariants hold whatever it gives.
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
// read. Each change waits for the previous one to take effect.
var adminCycle = []adminOp{
	{what: "admit 3", admit: 3},
	{what: "paused=true", set: &api.ProgramSettings{Paused: new(true)}},
	{what: "rate=8", set: &api.ProgramSettings{AdmissionRatePerSecond: new(api.Rate(8))}},
	{what: "paused=false", set: &api.ProgramSettings{Paused: new(false)}},
	{what: "admit 8", admit: 8},
	{what: "read"},
}

// burstPeriod is the period of the bursts of enters: enters in its first
// burstOn, polls, leaves and admin reads all along.
const burstPeriod, burstOn = 2500 * time.Millisecond, 600 * time.Millisecond

// givingBack counts the tickets a store gave back.
type givingBack struct {
	*dynamostore.Store
	returned *atomic.Int64
}

func (g givingBack) ReturnTickets(ctx context.Context, p queue.Program, from int64) (bool, error) {
	ok, err := g.Store.ReturnTickets(ctx, p, from)
	if ok {
		g.returned.Add(p.Issued - from + 1)
	}
	return ok, err
}

// testConcurrency runs the workers on instances sharing the table; with
// writeUnits > 0 the instances size their ticket shards for items of that
// write limit (tickets.WithItemWriteLimit), else take every ticket from the
// program item; with bursts, enters come in bursts (burstPeriod).
func testConcurrency(t *testing.T, instances int, writeUnits float64, bursts bool) {
	endpoint := dynamotest.Lease(t)
	var (
		table  string
		client *dynamodb.Client
	)
	// The service clock is the real one, shifted at the end to let the
	// admission windows run out.
	var shift atomic.Int64
	clk := shiftedClock{shift: &shift}
	svcs := make([]*queue.Service, instances)
	var returned atomic.Int64
	for i := range svcs {
		// One client per instance, as each Lambda instance has its own.
		c, err := dynamostore.NewClient(t.Context(), endpoint)
		if err != nil {
			t.Fatal(err)
		}
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
		counters  []queue.Counters
		failures  []string
	)
	fail := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		failures = append(failures, fmt.Sprintf(format, args...))
	}
	// unexpected sorts a call's error: store faults and BUSY are counted,
	// anything else is a failure.
	unexpected := func(what string, err error) bool {
		var qe *queue.Error
		switch {
		case errors.As(err, &qe) && qe.Code == api.CodeBusy:
			tl.busy.Add(1)
		case errors.As(err, &qe) && qe.Kind == queue.KindUnavailable && timedOut(err):
			// The test server answered later than the client waits: on a
			// busy machine, requests queue at moto. Counted apart.
			tl.slow.Add(1)
		case errors.As(err, &qe) && qe.Kind == queue.KindUnavailable:
			tl.unavailable.Add(1)
		default:
			fail("%s: %v", what, err)
			return true
		}
		return false
	}
	// call runs one request with a deadline: a generous one, since the
	// checks are about invariants, not latency, and a store fault counts
	// against the run.
	call := func(f func(ctx context.Context) error) error {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		tl.calls.Add(1)
		return f(ctx)
	}

	// The run's progress: the status moves seen (observe counts them as
	// they happen), the admin's operations, and enough, set by the admin
	// once the run showed what it is for; each worker then stops after
	// its quota of calls.
	var (
		admitted, left, adminOps atomic.Int64
		enough                   atomic.Bool
	)
	runCtx, cancelRun := context.WithTimeout(t.Context(), concurrencyTimeout)
	defer cancelRun()
	// exercised reports whether the run did what it is for: tokens
	// admitted and tokens left while others waited, admin operations
	// between them, shard 0 filled when on shards, and through one
	// instance with bursts, tickets given back between them.
	shardFilled := false
	exercised := func() bool {
		if writeUnits > 0 && !shardFilled {
			sh, err := dynamostore.New(client, table).GetShard(runCtx, concurrencyProgram, 0)
			shardFilled = err == nil && sh.End != 0
		}
		return admitted.Load() > 0 && left.Load() > 0 && adminOps.Load() >= int64(len(adminCycle)) &&
			(writeUnits == 0 || shardFilled) && (!bursts || instances > 1 || returned.Load() > 0)
	}

	start := time.Now()
	// enterShare is the share of a worker's calls that are enters: 8 %,
	// with bursts 40 % within a burst (enough for runs of numbers and
	// blocks with numbers left when it ends) and none between.
	enterShare := func() float64 {
		switch {
		case !bursts:
			return 0.08
		case time.Since(start)%burstPeriod < burstOn:
			return 0.4
		}
		return 0
	}
	var wg sync.WaitGroup
	for w := range concurrencyWorkers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(instances), uint64(w)))
			var mine []*history
			var focus *history
			seq := 0
			observe := func(h *history, instance int, op string, v queue.View) {
				seq++
				if len(h.obs) > 0 && h.last().status == queue.StatusWaiting {
					switch v.Status {
					case queue.StatusAdmitted:
						admitted.Add(1)
					case queue.StatusLeft:
						left.Add(1)
					}
				}
				h.obs = append(h.obs, observation{seq: seq, instance: instance, op: op, status: v.Status, position: v.Position})
			}
			for calls := 0; runCtx.Err() == nil && (calls < concurrencyCalls || !enough.Load()); calls++ {
				in := rng.IntN(instances)
				svc := svcs[in]
				r := rng.Float64()
				switch {
				// A crowd arrives first; then mostly polls, as in a real
				// queue, so that the instances' program caches age between
				// enters (each enter refreshes its instance's cache).
				case len(mine) < initialTokensPerWorker || r < enterShare() && len(mine) < maxTokensPerWorker:
					var v queue.View
					err := call(func(ctx context.Context) (err error) {
						v, _, err = svc.Enter(ctx, concurrencyProgram, queue.Entry{})
						return
					})
					if err != nil {
						unexpected("enter", err)
						continue
					}
					h := &history{id: v.TokenID}
					observe(h, in, "enter", v)
					mine = append(mine, h)
				case r < 0.12:
					h := mine[rng.IntN(len(mine))]
					if h.leaveFailed || h.last().status == queue.StatusLeft {
						continue
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
						observe(h, in, "refresh", v)
					}
				case r < 0.18:
					// Mostly people still waiting leave; now and then one
					// who was admitted meanwhile tries.
					h := mine[rng.IntN(len(mine))]
					if rng.IntN(4) != 0 {
						for _, i := range rng.Perm(len(mine)) {
							if mine[i].last().status == queue.StatusWaiting {
								h = mine[i]
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
						observe(h, in, "leave", queue.View{Status: queue.StatusLeft})
					}
				default:
					// People poll their own token again and again (through
					// whichever instance), and now and then another one's.
					if focus == nil || focus.last().status == queue.StatusLeft || rng.IntN(4) == 0 {
						focus = mine[rng.IntN(len(mine))]
					}
					h := focus
					var v queue.View
					err := call(func(ctx context.Context) (err error) { v, err = svc.Poll(ctx, concurrencyProgram, h.id); return })
					if err != nil {
						unexpected("poll", err)
						continue
					}
					observe(h, in, "poll", v)
				}
			}
			mu.Lock()
			histories = append(histories, mine...)
			mu.Unlock()
		})
	}
	// The admin: every 400 ms the next operation of adminCycle, through a
	// random instance (the admin function is yet another one; what matters
	// is that the others learn of it only through the table), until the
	// workers are done.
	workersDone := make(chan struct{})
	var admin sync.WaitGroup
	admin.Go(func() {
		rng := rand.New(rand.NewPCG(uint64(instances), 99))
		pace := time.NewTicker(400 * time.Millisecond)
		defer pace.Stop()
		for {
			select {
			case <-workersDone:
				return
			case <-pace.C:
			}
			select { // a tick may be ready too when the workers are done
			case <-workersDone:
				return
			default:
			}
			if !enough.Load() && time.Since(start) >= concurrencyMinDuration && exercised() {
				enough.Store(true)
			}
			svc := svcs[rng.IntN(instances)]
			var c queue.Counters
			var err error
			op := adminCycle[adminOps.Load()%int64(len(adminCycle))]
			if bursts {
				// A change is pending for a cache TTL and holds numbers
				// back meanwhile: the admin only reads; the rate admits.
				op = adminOp{what: "read"}
			}
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
			what := op.what
			adminOps.Add(1)
			if err != nil {
				unexpected(what, err)
				continue
			}
			mu.Lock()
			counters = append(counters, c)
			mu.Unlock()
		}
	})
	wg.Wait()
	close(workersDone)
	admin.Wait()
	if runCtx.Err() != nil {
		t.Errorf("the run did not get its work done in %v: %d admitted and %d left while waiting, %d admin operations, shard 0 filled %v, %d given back",
			concurrencyTimeout, admitted.Load(), left.Load(), adminOps.Load(), shardFilled, returned.Load())
	}

	// The sweep: pause, let the pause and every admission window run out,
	// and read every token once more. Admitted tokens now read EXPIRED,
	// waiting ones stay WAITING behind the paused counter.
	sweepStart := time.Now()
	ctx := t.Context()
	paused = true
	// Until it is stored, as an operator would: on a busy machine the
	// store may miss the admin write budget (503) or the change wait
	// for the last one (BUSY). The minute bounds a store that never
	// takes it.
	for pauseCtx, give := context.WithTimeout(ctx, time.Minute); ; {
		_, _, err := svcs[0].PutProgram(pauseCtx, concurrencyProgram, api.ProgramSettings{Paused: &paused})
		var qe *queue.Error
		if err == nil || !errors.As(err, &qe) || qe.Kind != queue.KindUnavailable || pauseCtx.Err() != nil {
			give()
			if err != nil {
				t.Fatalf("pause: %v", err)
			}
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	shift.Store(int64(queue.DefaultAdmissionWindow + time.Minute))
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
	next := atomic.Int64{}
	for range 4 {
		sweep.Go(func() {
			for i := int(next.Add(1) - 1); i < len(histories); i = int(next.Add(1) - 1) {
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
	t.Logf("%d instance(s): %d calls, %d tokens, %d store faults, %d store timeouts, %d BUSY; status moves %v; final %d issued, %d admitted, %d given back; sweep %v",
		instances, tl.calls.Load(), len(histories), tl.unavailable.Load(), tl.slow.Load(), tl.busy.Load(), moves,
		final.Issued, final.Admitted, returned.Load(), time.Since(sweepStart).Round(time.Millisecond))
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
