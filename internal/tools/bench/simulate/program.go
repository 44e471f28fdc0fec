package simulate

import (
	"errors"
	"math/rand/v2"
	"time"

	"github.com/example/waitingroom/internal/admission"
	"github.com/example/waitingroom/internal/pace"
	"github.com/example/waitingroom/internal/polling"
	"github.com/example/waitingroom/internal/settings"
	"github.com/example/waitingroom/internal/tools/bench"
)

// programModel steps an admission.Program as the service does, with the
// policy's delays: user i takes ticket i+1 on arrival, every request
// succeeds, and a poll builds only as much of the polling.Situation as the
// policy reads.
type programModel struct {
	cfg           Config
	positionOnly  bool // the policy reads only the position of a polling.Situation
	rng           *rand.Rand
	prog          admission.Program
	t             int64
	now           time.Time
	cur           int64 // the serving counter at the last call of serving
	nextChange    int
	createdPaused bool   // as a load test creates it: even the first change waits CacheTTL
	push          []bool // per user: subscribed to Web Push, told polling.Pushed (nil: nobody)
}

func newProgramModel(cfg Config, createdPaused bool) *programModel {
	return &programModel{
		cfg:          cfg,
		positionOnly: positionOnly(cfg.Policy.Policy),
		rng:          rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15)),
		// The program as the admin PUT creates it, before anyone arrives.
		prog: admission.Program{ID: "sim", CreatedAt: Epoch, Current: pace.Segment{Paused: createdPaused},
			Options: settings.Options{AdmissionWindow: admission.DefaultAdmissionWindow}},
		now:           Epoch,
		createdPaused: createdPaused,
	}
}

// tick applies the rate changes due by ms t.
func (m *programModel) tick(t int64) {
	m.t, m.now = t, Epoch.Add(time.Duration(t)*time.Millisecond)
	rates := m.cfg.Scenario.Rates
	for m.nextChange < len(rates) && rates[m.nextChange].At.Milliseconds() <= t {
		c := rates[m.nextChange]
		if m.nextChange == 0 && m.createdPaused && c.Rate == 0 {
			m.nextChange++ // created paused already
			continue
		}
		var ok bool
		if m.prog, ok = bench.ApplyChange(m.prog, m.now, c, m.nextChange == 0 && !m.createdPaused, m.cfg.CacheTTL); !ok {
			break // an earlier change is pending: try again next ms
		}
		m.nextChange++
	}
}

// AdmissionTimes returns, for each ticket 1..Users (index 0 unused), the
// offset from the start at which the simulated program admits it, rate
// changes in force delay after their offset (the first too with
// createdPaused); -1 marks a ticket not admitted before the timeout.
func AdmissionTimes(sc bench.Scenario, delay time.Duration, createdPaused bool) []time.Duration {
	at := make([]time.Duration, sc.Users+1)
	for i := range at {
		at[i] = -1
	}
	if sc.Timeout == 0 && sc.Rates.Final() == 0 {
		return at
	}
	m := newProgramModel(Config{Scenario: sc, CacheTTL: delay}, createdPaused)
	var admitted int64
	steps(sc, m.tick, func(int) { m.prog = m.prog.WithTicketIssued(m.now) }, func() bool {
		for serving := m.serving(); admitted < serving; {
			admitted++
			at[admitted] = time.Duration(m.t) * time.Millisecond
		}
		return admitted >= int64(sc.Users)
	})
	return at
}

func (m *programModel) program() admission.Program { return m.prog }

func (m *programModel) serving() int64 {
	m.cur = m.prog.Serving(m.now)
	return m.cur
}

// enter issues the next ticket and answers it like Service.Enter.
func (m *programModel) enter(u int) (answer, error) {
	m.prog = m.prog.WithTicketIssued(m.now)
	m.serving()
	return m.answer(m.prog.Issued, m.push != nil && m.push[u]), nil
}

func (m *programModel) poll(us *user) (answer, error) { return m.answer(us.ticket, us.subscribed), nil }

// answer is the service's answer to ticket tk at m.now, the serving
// counter at m.cur; a subscribed person is told polling.Pushed of the
// policy's delay.
func (m *programModel) answer(tk int64, subscribed bool) answer {
	if tk <= m.cur {
		return answer{ticket: tk, admitted: true}
	}
	sit := polling.Situation{Position: tk - m.cur} // what Situation computes, without the wait estimate
	if !m.positionOnly {
		sit = m.prog.Situation(tk, m.now, m.notice())
	}
	told := m.cfg.Policy.Policy.RetryAfter(sit, m.rng)
	if subscribed {
		if m.positionOnly {
			sit = m.prog.Situation(tk, m.now, m.notice())
		}
		told = polling.Pushed(sit, told, m.rng)
	}
	return answer{ticket: tk, position: tk - m.cur, retryAfter: told}
}

// notice is the answer's admission.ChangeNotice at m.t as one busy instance
// would give it, caching for CacheTTL less the admin write budget.
func (m *programModel) notice() time.Duration {
	ttl := (m.cfg.CacheTTL - admission.AdminWriteBudget).Milliseconds()
	if ttl <= 0 {
		return 0
	}
	return time.Duration(ttl-m.t%ttl) * time.Millisecond
}

// place is the ticket: the program has no shuffled opening.
func (m *programModel) place(us user, _ admission.Program) int64 { return us.ticket }

func (m *programModel) release(string) error {
	return errors.New("simulate: sessions are simulated with the service only")
}

func (m *programModel) finish(*bench.Result) {}

// fullSituation makes every policy get Program.Situation (tests compare).
var fullSituation = false

// positionOnly reports whether p reads no more of a polling.Situation than
// its position (polling.Tiers; polling.Fixed reads nothing).
func positionOnly(p polling.Policy) bool {
	switch p.(type) {
	case polling.Fixed, polling.Tiers:
		return !fullSituation
	}
	return false
}

// earliest is the earliest admission of ticket tk at m.now, as the push
// sender reads it: Situation.Earliest, or HeldEarliest when set; 0 when
// unknown.
func (m *programModel) earliest(tk int64) time.Duration {
	sit := m.prog.Situation(tk, m.now, m.notice())
	return max(sit.Earliest, sit.HeldEarliest)
}
