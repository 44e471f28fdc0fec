package simulate

import (
	"slices"
	"time"

	"github.com/example/waitingroom/internal/admission"
	"github.com/example/waitingroom/internal/app"
	"github.com/example/waitingroom/internal/queue"
	"github.com/example/waitingroom/internal/tools/bench"
	"github.com/example/waitingroom/internal/tools/localkeys"
)

// passSigner returns a signer of admission passes with a fresh local key.
func passSigner() (queue.PassSigner, error) {
	key, err := localkeys.Generate()
	if err != nil {
		return nil, err
	}
	iss, err := localkeys.FixedIssuer("https://queue.example.com", key)
	if err != nil {
		return nil, err
	}
	return app.Signer(iss), nil
}

// capacityState is what a simulation that follows admissions counts from
// the users' side.
type capacityState struct {
	// noShow and session are the crowd by arrival order (bench.Crowd.Draw):
	// session runs from seeing ADMITTED to the session's end; nil: to the window's end.
	noShow        []bool
	session       []time.Duration
	noShowAfterMs int64 // the program's time to show (-1: without a cap)
	noShows       int
	// active is how many users saw ADMITTED and are in their session and
	// window; mostActive its peak.
	active, mostActive int64
	servedMs           int64 // when the last user who showed saw ADMITTED
	pendingEnds        int   // sessions the site has yet to end
	sessionsEnded      int64
	endErrors          int64
	frees              []int64 // when a slot of a capped program freed (ms)
}

// init draws cfg's crowd and reads the time to show of p, the program as
// created.
func (c *capacityState) init(cfg Config, p admission.Program) {
	c.noShow, c.session = cfg.Crowd.Draw(cfg.Scenario.Users, cfg.Seed)
	c.noShowAfterMs = -1
	if cfg.Crowd.MaxActive > 0 {
		c.noShowAfterMs = p.AdmissionWindow.Milliseconds()
		if cfg.Crowd.NoShowSeconds > 0 {
			c.noShowAfterMs = cfg.Crowd.NoShowSeconds * 1000
		}
	}
}

// isNoShow reports whether user u, a no-show, stops polling now: the
// serving counter has passed its place.
func (s *sim) isNoShow(u int) bool {
	c := &s.capacity
	if c.noShow == nil || !c.noShow[u] {
		return false
	}
	s.advance() // a fold in this millisecond may have moved the counter
	place := s.model.place(s.users[u], s.model.program())
	if place >= int64(len(s.admitAt)) {
		return false
	}
	c.noShows++
	if c.noShowAfterMs >= 0 {
		c.frees = append(c.frees, s.admitAt[place]+c.noShowAfterMs)
	}
	return true
}

// admitted starts the session of user u, who just heard a (ADMITTED),
// until the site ends it or the window ends.
func (s *sim) admitted(u int, a answer) {
	c := &s.capacity
	c.active++
	c.mostActive = max(c.mostActive, c.active)
	c.servedMs = s.t
	windowEnd := max(a.expiresAt.Sub(Epoch).Milliseconds(), s.t+1)
	s.users[u].pass, s.users[u].windowEndMs = a.pass, windowEnd
	at, event := windowEnd, windowEndEvent
	if c.session != nil {
		if end := s.t + c.session[u].Milliseconds(); end < windowEnd {
			at, event = end, sessionEndEvent
			c.pendingEnds++
		}
	}
	s.wheel.add(s.t, at, waiter{user: int32(u + 1), event: event})
}

// endSession is the site ending user u's session with its pass; one that
// fails runs on to its window's end.
func (s *sim) endSession(u int) {
	c := &s.capacity
	c.pendingEnds--
	if err := s.model.release(s.users[u].pass); err != nil {
		c.endErrors++
		s.wheel.add(s.t, s.users[u].windowEndMs, waiter{user: int32(u + 1), event: windowEndEvent})
		return
	}
	c.sessionsEnded++
	s.release()
}

// release ends a session, at the site's word or the window's end.
func (s *sim) release() {
	c := &s.capacity
	c.active--
	if c.noShowAfterMs >= 0 {
		c.frees = append(c.frees, s.t)
	}
}

// capacityResult returns what the capacity model measured, p being the
// program at the end of the run.
func (s *sim) capacityResult(p admission.Program) *bench.Capacity {
	c := &s.capacity
	r := &bench.Capacity{
		MaxActiveUsers: s.cfg.Crowd.MaxActive,
		NoShowSeconds:  s.cfg.Crowd.NoShowSeconds,
		NoShows:        int64(c.noShows),
		ServerNoShows:  p.Capacity.NoShows,
		ServedMs:       float64(c.servedMs),
		MostActive:     c.mostActive,
		SessionsEnded:  c.sessionsEnded,
		EndErrors:      c.endErrors,
	}
	// Given back: the no-shows the folds found, less those still owed.
	r.Wasted = max(r.NoShows-(p.Capacity.NoShows-p.Capacity.Owed), 0)
	if s.cfg.Crowd.MaxActive > 0 {
		// The j-th slot freed is taken by admission cap + j.
		slices.Sort(c.frees)
		var delays []float64
		for j, at := range c.frees {
			place := s.cfg.Crowd.MaxActive + int64(j) + 1
			if place >= int64(len(s.admitAt)) {
				break
			}
			delays = append(delays, float64(s.admitAt[place]-at))
		}
		reuse := bench.Summarize(delays)
		r.SlotReuseMs = &reuse
	}
	return r
}
