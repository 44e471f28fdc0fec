package admission

// A scheduled, fair opening and a scheduled close.

import (
	"time"

	"github.com/example/waitingroom/internal/pace"
	"github.com/example/waitingroom/internal/shuffle"
)

// Armed reports whether p shuffles and has not fixed its pre-queue yet.
func (p Program) Armed() bool { return p.Shuffle && !p.PrequeueFixed }

// startAfter is p's opening in Unix ms if after ms, else 0.
func (p Program) startAfter(ms int64) int64 {
	if o := pace.UnixMs(p.OpensAt); !p.OpensAt.IsZero() && o > ms {
		return o
	}
	return 0
}

// Opened reports whether p has no opening ahead at now.
func (p Program) Opened(now time.Time) bool { return p.OpensAt.IsZero() || !now.Before(p.OpensAt) }

// WithPrequeueFixed returns p with its pre-queue fixed if it is due.
func (p Program) WithPrequeueFixed(now time.Time) Program {
	if p.Armed() && !p.OpensAt.IsZero() && !now.Before(p.OpensAt) {
		p.Prequeue, p.PrequeueFixed = p.Issued, true
	}
	return p
}

// Place is ticket's place in p's admission order, if it has one yet.
func (p Program) Place(ticket int64) (int64, bool) {
	switch {
	case !p.Shuffle:
		return ticket, true
	case !p.PrequeueFixed:
		return 0, false // everyone in so far will be in the pre-queue
	case ticket > p.Prequeue:
		return ticket, true
	case p.ShuffleSeed == "":
		return 0, false
	}
	return shuffle.PlaceOf(p.ShuffleSeed, p.Prequeue, ticket), true
}

// AdmitsTicket reports whether the place of ticket is admitted at now.
func (p Program) AdmitsTicket(ticket int64, now time.Time) bool {
	place, ok := p.Place(ticket)
	return ok && p.Admits(place, now)
}

// OpeningSpread is the span after the opening over which a shuffled
// pre-queue comes back: a hundredth of its admission time, 1 to 5 s.
func (p Program) OpeningSpread(now time.Time) time.Duration {
	const minOpeningSpread, maxOpeningSpread = time.Second, 5 * time.Second
	r := p.Settled().Rate
	if r <= 0 {
		return maxOpeningSpread
	}
	size := float64(p.Issued)
	if open, since := p.OpensAt.Sub(p.CreatedAt), now.Sub(p.CreatedAt); since > 0 && open > since {
		size *= float64(open) / float64(since)
	}
	d := time.Duration(size * 10 / r.PerSecond() * float64(time.Millisecond)) // size / rate / 100 s
	return min(max(d, minOpeningSpread), maxOpeningSpread)
}

// ClosedAt reports whether p's scheduled close has come at now.
func (p Program) ClosedAt(now time.Time) bool { return !p.ClosesAt.IsZero() && !now.Before(p.ClosesAt) }

// TakesEntries reports whether p takes new entries at now.
func (p Program) TakesEntries(now time.Time) bool { return !p.Closed && !p.ClosedAt(now) }
