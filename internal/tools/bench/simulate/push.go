package simulate

import (
	"math/rand/v2"
	"time"

	"github.com/example/waitingroom/internal/tools/bench"
)

// PushLead is how long before their earliest admission subscribed people
// get the "get ready" push: the program's pushLeadSeconds default (120).
const PushLead = 2 * time.Minute

// pushState is the Web Push side of a simulation on the program model: who
// subscribed, and the sender's progress. The sender runs at every whole
// second of the run: it pushes "turn" to every subscribed person still
// waiting whose place the program admits, delivered PushLatency later, upon
// which they poll; and "ready", once, to every subscribed person still
// waiting whose earliest admission is within PushLead, unless their turn
// came first. Places are admitted in ticket order, and the earliest
// admission grows with the ticket, so each push walks the tickets once.
type pushState struct {
	on       bool          // anyone subscribed
	report   bool          // report the push fields (Config.ReportPush or on)
	share    float64       // Config.PushShare
	latency  int64         // ms
	model    *programModel // the program the sender reads
	byTicket []int32       // the user holding each ticket (index 0 unused; -1: none)
	// turned and readied are the last tickets the sender passed for each
	// push; waiting counts the subscribed users entered and not done.
	turned, readied int64
	waiting         int
	// minutes counts the minutes of the run in which a subscribed user
	// waited, last the index of the last one counted (-1: none).
	minutes, last int64
	ready, turn   int64
	subscribed    int
}

// planPush draws the subscribed users, each with probability PushShare
// from a stream of the seed's own, so that a user subscribed at a share is
// subscribed at every larger one.
func (s *sim) planPush(pm *programModel) {
	cfg := s.cfg
	p := &s.push
	p.report, p.share, p.last = cfg.ReportPush || cfg.PushShare > 0, cfg.PushShare, -1
	if cfg.PushShare <= 0 || cfg.UsesService() {
		return
	}
	p.on, p.latency, p.model = true, cfg.PushLatency.Milliseconds(), pm
	rng := rand.New(rand.NewPCG(cfg.Seed^0x70757368, cfg.Seed+0x7375627363726962))
	subscribed := make([]bool, len(s.users))
	for i := range s.users {
		if rng.Float64() < cfg.PushShare {
			s.users[i].subscribed, subscribed[i] = true, true
			p.subscribed++
		}
	}
	pm.push = subscribed
	p.byTicket = make([]int32, 1, len(s.users)+1)
}

// entered records user u's ticket when it first entered.
func (p *pushState) entered(u int, us user) {
	if !p.on {
		return
	}
	for int64(len(p.byTicket)) <= us.ticket {
		p.byTicket = append(p.byTicket, -1)
	}
	p.byTicket[us.ticket] = int32(u)
	if us.subscribed {
		p.waiting++
	}
}

// settle marks us done: it saw ADMITTED or left.
func (p *pushState) settle(us *user) {
	if !us.done && us.subscribed && us.ticket > 0 {
		p.waiting--
	}
	us.done = true
}

// send is the sender's pass at a whole second of the run.
func (s *sim) send() {
	p := &s.push
	if !p.on || s.t%1000 != 0 {
		return
	}
	serving := s.model.serving()
	for ; p.turned < serving && p.turned+1 < int64(len(p.byTicket)); p.turned++ {
		u := p.byTicket[p.turned+1]
		if u < 0 {
			continue
		}
		if us := &s.users[u]; us.subscribed && !us.done {
			p.turn++
			s.wheel.add(s.t, s.t+p.latency, waiter{user: u + 1, event: pushEvent})
		}
	}
	p.readied = max(p.readied, p.turned) // whose turn came first gets no ready
	for ; p.readied+1 < int64(len(p.byTicket)); p.readied++ {
		if e := p.model.earliest(p.readied + 1); e <= 0 || e > PushLead {
			break
		}
		if u := p.byTicket[p.readied+1]; u >= 0 && s.users[u].subscribed && !s.users[u].done {
			p.ready++
		}
	}
}

// pushed is user u's receipt of its "turn" push: it polls at once, unless
// a poll of its own heard its admission first.
func (s *sim) pushed(u int) {
	if !s.users[u].done {
		s.poll(u)
	}
}

// minute counts the minute of ms t when a subscribed user waits in it.
func (p *pushState) minute(t int64) {
	if m := t / 60000; p.waiting > 0 && m != p.last {
		p.minutes, p.last = p.minutes+1, m
	}
}

// finish adds the push counts to r.
func (p *pushState) finish(r *bench.Result, cfg Config) {
	if !p.report {
		return
	}
	r.PushShare = new(p.share)
	r.PushLatencyMs = float64(cfg.PushLatency.Milliseconds())
	r.Subscribed, r.PushesReady, r.PushesTurn, r.SenderMinutes = p.subscribed, p.ready, p.turn, p.minutes
}
