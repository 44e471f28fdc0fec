// Package simulate runs a bench.Scenario on a virtual clock with no network:
// admission is a queue.Program and the retry delay the policy's, as the
// service computes them (or, with Config.Service, queue.Service itself).
// Requests take no time and never fail; time advances in whole milliseconds,
// and a seed makes a run repeatable.
package simulate

import (
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"time"

	"github.com/example/waitingroom/internal/polling"
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
	// Seed drives the policy's jitter and, separately, who abandons and
	// when (bench.Scenario.Leaving).
	Seed uint64
	// CacheTTL is the service's PROGRAM_CACHE_TTL: every rate change after
	// the first takes effect this long after its offset.
	CacheTTL time.Duration
	Prices   bench.Prices
	// Progress, when not nil, receives a live progress line.
	Progress io.Writer

	// Service runs the scenario through queue.Service itself, as Run also
	// does when PartitionLimits, OpensAt, Shuffle, SingleTickets or
	// ClockSkew is set; otherwise only queue.Program is stepped.
	Service bool
	// PartitionLimits, with Service, puts DynamoDB's per-partition limits
	// on the simulated table (nil: none).
	PartitionLimits *partitionmodel.Limits
	// Instances is how many service instances share the table (Lambda
	// instances warm for the crowd); at least 1.
	Instances int
	// OpensAt, when positive, opens the program this long after the start,
	// Shuffle with shuffleAtOpen.
	OpensAt time.Duration
	Shuffle bool
	// SingleTickets takes every ticket from the program item, with no
	// ticket shards.
	SingleTickets bool
	// ClockSkew, with Service, sets each instance's clock off the true
	// time by an offset drawn uniformly in [−ClockSkew, +ClockSkew] (by
	// Seed); 0: every instance reads the true time.
	ClockSkew time.Duration

	// MaxActiveUsers and NoShowSeconds are the program's settings of those
	// names (0: none). With either, or with NoShow or Session, the service
	// runs and signs an admission pass for each admission.
	MaxActiveUsers, NoShowSeconds int64
	// NoShow is the fraction of users, in [0, 1), who stop polling right
	// before their admission and so never fetch their answer; who follows
	// Seed alone (NoShows).
	NoShow float64
	// Session, when its Max is positive, is the range of the uniform
	// duration after which the site ends a user's session (EndSession),
	// from when the user saw ADMITTED; zero: sessions run to the window's
	// end.
	Session Range
	// FollowAdmissions follows each admission to its session's end as
	// the capacity settings do, without them: a rate-only program's
	// side of a comparison.
	FollowAdmissions bool
}

// Range is a closed range of durations.
type Range struct{ Min, Max time.Duration }

// capacity reports whether cfg models admissions after they are made: a
// cap, no-show handling, no-shows or sessions.
func (cfg Config) capacity() bool {
	return cfg.FollowAdmissions || cfg.MaxActiveUsers > 0 || cfg.NoShowSeconds > 0 || cfg.NoShow > 0 || cfg.Session.Max > 0
}

// Route keys of bench.Result.ByRoute the simulator fills.
const (
	RouteEnter = "POST enter 201"
	RoutePoll  = "GET poll 200"
	RouteLeave = "DELETE leave 204"
)

// Run simulates cfg and returns its result.
func Run(cfg Config) (bench.Result, error) {
	sc := cfg.Scenario
	if err := sc.Validate(); err != nil {
		return bench.Result{}, err
	}
	if cfg.Policy.Policy == nil {
		return bench.Result{}, errors.New("simulate: no policy")
	}
	if sc.Timeout == 0 && sc.Rates.Final() == 0 {
		return bench.Result{}, errors.New("simulate: admission ends paused (rate 0): set a timeout")
	}
	if sc.Users > math.MaxInt32 {
		return bench.Result{}, fmt.Errorf("simulate: at most %d users", math.MaxInt32)
	}
	if cfg.Service || cfg.PartitionLimits != nil || cfg.OpensAt != 0 || cfg.Shuffle || cfg.SingleTickets || cfg.ClockSkew != 0 || cfg.capacity() {
		return runService(cfg)
	}
	s := newSim(cfg)
	s.run()
	return s.result(), nil
}

