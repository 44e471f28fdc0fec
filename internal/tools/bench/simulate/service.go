package simulate

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/example/waitingroom/internal/api"
	"github.com/example/waitingroom/internal/clock"
	"github.com/example/waitingroom/internal/queue"
	"github.com/example/waitingroom/internal/shufflekey"
	"github.com/example/waitingroom/internal/tickets"
	"github.com/example/waitingroom/internal/tools/bench"
	"github.com/example/waitingroom/internal/tools/partitionmodel"
)

// Service mode runs the scenario through queue.Service on Instances
// instances sharing one simulated table (store) and the virtual clock: every
// enter is Service.Enter with an Idempotency-Key (sent again 1 s after a
// 503), every poll Service.Poll.

// serviceProgram is the simulated program's id.
const serviceProgram = "sim"

// retryAfterFailure is when a user sends a failed request again (the
// service's Retry-After on 503).
const retryAfterFailure = time.Second

// serviceUser is one virtual user of a service-mode run.
type serviceUser struct {
	token     string
	ticket    int64
	enteredMs int64 // -1 while not entered
	position  int64 // the position of its last WAITING answer; 0: none yet
	// pass and windowEndMs are its admission pass and the end of its
	// window (ms), with the capacity model.
	pass        string
	windowEndMs int64
}

type serviceSim struct {
	cfg   Config
	clock *clock.Fake
	store *store
	svcs  []*queue.Service
	// shuffleKey signs every instance's shuffle seed (one key, as the
	// deployment's KMS key); seed is the seed once revealed.
	shuffleKey queue.ShuffleKey
	seed       string
	// offsets are the instances' clock offsets; slowest is the instance
	// whose clock is furthest behind, which checks every admission.
	offsets []time.Duration
	slowest *queue.Service
	rng     *rand.Rand
	ctx     context.Context
	t       int64 // ms since Epoch
	now     time.Time

	users   []serviceUser
	admitAt []int64 // per place: ms at which the serving counter passed it
	serving int64   // the serving counter at s.t
	wheel   wheel
	// capacity is the capacity model's state, with Config.capacity.
	capacity capacityState

	seen, entered   int
	pollsOfAdmitted int64
	delays          []float64
	requests, polls int64
	throttled       int64
	failures        int64 // requests answered with an error
	regressions     int64 // admitted users the slowest instance did not see admitted
	positionRise    int64 // the most a user's position went up between two answers
	series          []int64
	pollSeries      []int64
	enterSeries     []int64
	progress        *bench.Progress
}

// validateService reports what service mode cannot simulate.
func validateService(cfg Config) error {
	switch {
	case cfg.Scenario.Abandon > 0:
		return errors.New("simulate: -abandon is not simulated with the service (-partition-model, -opens-at, -shuffle)")
	case len(cfg.Scenario.Rates) > 1:
		return errors.New("simulate: -rate-schedule is not simulated with the service (-partition-model, -opens-at, -shuffle)")
	case cfg.Shuffle && cfg.OpensAt <= 0:
		return errors.New("simulate: -shuffle needs -opens-at")
	case cfg.OpensAt < 0:
		return errors.New("simulate: -opens-at: negative")
	case cfg.ClockSkew < 0:
		return errors.New("simulate: -clock-skew: negative")
	}
	return ValidateCapacity(cfg)
}

