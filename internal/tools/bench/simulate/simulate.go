// Package simulate runs a bench.Scenario on a virtual clock with no network,
// stepping an admission.Program and the policy's retry delays (or running
// queue.Service itself). Time advances in whole milliseconds, and a seed
// makes a run repeatable.
package simulate

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/example/waitingroom/internal/admission"
	"github.com/example/waitingroom/internal/queue"
	"github.com/example/waitingroom/internal/tools/bench"
	"github.com/example/waitingroom/internal/tools/partitionmodel"
)

// Epoch is the virtual instant at which every simulation starts.
var Epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// Config is one simulation: a scenario under one policy.
type Config struct {
	Scenario bench.Scenario
	Policy   bench.NamedPolicy
	Seed     uint64        // the policy's jitter and, apart, the abandoning users and the crowd
	CacheTTL time.Duration // the delay of every rate change after the first
	Prices   bench.Prices

	// PushShare is the share of people, in [0, 1], subscribed to Web Push
	// (drawn from Seed apart, so that a share changes nobody else's draws),
	// and PushLatency the push service's delivery time; the program model
	// only (see push.go). ReportPush reports the push fields of the Result
	// (Result.PushShare) even at share 0.
	PushShare   float64
	PushLatency time.Duration
	ReportPush  bool

	// Service runs queue.Service itself, as does any field below but
	// Instances, FixedShards and FixedBlock; otherwise only
	// admission.Program is stepped.
	Service         bool
	PartitionLimits *partitionmodel.Limits // DynamoDB's per-partition limits on the table (nil: none)
	Instances       int                    // service instances sharing the table; at least 1
	OpensAt         time.Duration          // when positive, the program opens this long after the start
	Shuffle         bool                   // opens it with shuffleAtOpen
	SingleTickets   bool                   // every ticket from the program item
	FixedShards     int                    // when positive, tickets.WithFixedSizing(FixedShards, FixedBlock)
	FixedBlock      int64
	ClockSkew       time.Duration // each instance's clock is off by an offset uniform in [−ClockSkew, +ClockSkew]
	// Crowd is the program's cap and no-show handling and what its people
	// do once admitted; its zero value leaves sessions to the window's end.
	Crowd bench.Crowd
	// FollowAdmissions follows each admission to its session's end as the
	// Crowd does, without a cap or no-show handling.
	FollowAdmissions bool
}

// following reports whether cfg models admissions after they are made.
func (cfg Config) following() bool { return cfg.FollowAdmissions || cfg.Crowd != bench.Crowd{} }

// UsesService reports whether cfg runs queue.Service.
func (cfg Config) UsesService() bool {
	return cfg.Service || cfg.PartitionLimits != nil || cfg.OpensAt != 0 || cfg.Shuffle || cfg.SingleTickets || cfg.ClockSkew != 0 || cfg.following()
}

// retryAfterFailure is when a user sends a failed request again.
const retryAfterFailure = time.Second

// Validate reports what cfg cannot simulate, naming the bench's flags.
func (cfg Config) Validate() error {
	sc, c := cfg.Scenario, cfg.Crowd
	switch err := sc.Validate(); {
	case err != nil:
		return err
	case cfg.Policy.Policy == nil:
		return errors.New("simulate: no policy")
	case sc.Timeout == 0 && sc.Rates.Final() == 0:
		return errors.New("simulate: admission ends paused (rate 0) and never admits everyone: set -timeout")
	case sc.Users > math.MaxInt32:
		return fmt.Errorf("simulate: at most %d users", math.MaxInt32)
	case !(cfg.PushShare >= 0 && cfg.PushShare <= 1):
		return fmt.Errorf("simulate: -push-share %g: want a share in [0, 1]", cfg.PushShare)
	case cfg.PushLatency < 0:
		return errors.New("simulate: -push-latency: negative")
	case !cfg.UsesService():
		return nil
	case cfg.PushShare > 0:
		return errors.New("simulate: -push-share is simulated on the program model only, not with the service (-partition-model, -opens-at, -shuffle, -tickets single, -clock-skew, -max-active, -no-show, -no-show-seconds, -session)")
	case sc.Abandon > 0:
		return errors.New("simulate: -abandon is not simulated with the service (-partition-model, -opens-at, -shuffle)")
	case len(sc.Rates) > 1:
		return errors.New("simulate: -rate-schedule is not simulated with the service (-partition-model, -opens-at, -shuffle)")
	case cfg.Shuffle && cfg.OpensAt <= 0:
		return errors.New("simulate: -shuffle needs -opens-at")
	case cfg.OpensAt < 0:
		return errors.New("simulate: -opens-at: negative")
	case cfg.ClockSkew < 0:
		return errors.New("simulate: -clock-skew: negative")
	}
	if err := c.Validate(); err != nil {
		return fmt.Errorf("simulate: %w", err)
	}
	if c.MaxActive > 0 && c.Session.Max == 0 && sc.Timeout == 0 {
		return errors.New("simulate: -max-active without -session holds every slot for a whole admission window: set -session or -timeout")
	}
	return nil
}