// sim is the state of one simulation.
type sim struct {
	cfg    Config
	policy polling.Policy
	// needs is how much of the Situation the policy reads.
	needs needs
	rng   *rand.Rand
	prog  queue.Program
	now   time.Time // virtual clock, at ms t
	t     int64     // ms since Epoch

	entered int
	admitAt []int64 // per ticket: ms at which the serving counter passed it
	// leaveAt is, per ticket, the ms at which its holder leaves, -1 if it
	// stays; nil when nobody does.
	leaveAt  []int64
	admitted int64 // tickets whose admitAt is known
	wheel    wheel

	seen            int // users who saw ADMITTED
	left            int // users who left
	pollsOfAdmitted int64
	delays          []float64
	requests        int64
	pollCount       int64
	leaves          int64
	series          []int64
	pollSeries      []int64
	progress        *bench.Progress
}

func newSim(cfg Config) *sim {
	n := cfg.Scenario.Users
	s := &sim{
		cfg:     cfg,
		policy:  cfg.Policy.Policy,
		rng:     rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15)),
		admitAt: make([]int64, n+1),
		delays:  make([]float64, 0, n),
		now:     Epoch,
	}
	s.needs = needsOf(cfg.Policy.Policy)
	// The program as the admin PUT creates it, before anyone arrives.
	s.prog = queue.Program{ID: "sim", CreatedAt: Epoch, Options: queue.Options{AdmissionWindow: queue.DefaultAdmissionWindow}, Version: 0}
	s.wheel.init(4096)
	s.planLeaves()
	if cfg.Progress != nil {
		s.progress = bench.NewProgress(cfg.Progress, cfg.Policy.Name)
	}
	return s
}

func (s *sim) run() {
	sc := s.cfg.Scenario
	n := sc.Users
	end := int64(math.MaxInt64)
	if sc.Timeout > 0 {
		end = sc.Timeout.Milliseconds()
	}
	nextUser, nextChange := 0, 0
	for s.t = 0; s.t < end; s.t++ {
		s.now = Epoch.Add(time.Duration(s.t) * time.Millisecond)
		for nextChange < len(sc.Rates) && sc.Rates[nextChange].At.Milliseconds() <= s.t {
			var ok bool
			if s.prog, ok = bench.ApplyChange(s.prog, s.now, sc.Rates[nextChange], nextChange == 0, s.cfg.CacheTTL); !ok {
				break // an earlier change is pending: try again next ms
			}
			nextChange++
		}
		for nextUser < n && sc.Arrival.At(nextUser, n).Milliseconds() <= s.t {
			s.enter()
			nextUser++
		}
		serving := s.prog.Serving(s.now)
		s.advance(serving)
		if b := s.wheel.take(s.t); len(b) > 0 {
			for _, x := range b {
				if x.ticket < 0 {
					s.leave(waiter{ticket: -x.ticket, polls: x.polls}, serving)
					continue
				}
				s.countPoll()
				x.polls++
				s.answer(x, serving)
			}
			s.wheel.giveBack(s.t, b)
		}
		if s.seen+s.left == n {
			break
		}
		if s.progress != nil && s.t%1000 == 0 {
			s.progress.Update("virtual %s, entered %d/%d, admitted %d", time.Duration(s.t)*time.Millisecond, nextUser, n, s.seen)
		}
	}
	if s.progress != nil {
		s.progress.Done()
	}
}

// enter issues the next user's ticket and answers it like Service.Enter.
func (s *sim) enter() {
	s.prog = s.prog.WithTicketIssued(s.now)
	s.entered++
	s.count()
	serving := s.prog.Serving(s.now)
	s.advance(serving)
	s.answer(waiter{ticket: int32(s.prog.Issued)}, serving)
}