func runService(cfg Config) (bench.Result, error) {
	if err := validateService(cfg); err != nil {
		return bench.Result{}, err
	}
	n := cfg.Scenario.Users
	instances := max(cfg.Instances, 1)
	s := &serviceSim{
		cfg:   cfg,
		clock: clock.NewFake(Epoch),
		rng:   rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15)),
		ctx:   context.Background(),
		users: make([]serviceUser, n),
		now:   Epoch,
	}
	var model *partitionmodel.Model
	if cfg.PartitionLimits != nil {
		model = partitionmodel.NewModel(*cfg.PartitionLimits)
	}
	s.store = newStore(s.clock, model)
	writeLimit := float64(tickets.DefaultItemWriteUnits)
	if cfg.PartitionLimits != nil {
		writeLimit = cfg.PartitionLimits.WriteUnits
	}
	if cfg.SingleTickets {
		writeLimit = 0 // every ticket from the program item, as before ticket shards
	}
	if cfg.Shuffle {
		key, err := shufflekey.GenerateLocalKey()
		if err != nil {
			return bench.Result{}, fmt.Errorf("simulate: %w", err)
		}
		s.shuffleKey = key
	}
	var signer queue.PassSigner
	if cfg.capacity() {
		var err error
		if signer, err = passSigner(); err != nil {
			return bench.Result{}, fmt.Errorf("simulate: %w", err)
		}
		s.capacity.crowd = drawCrowd(cfg)
	}
	s.offsets = clockOffsets(cfg.Seed, instances, cfg.ClockSkew)
	for i := range instances {
		clk, rng := clock.Offset{Base: s.clock, By: s.offsets[i]}, rand.New(rand.NewPCG(cfg.Seed+uint64(i)+1, 7))
		shards := tickets.New(s.store, tickets.WithItemWriteLimit(writeLimit), tickets.WithClock(clk), tickets.WithRand(rng))
		s.svcs = append(s.svcs, queue.NewService(s.store, cfg.Policy.Policy,
			queue.WithClock(clk), queue.WithProgramCache(time.Second), queue.WithTickets(shards),
			queue.WithRand(rng), queue.WithShuffleKey(s.shuffleKey), queue.WithPassSigner(signer)))
		if i == 0 || s.offsets[i] < slices.Min(s.offsets[:i]) {
			s.slowest = s.svcs[i]
		}
	}
	for i := range s.users {
		s.users[i].enteredMs = -1
	}
	s.wheel.init(4096)
	if cfg.Progress != nil {
		s.progress = bench.NewProgress(cfg.Progress, cfg.Policy.Name)
	}
	set := api.ProgramSettings{AdmissionRatePerSecond: new(api.Rate(cfg.Scenario.Rates[0].Rate)), Paused: new(cfg.Scenario.Rates[0].Paused)}
	if cfg.Scenario.Rates[0].Rate == 0 {
		set = api.ProgramSettings{Paused: new(true)}
	}
	if cfg.MaxActiveUsers > 0 {
		set.MaxActiveUsers = new(cfg.MaxActiveUsers)
	}
	if cfg.NoShowSeconds > 0 {
		set.NoShowSeconds = new(cfg.NoShowSeconds)
	}
	if cfg.OpensAt > 0 {
		set.OpensAt = new(Epoch.Add(cfg.OpensAt).Format(time.RFC3339Nano))
		set.ShuffleAtOpen = new(cfg.Shuffle)
	}
	p, _, err := s.svcs[0].PutProgram(s.ctx, serviceProgram, set)
	if err != nil {
		return bench.Result{}, fmt.Errorf("simulate: create the program: %w", err)
	}
	s.capacity.noShowAfterMs = -1
	if cfg.MaxActiveUsers > 0 {
		s.capacity.noShowAfterMs = p.AdmissionWindow.Milliseconds()
		if cfg.NoShowSeconds > 0 {
			s.capacity.noShowAfterMs = cfg.NoShowSeconds * 1000
		}
	}
	s.run()
	return s.result(), nil
}

func (s *serviceSim) instance() *queue.Service { return s.svcs[s.rng.IntN(len(s.svcs))] }

// clockOffsets are n instances' clock offsets, uniform in [−skew, +skew]
// and drawn from seed (all 0 without skew).
func clockOffsets(seed uint64, n int, skew time.Duration) []time.Duration {
	offsets := make([]time.Duration, n)
	if skew <= 0 {
		return offsets
	}
	rng := rand.New(rand.NewPCG(seed, 0x5ca1ab1e))
	for i := range offsets {
		offsets[i] = time.Duration(rng.Int64N(2*int64(skew)+1)) - skew
	}
	return offsets
}

func (s *serviceSim) run() {
	sc := s.cfg.Scenario
	n := sc.Users
	end := int64(math.MaxInt64)
	if sc.Timeout > 0 {
		end = sc.Timeout.Milliseconds()
	}
	next := 0
	for s.t = 0; s.t < end; s.t++ {
		if s.t > 0 {
			s.clock.Advance(time.Millisecond)
		}
		s.now = s.clock.Now()
		for next < n && sc.Arrival.At(next, n).Milliseconds() <= s.t {
			s.enter(next)
			next++
		}
		s.advance()
		if b := s.wheel.take(s.t); len(b) > 0 {
			for _, x := range b {
				switch u := int(x.ticket) - 1; {
				case x.ticket < 0:
					s.enter(int(-x.ticket) - 1)
				case x.polls == sessionEndEvent:
					s.endSession(u)
				case x.polls == windowEndEvent:
					s.release()
				case s.isNoShow(u):
				default:
					s.poll(u, x.polls+1)
				}
			}
			s.wheel.giveBack(s.t, b)
		}
		if s.seen+s.capacity.noShows == n && s.capacity.pendingEnds == 0 {
			break
		}
		if s.progress != nil && s.t%1000 == 0 {
			s.progress.Update("virtual %s, entered %d/%d, admitted %d", time.Duration(s.t)*time.Millisecond, s.entered, n, s.seen)
		}
	}
	if s.progress != nil {
		s.progress.Done()
	}
}