// Run simulates cfg and returns its result.
func Run(cfg Config) (bench.Result, error) {
	s, err := newSim(cfg)
	if err != nil {
		return bench.Result{}, err
	}
	s.run()
	return s.result(), nil
}

// model answers the simulated users: admission.Program stepped directly
// (programModel) or queue.Service on a simulated table (serviceModel).
type model interface {
	tick(t int64) // moves the model to ms t of the run
	program() admission.Program
	serving() int64
	enter(u int) (answer, error)
	poll(us *user) (answer, error)
	place(us user, p admission.Program) int64 // us's place in p's admission order
	release(pass string) error                // ends a pass's session
	finish(r *bench.Result)                   // adds what the model measured
}

// answer is what a user hears back: admitted, or waiting at a position
// until retryAfter; token, pass and expiresAt come from the service only.
type answer struct {
	token      string
	ticket     int64
	admitted   bool
	position   int64
	retryAfter time.Duration
	pass       string
	expiresAt  time.Time
}

// user is one virtual user; ticket 0 until it entered.
type user struct {
	token       string
	ticket      int64
	enteredMs   int64
	position    int64 // the position of its last WAITING answer; 0: none yet
	pass        string
	windowEndMs int64 // when the admission window of pass ends
	// subscribed marks a user subscribed to Web Push; done one who saw
	// ADMITTED or left; nextMs is when its pending poll or leave is due;
	// requests counts its own requests.
	subscribed bool
	done       bool
	nextMs     int64
	requests   int32
}

// Events of the wheel.
const (
	pollEvent       int32 = iota // the user polls
	sessionEndEvent              // the site ends the user's session
	windowEndEvent               // the user's admission window ends
	enterEvent                   // the user sends its enter again
	leaveEvent                   // the user leaves the queue
	pushEvent                    // the user receives its "turn" push
)

// waiter is a pending event of a user (user is its index plus one).
type waiter struct {
	user  int32
	event int32
}

// sim is the state of one simulation: its users, as its model answers them.
type sim struct {
	cfg   Config
	model model
	t     int64 // ms since Epoch
	users []user
	// admitAt is, per place, the ms at which the serving counter passed it;
	// leaveAt, per user, the ms at which it leaves (-1: never; nil: nobody does).
	admitAt, leaveAt []int64
	wheel            wheel
	capacity         capacityState
	// r is the result as counted so far: its users, requests and series.
	r           bench.Result
	delays      []float64
	enterSeries []int64
	push        pushState
}

func newSim(cfg Config) (*sim, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	pm := newProgramModel(cfg, false)
	var m model = pm
	if cfg.UsesService() {
		var err error
		if m, err = newServiceModel(cfg); err != nil {
			return nil, err
		}
	}
	n := cfg.Scenario.Users
	s := &sim{cfg: cfg, model: m, users: make([]user, n), delays: make([]float64, 0, n),
		r: cfg.Scenario.Result(cfg.Policy.Name, "simulate", cfg.Seed), wheel: wheel{buckets: make([][]waiter, 4096), mask: 4095}}
	s.planLeaves()
	s.planPush(pm)
	if cfg.following() {
		s.capacity.init(cfg, m.program())
	}
	return s, nil
}

func (s *sim) run() {
	n := s.cfg.Scenario.Users
	s.t = steps(s.cfg.Scenario, func(t int64) { s.t = t; s.model.tick(t) }, s.enter, func() bool {
		s.advance()
		s.send()
		s.wheel.drain(s.t, s.due)
		s.push.minute(s.t)
		return s.r.Admitted+s.r.Left+s.capacity.noShows == n && s.capacity.pendingEnds == 0
	})
}

// steps is the one simulation loop: each ms t of sc until its timeout, it calls tick(t),
// arrive for each user arriving by t, then done; it returns the ms done reported the end at, or the timeout.
func steps(sc bench.Scenario, tick func(t int64), arrive func(u int), done func() bool) int64 {
	end := int64(math.MaxInt64)
	if sc.Timeout > 0 {
		end = sc.Timeout.Milliseconds()
	}
	next := 0
	for t := range end {
		tick(t)
		for ; next < sc.Users && sc.Arrival.At(next, sc.Users).Milliseconds() <= t; next++ {
			arrive(next)
		}
		if done() {
			return t
		}
	}
	return end
}

