package admission

// A program's capacity: the ceiling on its serving counter.

import (
	"time"

	"github.com/example/waitingroom/internal/capacity"
	"github.com/example/waitingroom/internal/pace"
)

// Ceiling is p's ceiling on its serving counter.
func (p Program) Ceiling() capacity.Ceiling {
	return capacity.Ceiling{Cap: p.MaxActiveUsers - p.CapRaised, Capacity: p.Capacity, Reserved: p.Reserved}
}

// CounterAt is the serving counter at Unix ms under the ceiling, not
// capped by Issued.
func (p Program) CounterAt(ms int64) int64 {
	c := p.SegmentAt(ms).Counter(ms)
	if l, ok := p.Ceiling().At(ms); ok {
		c = min(c, l)
	}
	return c
}

// RoundMs is the least time, in ms, between a slot taken and its reuse,
// seen with notice.
func RoundMs(notice time.Duration) int64 {
	if notice <= 0 {
		return capacity.FoldPeriod.Milliseconds()
	}
	return (notice + AdminWriteBudget).Milliseconds()
}

// heldAt reports whether the ceiling holds the counter at Unix ms.
func (p Program) heldAt(ms int64) bool {
	l, ok := p.Ceiling().At(ms)
	return ok && l < p.SegmentAt(ms).Counter(ms)
}

// Followed reports whether the folds follow p's admissions.
func (p Program) Followed() bool { return p.MaxActiveUsers > 0 || p.NoShowSeconds > 0 }

// NoShowAfter is how long someone admitted has to fetch their pass.
func (p Program) NoShowAfter() time.Duration {
	if p.NoShowSeconds > 0 {
		return time.Duration(p.NoShowSeconds) * time.Second
	}
	return p.Window()
}

// SlotFreedAfter is how long after an admission its slot is counted free.
func (p Program) SlotFreedAfter() time.Duration { return p.Window() + capacity.ExpiryMargin }

// PollToShow is the longest poll interval on a followed program when a
// change could admit someone notice from now, or, for a place the ceiling
// holds under a turnover bound, held from now (Situation.HeldEarliest):
// half the time to show after it, within capacity.AnswerLife.
func (p Program) PollToShow(notice, held time.Duration) time.Duration {
	if held > 0 {
		return max(min(max(notice, held)+p.NoShowAfter()/2, capacity.AnswerLife), time.Second)
	}
	return max(notice+p.NoShowAfter()/2, time.Second)
}

// FoldDue reports whether a request at now, holding p, should fold it.
func (p Program) FoldDue(now time.Time) bool {
	return p.Followed() && pace.UnixMs(now)-p.Capacity.FoldedAtMs >= capacity.FoldPeriod.Milliseconds()
}

// Folding is p as a fold at now reads it.
func (p Program) Folding(now time.Time) capacity.Program {
	return capacity.Program{
		ID: p.ID, Capacity: p.Capacity, Capped: p.MaxActiveUsers > 0,
		NoShowAfter: p.NoShowAfter(), FreedAfter: p.SlotFreedAfter(),
		Rate: p.Settled().Rate, Serving: p.Serving(now), CapRaised: p.CapRaised,
	}
}

// WithBypass returns p with n bypass passes, held until untilMs, reserved
// by an admin change at now, and the room (p unchanged when less than n).
func (p Program) WithBypass(n, untilMs int64, now time.Time, delay time.Duration) (Program, int64) {
	settled := p.Settled()
	q := p.Rebased(now, settled.Rate, settled.Paused, 0, delay)
	if p.MaxActiveUsers <= 0 {
		return q, n
	}
	// The ceiling now, less the most the counter reaches before the change.
	ms, at := pace.UnixMs(now), pace.UnixMs(now)
	if q.Pending(now) {
		at = q.Next.AnchorMs
	}
	ceiling, _ := p.Ceiling().At(ms)
	if room := ceiling - q.SegmentAt(at).Counter(at); n > room {
		return p, max(room, 0)
	}
	q.Reserved = capacity.Reserve(q.Reserved, capacity.Reservation{FromMs: ms, UntilMs: untilMs, N: n, Rate: settled.Rate}, ms)
	return q, n
}
