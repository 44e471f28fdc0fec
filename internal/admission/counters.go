package admission

import (
	"time"

	"github.com/example/waitingroom/internal/pace"
	"github.com/example/waitingroom/internal/settings"
	"github.com/example/waitingroom/internal/shuffle"
)

// Counters is the admin view of a program.
type Counters struct {
	ProgramID string
	Issued    int64 // tickets handed out
	Admitted  int64 // serving counter: tickets admitted, including ones whose holder left
	Waiting   int64 // Issued − Admitted
	Rate      float64
	Paused    bool
	CreatedAt time.Time
	settings.Options
	// EffectiveAt is when a pending change takes effect; zero otherwise.
	EffectiveAt time.Time
	// ShuffleCommitment is shuffle.Message.
	ShuffleCommitment string
	Prequeue          int64
	PrequeueFixed     bool
	// Followed: Active, Ended and NoShows count as of the last fold;
	// Turnover, its Spread and Bound are capacity.Capacity's rates, and
	// HeldBack its Backlog.
	Followed                         bool
	Active, Ended, NoShows, HeldBack int64
	Turnover, Spread, Bound          float64
	// BypassHeld is how many slots of the cap bypass passes hold.
	BypassHeld int64
}

// Counters is the admin view of p at now.
func (p Program) Counters(now time.Time) Counters {
	admitted := p.Serving(now)
	settled := p.Settled()
	c := Counters{
		ProgramID:     p.ID,
		Issued:        p.Issued,
		Admitted:      admitted,
		Waiting:       p.Issued - admitted,
		Rate:          settled.Rate.PerSecond(),
		Paused:        settled.Paused,
		CreatedAt:     p.CreatedAt,
		Options:       p.Options,
		PrequeueFixed: p.PrequeueFixed,
	}
	if p.Pending(now) {
		c.EffectiveAt = pace.FromUnixMs(p.Next.AnchorMs)
	}
	if p.Shuffle {
		c.ShuffleCommitment = shuffle.Message(p.ID, p.ShuffleNonce)
	}
	if p.PrequeueFixed {
		c.Prequeue = p.Prequeue
	}
	if p.Followed() {
		k := p.Capacity
		c.Followed = true
		c.Ended, c.NoShows = k.Ended, k.NoShows
		c.Active = max(admitted-k.Ended-k.NoShows-k.Expired, 0)
		c.Turnover, c.Spread, c.Bound, c.HeldBack = k.ReleaseRate.PerSecond(), k.ReleaseSpread.PerSecond(), k.BoundRate.PerSecond(), k.Backlog
		c.BypassHeld = p.Ceiling().ReservedAt(pace.UnixMs(now))
	}
	return c
}
