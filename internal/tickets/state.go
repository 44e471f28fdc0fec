package tickets

import (
	"context"
	"math"
	"time"

	"github.com/example/waitingroom/internal/admission"
)

// Rate measures: the shortest span, the smoothing, and when a rate is
// forgotten; idle state is dropped after idleAfter, swept once a sweepEvery.
const (
	measureEvery, rateSmoothing, staleMeasure = 20 * time.Millisecond, time.Second, 5 * time.Second
	idleAfter, sweepEvery                     = staleMeasure, staleMeasure
)

// programState is what an instance knows of one program's tickets.
type programState struct {
	served measure // the program's tickets, from its answers (all instances')
	asked  measure // this instance's enters, served or not
	tried  int64   // this instance's enters so far
	// shards is the count learnt at shardsAt; wider the larger one before it, until widerUntil.
	shards, wider        int
	shardsAt, widerUntil time.Time
	widened              time.Time    // when this instance last widened the count after a throttle
	opensAt              time.Time    // the program's opening, as last seen
	held                 Run          // numbers this instance holds, handed out one an enter
	heldShard            int          // the shard held came from
	heldFilled           bool         // false when that shard never held its block
	blocks               []shardBlock // the blocks this instance reserved lately, to trim once stale
	returns              []Run        // retired numbers nobody holds, to give back
	lastAsk              time.Time    // the last enter asked of this instance
	giveBackAt           time.Time    // the last give-back (givingBack: one is out)
	givingBack           bool
	used                 time.Time     // the last enter or store answer about the program
	fetchTook            time.Duration // how long fetching more numbers took lately
	// fetching is closed when the enter fetching more numbers is back; nil when none is out.
	fetching chan struct{}
}

// measure is a rate measured from a growing count.
type measure struct {
	count  int64     // the count at at, the start of the current span
	at     time.Time // when it was seen
	rate   float64   // the smoothed rate, a second; 0 if none
	rateAt time.Time // when rate was last updated
}

// add is m after count was seen at now, smoothing a span of measureEvery into m.rate.
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

// stateOf is the state of program id, or a blank one not kept; s.mu must be held.
func (s *Shards) stateOf(id string) *programState {
	if ps := s.programs[id]; ps != nil {
		return ps
	}
	return &programState{}
}

// addState is the state of program id, shown to exist at now, made if need be; s.mu must be held.
func (s *Shards) addState(id string, now time.Time) *programState {
	if s.programs == nil {
		s.programs = make(map[string]*programState)
	}
	ps := s.programs[id]
	if ps == nil {
		s.sweep(now)
		ps = &programState{}
		s.programs[id] = ps
	}
	if now.After(ps.used) {
		ps.used = now
	}
	return ps
}

// sweep drops the programs idle at now, once a sweepEvery; s.mu must be held.
func (s *Shards) sweep(now time.Time) {
	if now.Sub(s.sweptAt) < sweepEvery {
		return
	}
	s.sweptAt = now
	for id, ps := range s.programs {
		if ps.idle(now) {
			delete(s.programs, id)
		}
	}
}

// idle reports whether ps is of no more use at now: nothing for idleAfter
// (returnsKept when it holds numbers to give back), no fetch or give-back out.
func (ps *programState) idle(now time.Time) bool {
	if ps.givingBack || ps.fetching != nil {
		return false
	}
	after := idleAfter
	if len(ps.blocks) > 0 || len(ps.returns) > 0 || !ps.held.empty() {
		after = returnsKept
	}
	return now.Sub(ps.used) > after
}

// withState runs f on stateOf(id) with s.mu held.
func (s *Shards) withState(id string, f func(ps *programState)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(s.stateOf(id))
}

// recordAsk records an enter at now (kept only if exists) and returns this
// instance's rate of enters, its run length and the opening as last seen.
func (s *Shards) recordAsk(id string, now time.Time, exists bool) (asked float64, run int64, opensAt time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ps := s.stateOf(id)
	if exists {
		ps = s.addState(id, now)
	} else if now.After(ps.used) {
		ps.used = now
	}
	ps.tried++
	ps.lastAsk = now
	ps.asked = ps.asked.add(ps.tried, now)
	asked = ps.asked.current(now)
	return asked, s.runLength(ps, asked), ps.opensAt
}