// due handles an event of the wheel.
func (s *sim) due(x waiter) {
	u := int(x.user) - 1
	switch x.event {
	case enterEvent:
		s.enter(u)
	case leaveEvent:
		s.leave(u)
	case pushEvent:
		s.pushed(u)
	case sessionEndEvent:
		s.endSession(u)
	case windowEndEvent:
		s.release()
	default:
		if us := &s.users[u]; us.subscribed && (us.done || us.nextMs != s.t) {
			return // a fallback poll the push made moot
		}
		if !s.isNoShow(u) {
			s.poll(u)
		}
	}
}

// advance records the admission instant of the places the serving counter
// passed since the last call.
func (s *sim) advance() {
	for serving := s.model.serving(); int64(len(s.admitAt)) <= serving; {
		s.admitAt = append(s.admitAt, s.t)
	}
}

// enter is user u's enter (again, after a failure, 1 s later).
func (s *sim) enter(u int) {
	s.users[u].requests++
	s.r.Enters++
	s.count(false)
	a, err := s.model.enter(u)
	if err != nil {
		s.r.Errors++
		if errors.Is(err, queue.ErrThrottled) {
			s.r.ThrottledEnters++
		}
		s.wheel.add(s.t, s.t+retryAfterFailure.Milliseconds(), waiter{user: int32(u + 1), event: enterEvent})
		return
	}
	if us := &s.users[u]; us.ticket == 0 {
		us.token, us.ticket, us.enteredMs = a.token, a.ticket, s.t
		s.r.Entered++
		s.enterSeries[s.t/1000]++
		s.push.entered(u, *us)
	}
	s.advance()
	s.answer(u, a)
}

// poll is user u's poll (again, after a failure, 1 s later).
func (s *sim) poll(u int) {
	s.users[u].requests++
	s.count(true)
	a, err := s.model.poll(&s.users[u])
	if err != nil {
		s.r.Errors++
		s.users[u].nextMs = s.t + retryAfterFailure.Milliseconds()
		s.wheel.add(s.t, s.users[u].nextMs, waiter{user: int32(u + 1)})
		return
	}
	s.answer(u, a)
}

// answer handles what user u heard: ADMITTED ends its wait, WAITING
// schedules its next poll, or its leave when that comes first.
func (s *sim) answer(u int, a answer) {
	us := &s.users[u]
	if a.admitted {
		s.push.settle(us)
		s.r.Admitted++
		// From when the counter passed the place, or the user entered if
		// that was later (a number of a block the counter had passed).
		at := s.t
		if place := s.model.place(*us, s.model.program()); place < int64(len(s.admitAt)) {
			at = max(s.admitAt[place], us.enteredMs)
		}
		s.delays = append(s.delays, float64(s.t-at))
		if s.cfg.following() {
			s.admitted(u, a)
		}
		return
	}
	if a.position > 0 {
		if us.position > 0 {
			s.r.MaxPositionRise = max(s.r.MaxPositionRise, a.position-us.position)
		}
		us.position = a.position
	}
	at, event := s.t+max(1, int64((a.retryAfter+time.Millisecond-1)/time.Millisecond)), pollEvent
	if s.leaveAt != nil && s.leaveAt[u] >= 0 && s.leaveAt[u] <= at {
		if at, event = s.leaveAt[u], leaveEvent; at <= s.t {
			s.leave(u)
			return
		}
	}
	us.nextMs = at
	s.wheel.add(s.t, at, waiter{user: int32(u + 1), event: event})
}

// leave is user u's DELETE before its admission.
func (s *sim) leave(u int) {
	s.users[u].requests++
	s.push.settle(&s.users[u])
	s.r.Left++
	s.r.Leaves++
	s.count(false)
}

// planLeaves sets leaveAt: each abandoning user leaves at its drawn fraction
// of the wait from its enter to its admission (AdmissionTimes) or timeout.
func (s *sim) planLeaves() {
	sc := s.cfg.Scenario
	frac := sc.Leaving(s.cfg.Seed)
	if frac == nil {
		return
	}
	admit := AdmissionTimes(sc, s.cfg.CacheTTL, false)
	s.leaveAt = make([]int64, sc.Users)
	for i, f := range frac {
		s.leaveAt[i] = -1
		if f < 0 {
			continue
		}
		enter := sc.Arrival.At(i, sc.Users).Milliseconds()
		end := sc.Timeout.Milliseconds()
		if admit[i+1] >= 0 {
			end = admit[i+1].Milliseconds()
		}
		if end > enter {
			s.leaveAt[i] = enter + int64(f*float64(end-enter))
		}
	}
}