// answer is the service's view of x's token at s.now: ADMITTED ends the
// user; WAITING schedules its next poll after the policy's delay.
func (s *sim) answer(x waiter, serving int64) {
	tk := int64(x.ticket)
	if tk <= serving {
		s.seen++
		s.pollsOfAdmitted += int64(x.polls)
		s.delays = append(s.delays, float64(s.t-s.admitAt[tk]))
		return
	}
	var sit polling.Situation
	switch s.needs {
	case needsPosition:
		sit.Position = tk - serving // what Situation computes, without the wait estimate
	case needsAll:
		sit = s.prog.Situation(tk, s.now, s.notice())
	}
	d := s.policy.RetryAfter(sit, s.rng)
	ms := max(1, int64((d+time.Millisecond-1)/time.Millisecond))
	if s.leaveAt != nil {
		switch at := s.leaveAt[tk]; {
		case at < 0 || at > s.t+ms:
		case at <= s.t:
			s.leave(x, serving)
			return
		default:
			// It leaves before its next poll: the wheel carries the leave,
			// marked by a negative ticket.
			s.wheel.add(s.t, at, waiter{ticket: -x.ticket, polls: x.polls})
			return
		}
	}
	s.wheel.add(s.t, s.t+ms, x)
}

// notice is the answer's queue.ChangeNotice at s.t as the service would
// give it: its cache TTL is the change delay (CacheTTL) less the admin
// write budget, and one busy instance reads the program each time its read
// expires (at every multiple of the TTL).
func (s *sim) notice() time.Duration {
	ttl := (s.cfg.CacheTTL - queue.AdminWriteBudget).Milliseconds()
	if ttl <= 0 {
		return 0
	}
	return time.Duration(ttl-s.t%ttl) * time.Millisecond
}

// leave is x's DELETE at s.t. The leave instant lies before the ticket's
// admission, so the service answers 204 and the token reads LEFT.
func (s *sim) leave(x waiter, serving int64) {
	if int64(x.ticket) <= serving {
		panic("simulate: a user leaves after its admission") // planLeaves prevents it
	}
	s.left++
	s.leaves++
	s.count()
}

// planLeaves sets leaveAt: each abandoning user leaves at its drawn fraction
// of the wait from its enter to its admission (bench.AdmissionTimes) or to
// the timeout. A user admitted at its enter does not leave.
func (s *sim) planLeaves() {
	sc := s.cfg.Scenario
	frac := sc.Leaving(s.cfg.Seed)
	if frac == nil {
		return
	}
	admit := bench.AdmissionTimes(sc, s.cfg.CacheTTL, false)
	s.leaveAt = make([]int64, sc.Users+1)
	for i, f := range frac {
		tk := i + 1
		s.leaveAt[tk] = -1
		if f < 0 {
			continue
		}
		enter := sc.Arrival.At(i, sc.Users).Milliseconds()
		end := sc.Timeout.Milliseconds()
		if admit[tk] >= 0 {
			end = admit[tk].Milliseconds()
		}
		if end > enter {
			s.leaveAt[tk] = enter + int64(f*float64(end-enter))
		}
	}
}

// needs says how much of the polling.Situation a policy reads, so that a
// poll builds the costly Program.Situation only for policies that read it.
type needs int

const (
	needsAll      needs = iota // any policy: Program.Situation
	needsNothing               // polling.Fixed
	needsPosition              // polling.Tiers reads the position only
)

// fullSituation makes every policy get Program.Situation (tests compare).
var fullSituation = false

func needsOf(p polling.Policy) needs {
	if fullSituation {
		return needsAll
	}
	switch p.(type) {
	case polling.Fixed:
		return needsNothing
	case polling.Tiers:
		return needsPosition
	}
	return needsAll
}

// advance records the admission instant of the tickets the serving counter
// passed since the last call.
func (s *sim) advance(serving int64) {
	for s.admitted < serving {
		s.admitted++
		s.admitAt[s.admitted] = s.t
	}
}