// recordAnswer records a write of the program item answered at now.
func (s *Shards) recordAnswer(p admission.Program, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ps := s.addState(p.ID, now)
	ps.served = ps.served.add(p.Issued, now)
	ps.setShards(p.Shards, now)
	ps.opensAt = p.OpensAt
}

// rates are the program's ticket rate, this instance's rate of enters and its run length.
func (s *Shards) rates(id string, now time.Time) (served, asked float64, run int64) {
	s.withState(id, func(ps *programState) {
		served, asked = ps.served.current(now), ps.asked.current(now)
		run = s.runLength(ps, asked)
	})
	return served, asked, run
}

func (s *Shards) learnShards(id string, k int, now time.Time) {
	s.withState(id, func(ps *programState) { ps.setShards(k, now) })
}

// shardCount is the shard count as learnt at most ttl ago.
func (s *Shards) shardCount(id string, now time.Time, ttl time.Duration) (k int, ok bool) {
	s.withState(id, func(ps *programState) {
		k, ok = ps.shards, !ps.shardsAt.IsZero() && !now.Before(ps.shardsAt) && now.Sub(ps.shardsAt) < ttl
	})
	return k, ok
}

// setShards records k shards at now; those beyond a smaller count stay in use a block lifetime.
func (ps *programState) setShards(k int, now time.Time) {
	if k < ps.shards {
		if now.After(ps.widerUntil) {
			ps.wider = 0
		}
		ps.wider, ps.widerUntil = max(ps.wider, ps.shards), now.Add(BlockLifetime)
	}
	ps.shards, ps.shardsAt = k, now
}

// shardSpan is how many shards an enter may take from: more than k a block lifetime after a fall.
func (s *Shards) shardSpan(id string, k int, now time.Time) (span int) {
	s.withState(id, func(ps *programState) {
		span = k
		if now.Before(ps.widerUntil) {
			span = max(k, ps.wider)
		}
	})
	return span
}

// mayWiden reports whether this instance may change the shard count on its own: once a block lifetime.
func (s *Shards) mayWiden(id string, now time.Time) (may bool) {
	s.withState(id, func(ps *programState) {
		may = ps.widened.IsZero() || now.Sub(ps.widened) >= BlockLifetime
		if may {
			ps.widened = now
		}
	})
	return may
}

// takeHeld hands out the next number held, if fresh; else, when shared, one
// enter fetches more (and must call done) while the others wait.
func (s *Shards) takeHeld(ctx context.Context, id string, opensAt time.Time, shared bool) (ticket int64, ok bool, done func(), err error) {
	for {
		now := s.clock.Now()
		s.mu.Lock()
		ps := s.stateOf(id)
		if ps.held.First <= ps.held.Last && !ps.held.ReservedAt.Before(freshAfter(now, opensAt)) {
			ticket := ps.held.First
			ps.held.First++
			s.mu.Unlock()
			return ticket, true, nil, nil
		}
		if !shared {
			s.mu.Unlock()
			return 0, false, func() {}, nil
		}
		wait := ps.fetching
		if wait == nil {
			ch := make(chan struct{})
			ps.fetching = ch
			s.mu.Unlock()
			return 0, false, func() {
				s.mu.Lock()
				ps.fetching = nil
				s.mu.Unlock()
				close(ch)
			}, nil
		}
		s.mu.Unlock()
		select {
		case <-wait:
		case <-ctx.Done():
			return 0, false, nil, ctx.Err()
		}
	}
}

// hold makes r, from shard i, the numbers held; filled is false when r's block is in no shard.
func (s *Shards) hold(id string, r Run, i int, filled bool, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ps := s.addState(id, now)
	ps.held, ps.heldShard, ps.heldFilled = r, i, filled
}

func (s *Shards) recordFetch(id string, d time.Duration) {
	s.withState(id, func(ps *programState) { ps.fetchTook = (ps.fetchTook + max(d, 0)) / 2 })
}
