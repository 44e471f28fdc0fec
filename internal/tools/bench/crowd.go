package bench

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/example/waitingroom/internal/api"
	"github.com/example/waitingroom/internal/settings"
)

// Crowd is a program's maxActiveUsers and noShowSeconds (0: none), and
// what its people do once admitted: a fraction NoShow in [0, 1) never
// fetch their admission, and, when Session.Max is positive, the site ends
// the others' sessions a uniform time in Session after they saw ADMITTED.
type Crowd struct {
	MaxActive, NoShowSeconds int64
	NoShow                   float64
	Session                  Range
}

// Settings adds the program settings of c that are set to s.
func (c Crowd) Settings(s *api.ProgramSettings) {
	if c.MaxActive > 0 {
		s.MaxActiveUsers = new(c.MaxActive)
	}
	if c.NoShowSeconds > 0 {
		s.NoShowSeconds = new(c.NoShowSeconds)
	}
}

// Range is a closed range of durations.
type Range struct{ Min, Max time.Duration }

// Validate reports the settings of c a program refuses or a crowd cannot
// have, naming the bench's flags.
func (c Crowd) Validate() error {
	s := c.Session
	switch {
	case c.MaxActive < 0 || c.MaxActive > settings.MaxMaxActiveUsers:
		return fmt.Errorf("-max-active %d: want 0 (no cap) to %d", c.MaxActive, settings.MaxMaxActiveUsers)
	case c.NoShowSeconds != 0 && (c.NoShowSeconds < settings.MinNoShowSeconds || c.NoShowSeconds > settings.MaxNoShowSeconds):
		return fmt.Errorf("-no-show-seconds %d: want 0 (none) or %d to %d", c.NoShowSeconds, settings.MinNoShowSeconds, settings.MaxNoShowSeconds)
	case !(c.NoShow >= 0 && c.NoShow < 1):
		return fmt.Errorf("-no-show %g: want a fraction in [0, 1)", c.NoShow)
	case s.Min < 0 || s.Max < s.Min || (s != Range{} && s.Max <= 0):
		return fmt.Errorf("-session %v-%v: want 0 ≤ MIN ≤ MAX and MAX above 0", s.Min, s.Max)
	}
	return nil
}

// Draw picks from seed alone round(NoShow × users) no-shows and, when
// Session.Max is positive, every user's session length in whole
// milliseconds; either slice is nil when there is nothing to draw.
func (c Crowd) Draw(users int, seed uint64) (noShow []bool, session []time.Duration) {
	rng := rand.New(rand.NewPCG(seed^0x6e6f2d73686f77, seed+0x5e5510_0000))
	if k := int(math.Round(c.NoShow * float64(users))); k > 0 {
		noShow = make([]bool, users)
		for _, i := range rng.Perm(users)[:k] {
			noShow[i] = true
		}
	}
	if c.Session.Max > 0 {
		lo, hi := c.Session.Min.Milliseconds(), c.Session.Max.Milliseconds()
		session = make([]time.Duration, users)
		for i := range session {
			session[i] = time.Duration(lo+rng.Int64N(hi-lo+1)) * time.Millisecond
		}
	}
	return noShow, session
}
