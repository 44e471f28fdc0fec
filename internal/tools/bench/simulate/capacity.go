package simulate

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/example/waitingroom/internal/admissionpass"
	"github.com/example/waitingroom/internal/app"
	"github.com/example/waitingroom/internal/queue"
	"github.com/example/waitingroom/internal/tools/bench"
)

// The capacity model of service mode: the program's cap and no-show
// handling (Config.MaxActiveUsers, NoShowSeconds), and a crowd of which some
// never come to see their admission (NoShow) and the others' sessions are
// ended by the site (Session).

// Values of waiter.polls that mark a user's scheduled event rather than a
// poll: the site ends its session, or its admission window ends.
const (
	sessionEndEvent int32 = -1
	windowEndEvent  int32 = -2
)

// crowd is what each user, by arrival order, does once admitted.
type crowd struct {
	noShow  []bool  // nil: everyone shows
	session []int64 // ms from seeing ADMITTED to the session's end; nil: the window's end
}

// ValidateCapacity reports the capacity settings of cfg that cannot be
// simulated, as errors naming the bench's flags.
func ValidateCapacity(cfg Config) error {
	ss := cfg.Session
	switch {
	case cfg.MaxActiveUsers < 0 || cfg.MaxActiveUsers > queue.MaxMaxActiveUsers:
		return fmt.Errorf("simulate: -max-active %d: want 0 (no cap) to %d", cfg.MaxActiveUsers, queue.MaxMaxActiveUsers)
	case cfg.NoShowSeconds != 0 && (cfg.NoShowSeconds < queue.MinNoShowSeconds || cfg.NoShowSeconds > queue.MaxNoShowSeconds):
		return fmt.Errorf("simulate: -no-show-seconds %d: want 0 (none) or %d to %d", cfg.NoShowSeconds, queue.MinNoShowSeconds, queue.MaxNoShowSeconds)
	case !(cfg.NoShow >= 0 && cfg.NoShow < 1):
		return fmt.Errorf("simulate: -no-show %g: want a fraction in [0, 1)", cfg.NoShow)
	case ss.Min < 0 || ss.Max < ss.Min || (ss != Range{} && ss.Max <= 0):
		return fmt.Errorf("simulate: -session %v-%v: want 0 ≤ MIN ≤ MAX and MAX above 0", ss.Min, ss.Max)
	case cfg.MaxActiveUsers > 0 && ss.Max == 0 && cfg.Scenario.Timeout == 0:
		return errors.New("simulate: -max-active without -session holds every slot for a whole admission window: set -session or -timeout")
	}
	return nil
}

// drawCrowd draws from cfg.Seed alone round(NoShow × Users) no-shows and
// every user's session, so that each program meets the same crowd.
func drawCrowd(cfg Config) crowd {
	n := cfg.Scenario.Users
	rng := rand.New(rand.NewPCG(cfg.Seed^0x6e6f2d73686f77, cfg.Seed+0x5e5510_0000))
	var c crowd
	if k := int(math.Round(cfg.NoShow * float64(n))); k > 0 {
		c.noShow = make([]bool, n)
		for _, i := range rng.Perm(n)[:k] {
			c.noShow[i] = true
		}
	}
	if cfg.Session.Max > 0 {
		lo, hi := cfg.Session.Min.Milliseconds(), cfg.Session.Max.Milliseconds()
		c.session = make([]int64, n)
		for i := range c.session {
			c.session[i] = lo + rng.Int64N(hi-lo+1)
		}
	}
	return c
}

// passSigner returns a signer of admission passes with a fresh local key,
// as the service signs them on AWS.
func passSigner() (queue.PassSigner, error) {
	key, err := admissionpass.GenerateLocalKey()
	if err != nil {
		return nil, err
	}
	iss, err := admissionpass.NewIssuer("https://queue.example.com", key)
	if err != nil {
		return nil, err
	}
	return app.Signer(iss), nil
}