// advance reads the serving counter and records when it passed each
// place.
func (s *serviceSim) advance() {
	if p, err := s.store.Store.GetProgram(s.ctx, serviceProgram); err == nil {
		s.serving = p.Serving(s.now)
	}
	for int64(len(s.admitAt)) <= s.serving {
		s.admitAt = append(s.admitAt, s.t)
	}
}

func (s *serviceSim) key(u int) string { return fmt.Sprintf("simulated-user-%010d", u) }

// enter is user u's enter (again, after a failure).
func (s *serviceSim) enter(u int) {
	s.count(false)
	v, _, err := s.instance().Enter(s.ctx, serviceProgram, queue.Entry{IdempotencyKey: s.key(u)})
	if err != nil {
		s.failures++
		if errors.Is(err, queue.ErrThrottled) {
			s.throttled++
		}
		s.wheel.add(s.t, s.t+retryAfterFailure.Milliseconds(), waiter{ticket: -int32(u + 1)})
		return
	}
	us := &s.users[u]
	if us.enteredMs < 0 {
		us.token, us.ticket, us.enteredMs = v.TokenID, v.Ticket, s.t
		s.entered++
		s.enterSeries[s.t/1000]++
	}
	s.answer(u, v, 0)
}

// poll is user u's poll, its polls-th.
func (s *serviceSim) poll(u int, polls int32) {
	s.count(true)
	v, err := s.instance().Poll(s.ctx, serviceProgram, s.users[u].token)
	if err != nil {
		s.failures++
		s.wheel.add(s.t, s.t+retryAfterFailure.Milliseconds(), waiter{ticket: int32(u + 1), polls: polls})
		return
	}
	s.answer(u, v, polls)
}

// answer handles the service's answer to user u: ADMITTED ends it,
// WAITING schedules its next poll.
func (s *serviceSim) answer(u int, v queue.View, polls int32) {
	us := &s.users[u]
	if v.Status == queue.StatusWaiting && v.Position > 0 {
		if us.position > 0 {
			s.positionRise = max(s.positionRise, v.Position-us.position)
		}
		us.position = v.Position
	}
	if v.Status == queue.StatusAdmitted {
		if s.cfg.ClockSkew > 0 {
			s.checkAdmitted(u)
		}
		s.seen++
		s.pollsOfAdmitted += int64(polls)
		// From when the counter passed the place, or the user entered if
		// that was later (a number of a block the counter had passed).
		place := s.place(u)
		at := s.t
		if place < int64(len(s.admitAt)) {
			at = max(s.admitAt[place], s.users[u].enteredMs)
		}
		s.delays = append(s.delays, float64(s.t-at))
		if s.cfg.capacity() {
			s.admitted(u, v)
		}
		return
	}
	ms := max(1, int64((v.RetryAfter+time.Millisecond-1)/time.Millisecond))
	s.wheel.add(s.t, s.t+ms, waiter{ticket: int32(u + 1), polls: polls})
}

// checkAdmitted polls user u, just seen admitted, on the instance whose
// clock is furthest behind and counts a regression unless it answers
// ADMITTED too. The check is not counted as a user's request.
func (s *serviceSim) checkAdmitted(u int) {
	v, err := s.slowest.Poll(s.ctx, serviceProgram, s.users[u].token)
	if err == nil && v.Status != queue.StatusAdmitted {
		s.regressions++
	}
}

// place is user u's place in the admission order: its ticket, or in a
// shuffled pre-queue its ticket's place in the permutation the seed keys
// (the same rule as Program.Place).
func (s *serviceSim) place(u int) int64 {
	us := s.users[u]
	p, err := s.store.Store.GetProgram(s.ctx, serviceProgram)
	if err != nil || !p.Shuffle || !p.PrequeueFixed || us.ticket > p.Prequeue {
		return us.ticket
	}
	if s.seed == "" {
		if s.seed, err = queue.SignSeed(s.ctx, s.shuffleKey, serviceProgram, p.ShuffleNonce); err != nil {
			return us.ticket
		}
	}
	return queue.PlaceOf(s.seed, p.Prequeue, us.ticket)
}