// count counts an enter at s.t.
func (s *sim) count() {
	sec := s.second()
	s.requests++
	s.series[sec]++
}

// countPoll counts a poll at s.t.
func (s *sim) countPoll() {
	sec := s.second()
	s.requests++
	s.pollCount++
	s.series[sec]++
	s.pollSeries[sec]++
}

// second returns the index of s.t's second in the series, growing them.
func (s *sim) second() int {
	sec := int(s.t / 1000)
	for len(s.series) <= sec {
		s.series = append(s.series, 0)
		s.pollSeries = append(s.pollSeries, 0)
	}
	return sec
}

func (s *sim) result() bench.Result {
	sc := s.cfg.Scenario
	enters := s.requests - s.pollCount - s.leaves
	r := bench.Result{
		Policy:        s.cfg.Policy.Name,
		Mode:          "simulate",
		Arrival:       sc.Arrival.String(),
		AdmitRate:     sc.Rates.String(),
		Seed:          s.cfg.Seed,
		Users:         sc.Users,
		Entered:       s.entered,
		Admitted:      s.seen,
		Left:          s.left,
		Requests:      s.requests,
		Enters:        enters,
		Polls:         s.pollCount,
		Leaves:        s.leaves,
		RpsSeries:     s.series,
		PollSeries:    s.pollSeries,
		ByRoute:       map[string]int64{RouteEnter: enters, RoutePoll: s.pollCount},
		Abandon:       sc.Abandon,
		CacheTTLMs:    s.cfg.CacheTTL.Milliseconds(),
		NotifyDelayMs: bench.Summarize(s.delays),
	}
	if s.leaves > 0 {
		r.ByRoute[RouteLeave] = s.leaves
	}
	duration := time.Duration(s.t) * time.Millisecond
	if sc.Timeout > 0 && s.seen+s.left < sc.Users {
		duration = sc.Timeout
	}
	r.Finish(duration, s.pollsOfAdmitted)
	r.Price(s.cfg.Prices)
	return r
}

// waiter is a pending poll: the user's ticket (negative for a pending
// leave) and the polls it has sent.
type waiter struct {
	ticket int32
	polls  int32
}

// wheel is a calendar queue of pending polls: one bucket per millisecond,
// modulo a power-of-two horizon that grows to fit the longest delay.
type wheel struct {
	buckets [][]waiter
	mask    int64
	// spare holds the storage of large processed buckets, handed to the
	// next empty bucket that receives a poll.
	spare [][]waiter
}

func (w *wheel) init(size int64) {
	w.buckets = make([][]waiter, size)
	w.mask = size - 1
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

// take detaches the bucket due at ms t.
func (w *wheel) take(t int64) []waiter {
	i := t & w.mask
	b := w.buckets[i]
	w.buckets[i] = nil
	return b
}

// giveBack returns a processed bucket's storage for reuse: a small one
// stays in its bucket, a large one goes to the few spares.
func (w *wheel) giveBack(t int64, b []waiter) {
	i := t & w.mask
	switch {
	case cap(b) <= 1<<16:
		if w.buckets[i] == nil {
			w.buckets[i] = b[:0]
		}
	case len(w.spare) < 4:
		w.spare = append(w.spare, b[:0])
	}
}

// grow widens the horizon beyond horizon ms. An entry's due time is
// implied by its bucket: the one instant in (now, now+size) congruent to
// the bucket's index.
func (w *wheel) grow(now, horizon int64) {
	size := int64(len(w.buckets))
	for size <= horizon {
		size *= 2
	}
	old, oldMask := w.buckets, w.mask
	w.init(size)
	for i, b := range old {
		if len(b) == 0 {
			continue
		}
		due := now + (int64(i)-now)&oldMask
		j := due & w.mask
		w.buckets[j] = append(w.buckets[j], b...)
	}
}