// capacityState is what a service-mode run with the capacity model counts
// from the users' side.
type capacityState struct {
	crowd crowd
	// noShowAfter is the program's time to show (-1: no-shows never free
	// a slot, the program having no cap).
	noShowAfterMs int64
	noShows       int
	// active is how many users are admitted, came to see it, and whose
	// session and window have not ended; mostActive its peak.
	active, mostActive int64
	servedMs           int64 // when the last user who showed saw ADMITTED
	pendingEnds        int   // sessions the site has yet to end
	sessionsEnded      int64
	endErrors          int64
	// frees are the instants (ms) at which a slot of a capped program
	// freed: a session's or a window's end, a no-show's time to show over.
	frees []int64
}

// isNoShow reports whether user u stops polling now, right before its
// admission: it is a no-show and the serving counter has passed its place.
func (s *serviceSim) isNoShow(u int) bool {
	c := &s.capacity
	if c.crowd.noShow == nil || !c.crowd.noShow[u] {
		return false
	}
	// The counter as it is now: a fold in this millisecond may have
	// moved it.
	s.advance()
	place := s.place(u)
	if place > s.serving {
		return false
	}
	c.noShows++
	if c.noShowAfterMs >= 0 {
		c.frees = append(c.frees, s.admitAt[place]+c.noShowAfterMs)
	}
	return true
}

// admitted starts the session of user u, who just saw v (ADMITTED): it
// ends at the site's word after the user's session length, or with the
// window.
func (s *serviceSim) admitted(u int, v queue.View) {
	c := &s.capacity
	c.active++
	c.mostActive = max(c.mostActive, c.active)
	c.servedMs = s.t
	s.users[u].pass = v.AdmissionPass
	windowEnd := max(v.ExpiresAt.Sub(Epoch).Milliseconds(), s.t+1)
	s.users[u].windowEndMs = windowEnd
	at, event := windowEnd, windowEndEvent
	if c.crowd.session != nil {
		if end := s.t + c.crowd.session[u]; end < windowEnd {
			at, event = end, sessionEndEvent
			c.pendingEnds++
		}
	}
	s.wheel.add(s.t, at, waiter{ticket: int32(u + 1), polls: event})
}

// endSession is the site ending user u's session with its pass. One that
// fails runs on to its window's end.
func (s *serviceSim) endSession(u int) {
	c := &s.capacity
	c.pendingEnds--
	if err := s.instance().ReleaseSession(s.ctx, serviceProgram, s.users[u].pass); err != nil {
		c.endErrors++
		s.wheel.add(s.t, s.users[u].windowEndMs, waiter{ticket: int32(u + 1), polls: windowEndEvent})
		return
	}
	c.sessionsEnded++
	s.release()
}

// release ends a session, at the site's word or the window's end.
func (s *serviceSim) release() {
	c := &s.capacity
	c.active--
	if c.noShowAfterMs >= 0 {
		c.frees = append(c.frees, s.t)
	}
}

// capacityResult returns what the capacity model measured, p being the
// program at the end of the run.
func (s *serviceSim) capacityResult(p queue.Program) *bench.Capacity {
	c := &s.capacity
	r := &bench.Capacity{
		MaxActiveUsers: s.cfg.MaxActiveUsers,
		NoShowSeconds:  s.cfg.NoShowSeconds,
		NoShows:        int64(c.noShows),
		NoShowsFound:   p.Capacity.NoShows,
		ServedMs:       float64(c.servedMs),
		MostActive:     c.mostActive,
		SessionsEnded:  c.sessionsEnded,
		EndErrors:      c.endErrors,
	}
	// Given back: the no-shows the folds found and either freed a slot
	// (a cap) or are owed to the line (none, not given yet).
	r.Wasted = max(r.NoShows-(p.Capacity.NoShows-p.Capacity.Owed), 0)
	if s.cfg.MaxActiveUsers > 0 {
		// The j-th slot freed is taken by admission cap + j.
		slices.Sort(c.frees)
		var delays []float64
		for j, at := range c.frees {
			place := s.cfg.MaxActiveUsers + int64(j) + 1
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