func (s *serviceSim) count(poll bool) {
	sec := int(s.t / 1000)
	for len(s.series) <= sec {
		s.series = append(s.series, 0)
		s.pollSeries = append(s.pollSeries, 0)
		s.enterSeries = append(s.enterSeries, 0)
	}
	s.requests++
	s.series[sec]++
	if poll {
		s.polls++
		s.pollSeries[sec]++
	}
}

// ticketCounts returns, against the program's issued count, the numbers in
// 1..issued nobody holds, the extra holders of numbers held more than once,
// and the holders of numbers past issued.
func (s *serviceSim) ticketCounts(issued int64) (gaps, duplicates, past int64) {
	holders := make([]int32, issued+1)
	for _, us := range s.users {
		switch {
		case us.enteredMs < 0:
		case us.ticket < 1 || us.ticket > issued:
			past++
		default:
			holders[us.ticket]++
		}
	}
	for _, n := range holders[1:] {
		if n == 0 {
			gaps++
		}
		duplicates += int64(max(n-1, 0))
	}
	return gaps, duplicates, past
}

func (s *serviceSim) result() bench.Result {
	sc := s.cfg.Scenario
	enters := s.requests - s.polls
	r := bench.Result{
		Policy:          s.cfg.Policy.Name,
		Mode:            "simulate",
		Arrival:         sc.Arrival.String(),
		AdmitRate:       sc.Rates.String(),
		Seed:            s.cfg.Seed,
		Users:           sc.Users,
		Entered:         s.entered,
		Admitted:        s.seen,
		Requests:        s.requests,
		Enters:          enters,
		Polls:           s.polls,
		RpsSeries:       s.series,
		PollSeries:      s.pollSeries,
		EnterSeries:     s.enterSeries,
		ByRoute:         map[string]int64{RouteEnter: enters, RoutePoll: s.polls},
		CacheTTLMs:      time.Second.Milliseconds(),
		NotifyDelayMs:   bench.Summarize(s.delays),
		ThrottledEnters: s.throttled,
		Errors:          s.failures,
		Instances:       len(s.svcs),
	}
	r.EntersPerSecondPeak = bench.SeriesPeak(s.enterSeries)
	writes := s.store.maxProgramWrite
	r.ProgramItemWritesPerSecondMax = &writes
	if s.store.model != nil {
		for _, ps := range s.store.model.Stats() {
			if ps.Key == programKey {
				reads := ps.MaxReadsPerSecond
				r.ProgramItemReadsPerSecondMax = &reads
			}
		}
		sum := s.store.model.Summarize()
		r.StoreThrottles = sum.ThrottledReads + sum.ThrottledWrites
	}
	p, _ := s.store.Store.GetProgram(s.ctx, serviceProgram)
	r.Gaps, r.DuplicateTickets, r.TicketsPastIssued = s.ticketCounts(p.Issued)
	r.StatusRegressions, r.MaxPositionRise = s.regressions, s.positionRise
	if s.cfg.ClockSkew > 0 {
		r.ClockSkewMs = bench.Ms(s.cfg.ClockSkew)
		r.ClockSpreadMs = bench.Ms(slices.Max(s.offsets) - slices.Min(s.offsets))
	}
	var es []bench.Entrant
	for u, us := range s.users {
		if us.enteredMs < 0 {
			continue
		}
		pre := p.Shuffle && p.PrequeueFixed && us.ticket <= p.Prequeue
		es = append(es, bench.Entrant{EnteredMs: us.enteredMs, Place: s.place(u), Prequeue: pre})
	}
	r.MaxInversionMs = float64(bench.MaxInversion(es))
	if p.Shuffle && p.PrequeueFixed {
		r.Prequeue = p.Prequeue
	}
	duration := time.Duration(s.t) * time.Millisecond
	if sc.Timeout > 0 && s.seen+s.capacity.noShows < sc.Users {
		duration = sc.Timeout
	}
	if s.cfg.capacity() {
		r.Capacity = s.capacityResult(p)
	}
	r.Finish(duration, s.pollsOfAdmitted)
	r.Price(s.cfg.Prices)
	return r
}