// count counts a request at s.t: a poll, or an enter or leave.
func (s *sim) count(poll bool) {
	sec := int(s.t / 1000)
	r := &s.r
	for len(r.RpsSeries) <= sec {
		r.RpsSeries = append(r.RpsSeries, 0)
		r.PollSeries = append(r.PollSeries, 0)
		s.enterSeries = append(s.enterSeries, 0)
	}
	r.Requests++
	r.RpsSeries[sec]++
	if poll {
		r.Polls++
		r.PollSeries[sec]++
	}
}

// ticketCounts returns the numbers in 1..issued nobody holds, the extra
// holders of numbers held more than once, and the holders of numbers past it.
func (s *sim) ticketCounts(issued int64) (gaps, duplicates, past int64) {
	holders := make([]int32, issued+1)
	for _, us := range s.users {
		switch {
		case us.ticket == 0:
		case us.ticket > issued:
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

func (s *sim) result() bench.Result {
	sc, r := s.cfg.Scenario, s.r
	r.CacheTTLMs = s.cfg.CacheTTL.Milliseconds()
	r.ByRoute = map[string]int64{"POST enter 201": r.Enters, "GET poll 200": r.Polls}
	if r.Leaves > 0 {
		r.ByRoute["DELETE leave 204"] = r.Leaves
	}
	r.NotifyDelayMs, r.EntersPerSecondPeak = bench.Summarize(s.delays), bench.SeriesPeak(s.enterSeries)
	p := s.model.program()
	r.Gaps, r.DuplicateTickets, r.TicketsPastIssued = s.ticketCounts(p.Issued)
	shuffled := p.Shuffle && p.PrequeueFixed
	var es []bench.Entrant
	for _, us := range s.users {
		if us.ticket > 0 {
			es = append(es, bench.Entrant{EnteredMs: us.enteredMs, Place: s.model.place(us, p), Prequeue: shuffled && us.ticket <= p.Prequeue})
		}
	}
	r.MaxInversionMs = float64(bench.MaxInversion(es))
	if shuffled {
		r.Prequeue = p.Prequeue
	}
	if s.cfg.following() {
		r.Capacity = s.capacityResult(p)
		r.SessionEnds = r.Capacity.SessionsEnded
	}
	s.model.finish(&r)
	s.push.finish(&r, s.cfg)
	duration := time.Duration(s.t) * time.Millisecond
	if sc.Timeout > 0 && r.Admitted+r.Left+s.capacity.noShows < sc.Users {
		duration = sc.Timeout
	}
	r.Finish(duration)
	r.Price(s.cfg.Prices)
	return r
}

// wheel is a calendar queue of pending events: one bucket per millisecond,
// modulo a power-of-two horizon that grows to fit the longest delay.
type wheel struct {
	buckets [][]waiter
	mask    int64
	spare   [][]waiter // storage of large processed buckets, for reuse
}

// add schedules x at ms at; now is the current ms, whose bucket is
// detached.
func (w *wheel) add(now, at int64, x waiter) {
	if at-now > w.mask {
		w.grow(now, at-now)
	}
	i := at & w.mask
	if w.buckets[i] == nil && len(w.spare) > 0 {
		w.buckets[i] = w.spare[len(w.spare)-1]
		w.spare = w.spare[:len(w.spare)-1]
	}
	w.buckets[i] = append(w.buckets[i], x)
}

// drain calls f on each event due at ms t, then keeps the bucket's storage
// for reuse: a small one in its bucket, a large one among the few spares.
func (w *wheel) drain(t int64, f func(waiter)) {
	b := w.buckets[t&w.mask]
	w.buckets[t&w.mask] = nil
	for _, x := range b {
		f(x)
	}
	switch i := t & w.mask; {
	case cap(b) <= 1<<16:
		if w.buckets[i] == nil {
			w.buckets[i] = b[:0]
		}
	case len(w.spare) < 4:
		w.spare = append(w.spare, b[:0])
	}
}

// grow widens the horizon beyond horizon ms, keeping each entry's due time:
// the one instant in (now, now+size) congruent to its bucket's index.
func (w *wheel) grow(now, horizon int64) {
	size := int64(len(w.buckets))
	for size <= horizon {
		size *= 2
	}
	old, oldMask := w.buckets, w.mask
	w.buckets, w.mask = make([][]waiter, size), size-1
	for i, b := range old {
		if len(b) == 0 {
			continue
		}
		due := now + (int64(i)-now)&oldMask
		j := due & w.mask
		w.buckets[j] = append(w.buckets[j], b...)
	}
}
