package admission

// A program's capacity, as package capacity frees it: the ceiling on its
// serving counter (docs/design.md, "Capacity").

import (
	"time"

	"github.com/example/waitingroom/internal/capacity"
	"github.com/example/waitingroom/internal/pace"
)

// Ceiling is p's ceiling: the cap, the slots its folds freed and those its
// bypass passes hold.
func (p Program) Ceiling() capacity.Ceiling {
	return capacity.Ceiling{Cap: p.MaxActiveUsers, From: p.CapFrom, RaiseAtMs: p.CapRaiseAtMs, Capacity: p.Capacity, Reserved: p.Reserved}
}

// CounterAt is the serving counter at Unix ms, not capped by the tickets
// issued: the segments' counter, held at the ceiling of a capped program.
func (p Program) CounterAt(ms int64) int64 {
	c := p.SegmentAt(ms).Counter(ms)
	if l, ok := p.Ceiling().At(ms); ok {
		c = min(c, l)
	}
	return c
}

// RoundMs is the least time, in ms, between a slot taken and its reuse by
// the next holder, seen with notice: a fold's period without a cache;
// with one, the change delay, at least the notice plus the write budget.
func RoundMs(notice time.Duration) int64 {
	if notice <= 0 {
		return capacity.FoldPeriod.Milliseconds()
	}
	return (notice + AdminWriteBudget).Milliseconds()
}

// heldAt reports whether the ceiling holds the serving counter below the
// segments' at Unix ms. A re-anchor of the segments then changes nothing
// below the ceiling, so a read may outlive the drain instant: a reader
// still on the old segments can admit a ticket issued since only within
// the ceiling, which never lets more people in than the cap.
func (p Program) heldAt(ms int64) bool {
	l, ok := p.Ceiling().At(ms)
	return ok && l < p.SegmentAt(ms).Counter(ms)
}

// Followed reports whether the folds follow p's admissions: it has a cap
// or no-show handling.
func (p Program) Followed() bool { return p.MaxActiveUsers > 0 || p.NoShowSeconds > 0 }

// NoShowAfter is how long someone admitted has to fetch their pass before
// they are a no-show: NoShowSeconds, or with a cap and none, the window.
func (p Program) NoShowAfter() time.Duration {
	if p.NoShowSeconds > 0 {
		return time.Duration(p.NoShowSeconds) * time.Second
	}
	return p.Window()
}

// SlotFreedAfter is how long after an admission the folds count its
// capped slot free when the person came and the site did not end their
// session: the window, then the pass verifiers' margin.
func (p Program) SlotFreedAfter() time.Duration { return p.Window() + capacity.ExpiryMargin }

// PollToShow is the longest that someone waiting on a followed program is
// told to wait between polls, when the soonest a change could admit them
// is notice from now: that, then half the time to show, at least a second.
func (p Program) PollToShow(notice time.Duration) time.Duration {
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
		Rate: p.Settled().Rate, Serving: p.Serving(now),
	}
}

// bypassRoom is how many bypass passes p, capped, can take at now: the
// Ceiling now, less the most the counter may reach before the passes hold
// their slots everywhere (q is p with the change made: the old segments'
// counter at the change while one is scheduled, else the counter now).
// From now on the ceiling only rises, so passes within it never take the
// counter back (docs/design.md, "Bypass passes").
func bypassRoom(p, q Program, now time.Time) int64 {
	at := pace.UnixMs(now)
	if q.Pending(now) {
		at = q.Next.AnchorMs
	}
	ceiling, _ := p.Ceiling().At(pace.UnixMs(now))
	return ceiling - q.SegmentAt(at).Counter(at)
}

// WithBypass returns p with n bypass passes, held until untilMs, reserved
// from its ceiling at now as an admin change taking effect delay later,
// and the room there was (at least n when they were reserved; p unchanged
// when not). Without a cap it is p as an admin change that changes nothing.
func (p Program) WithBypass(n, untilMs int64, now time.Time, delay time.Duration) (Program, int64) {
	settled := p.Settled()
	q := p.Rebased(now, settled.Rate, settled.Paused, 0, delay)
	if p.MaxActiveUsers <= 0 {
		return q, n
	}
	if room := bypassRoom(p, q, now); n > room {
		return p, max(room, 0)
	}
	ms := pace.UnixMs(now)
	q.Reserved = capacity.Reserve(q.Reserved, capacity.Reservation{FromMs: ms, UntilMs: untilMs, N: n, Rate: settled.Rate}, ms)
	return q, n
}
