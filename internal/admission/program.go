// Package admission is a program's stored state as a value (Program) and
// the arithmetic of who is admitted when, and an instance's Cache of reads.
// Nothing here reads a clock or a store: package queue applies these rules,
// and every store applies WithTicketsIssued atomically.
//
// Invariants (docs/design.md, "The admission model" to "Caching"):
//   - The serving counter (Serving) is a function of the stored segments
//     and the time, so it never goes back: Rebased keeps it where it is
//     or, admitting more, moves it forward, never past Issued.
//   - WithTicketsIssued(now, n) leaves p as n calls of WithTicketIssued
//     would, and re-anchors a drained counter on Issued (no idle credit).
//   - A change Rebased with a delay takes effect at now+delay; until then
//     every answer computed from an older read stays true.
//   - A read is reused (CacheableUntil) never past its drain instant,
//     after which a ticket may re-anchor the counter, unless the ceiling
//     holds the counter then.
//   - Under a cap, the counter never passes the Ceiling: admissions plus
//     bypass passes held stay within MaxActiveUsers.
package admission

import (
	"time"

	"github.com/example/waitingroom/internal/capacity"
	"github.com/example/waitingroom/internal/history"
	"github.com/example/waitingroom/internal/pace"
	"github.com/example/waitingroom/internal/polling"
	"github.com/example/waitingroom/internal/settings"
)

// Defaults of a new program's settings.
const (
	DefaultAdmissionRate   = 10 * pace.OnePerSecond
	DefaultAdmissionWindow = 10 * time.Minute
)

// AdminWriteBudget bounds how long an admin change may take to be stored.
const AdminWriteBudget = time.Second

// Program is one queue: its ticket counter and its admission state, a
// counter computed from time along Current until Next takes over.
type Program struct {
	ID        string
	CreatedAt time.Time
	Version   int64 // bumped by every settings or admission change, and by a re-anchor
	Issued    int64 // tickets handed out, 1..Issued

	Current pace.Segment
	Next    pace.Segment // takes over at Next.AnchorMs; the zero Segment when none is scheduled

	// DrainAtNs is the Unix ns at which the counter reaches Issued, rounded up.
	DrainAtNs int64

	settings.Options // the admin-set values

	// The measured pace of manual admissions (WithManualAdmission).
	ManualRate   pace.Rate
	LastAdmitAt  time.Time
	LastAdmitGap time.Duration

	// Changes are the latest admin changes, newest first (history.Push).
	Changes []string

	// Shards is how many ticket shards (package tickets) hand out tickets.
	Shards int
	// Recent are the Unix ms of the last single tickets, newest first.
	Recent [RecentTickets]int64

	// ShuffleNonce makes the shuffle's message (shuffle.Message) unique.
	ShuffleNonce string
	// ShufflePublicKey and ShuffleSeed are never stored: the service sets
	// them from its shuffle key.
	ShufflePublicKey, ShuffleSeed string
	// Prequeue is how many tickets were issued before the opening, once fixed.
	Prequeue      int64
	PrequeueFixed bool

	// Capacity is the fold's state; only the fold writes it.
	Capacity capacity.Capacity
	// ExtraGiven is how many of Capacity.Owed were given back.
	ExtraGiven int64
	// CapRaised is how much maxActiveUsers was raised since admission
	// started: slots the folds free through the turnover bound.
	CapRaised int64
	// Reserved are the slots of the ceiling that bypass passes hold.
	Reserved []capacity.Reservation
}

// Window is p's admission window: its own, or the default.
func (p Program) Window() time.Duration {
	if p.AdmissionWindow > 0 {
		return p.AdmissionWindow
	}
	return DefaultAdmissionWindow
}

// RecentTickets is how many single tickets' instants a program keeps.
const RecentTickets = 8

// BurstRate is the rate per second of the last RecentTickets single tickets.
func (p Program) BurstRate() float64 {
	oldest := p.Recent[RecentTickets-1]
	if oldest == 0 {
		return 0
	}
	span := max(p.Recent[0]-oldest, 1)
	return float64(RecentTickets-1) * 1000 / float64(span)
}

// Scheduled reports whether a change is scheduled, pending or not.
func (p Program) Scheduled() bool { return p.Next.AnchorMs != 0 }

// SegmentAt returns the segment in effect at Unix ms.
func (p Program) SegmentAt(ms int64) pace.Segment {
	if p.Scheduled() && ms >= p.Next.AnchorMs {
		return p.Next
	}
	return p.Current
}

// Segment returns the segment in effect at t.
func (p Program) Segment(t time.Time) pace.Segment { return p.SegmentAt(pace.UnixMs(t)) }

// Settled returns the segment in effect once any scheduled change is.
func (p Program) Settled() pace.Segment {
	if p.Scheduled() {
		return p.Next
	}
	return p.Current
}

func (p Program) pendingAt(ms int64) bool { return p.Scheduled() && ms < p.Next.AnchorMs }

// Pending reports whether a scheduled change has yet to take effect at now.
func (p Program) Pending(now time.Time) bool { return p.pendingAt(pace.UnixMs(now)) }

// StepNs is how far each ticket issued pushes DrainAtNs back.
func (p Program) StepNs() int64 { return p.Settled().StepNs() }

// Serving returns the serving counter at now, capped by Issued.
func (p Program) Serving(now time.Time) int64 {
	return min(p.CounterAt(pace.UnixMs(now)), p.Issued)
}

// Full reports whether the line is at its MaxWaiting at now.
func (p Program) Full(now time.Time) bool {
	return p.MaxWaiting > 0 && p.Issued-p.Serving(now) >= p.MaxWaiting
}

// Admits reports whether ticket is admitted at now, whatever Issued.
func (p Program) Admits(ticket int64, now time.Time) bool {
	return ticket <= p.CounterAt(pace.UnixMs(now))
}

func (p Program) drainedAt(ms int64) bool {
	return !p.pendingAt(ms) && p.SegmentAt(ms).Advancing() && p.DrainAtNs <= pace.MsToNs(ms)
}

// CacheableUntil is until when a program read at loadedAt may be reused:
// ttl later, but not past the drain instant nor an armed shuffle's opening.
func (p Program) CacheableUntil(loadedAt time.Time, ttl time.Duration) time.Time {
	until := loadedAt.Add(ttl)
	if p.Armed() && p.OpensAt.After(loadedAt) && p.OpensAt.Before(until) {
		until = p.OpensAt // the pre-queue is fixed then: read it
	}
	if p.Segment(until).Advancing() || p.Current.Advancing() {
		if d := pace.FromUnixMs(pace.NsToMs(p.DrainAtNs)); d.Before(until) && !p.heldAt(pace.UnixMs(loadedAt)) {
			until = d
		}
	}
	return until
}

// folded returns p with a change that has taken effect by ms made current.
func (p Program) folded(ms int64) Program {
	if p.Scheduled() && ms >= p.Next.AnchorMs {
		p.Current, p.Next = p.Next, pace.Segment{}
	}
	return p
}

// WithTicketIssued returns p after one more ticket is handed out at now:
// the rule every Store applies atomically.
func (p Program) WithTicketIssued(now time.Time) Program { return p.WithTicketsIssued(now, 1) }

// WithTicketsIssued returns p after n ≥ 1 tickets are handed out at now,
// as n WithTicketIssued would but for Recent.
func (p Program) WithTicketsIssued(now time.Time, n int64) Program {
	ms := pace.UnixMs(now)
	p = p.WithPrequeueFixed(now)
	if p.drainedAt(ms) {
		p = p.folded(ms)
		p.Current.Base, p.Current.AnchorMs = p.Issued, ms
		p.DrainAtNs = pace.MsToNs(ms)
		p.Version++
	}
	p.Issued = pace.AddSat(p.Issued, n)
	p.DrainAtNs = pace.AddSat(p.DrainAtNs, pace.MulSat(n, p.StepNs()))
	if n == 1 {
		copy(p.Recent[1:], p.Recent[:RecentTickets-1])
		p.Recent[0] = ms
	}
	return p
}

// WithTicketsReturned returns p, with no change pending, with tickets
// from..Issued given back.
func (p Program) WithTicketsReturned(from int64) Program {
	p.Issued = from - 1
	p.DrainAtNs = p.Settled().DrainAtNs(p.Issued)
	p.Version++
	return p
}

// MayReturn reports whether tickets from..Issued, held by nobody, may be
// given back at now, the counter not reaching from-1 within hold.
func (p Program) MayReturn(from int64, now time.Time, hold time.Duration) bool {
	switch {
	case p.Pending(now) || from < 1 || from > p.Issued:
		return false
	case p.Shuffle && p.PrequeueFixed && p.Prequeue >= from, p.Armed() && !now.Before(p.OpensAt):
		return false
	}
	ms := pace.UnixMs(now.Add(hold))
	return p.SegmentAt(ms).Counter(ms) < from-1
}

// Rebased returns p with an admin change made at now (rate, paused, admit
// more), taking effect at now+delay, or at once when delay is 0 or the
// queue has drained; no change may be pending.
func (p Program) Rebased(now time.Time, rate pace.Rate, paused bool, admit int64, delay time.Duration) Program {
	ms := pace.UnixMs(now)
	p = p.folded(ms)
	p.Version++
	if delay <= 0 || p.drainedAt(ms) {
		serving := min(p.CounterAt(ms), p.Issued) // credit beyond Issued, or the ceiling, is dropped
		p.Current = pace.Segment{AnchorMs: ms, Base: min(pace.AddSat(serving, admit), p.Issued), Rate: rate, Paused: paused, StartMs: p.startAfter(ms)}
		p.Next = pace.Segment{}
		p.DrainAtNs = p.Current.DrainAtNs(p.Issued)
		return p
	}
	at := pace.AddSat(ms, delay.Milliseconds())
	raw := p.Current.Counter(at)
	p.Next = pace.Segment{AnchorMs: at, Base: raw, Rate: rate, Paused: paused, StartMs: p.startAfter(at)}
	if admit > 0 {
		p.Next.Base = max(raw, min(pace.AddSat(raw, admit), p.Issued))
	}
	p.DrainAtNs = p.ScheduledDrainAtNs(p.Issued)
	return p
}

// ScheduledDrainAtNs is the drain instant of p, scheduled, with issued tickets.
func (p Program) ScheduledDrainAtNs(issued int64) int64 {
	if p.Current.Advancing() {
		if d := p.Current.DrainAtNs(issued); d <= pace.MsToNs(p.Next.AnchorMs) {
			return d
		}
	}
	return p.Next.DrainAtNs(issued)
}

// DrainMoveNs is ScheduledDrainAtNs(issued) − DrainAtNs.
func (p Program) DrainMoveNs(issued int64) int64 {
	return p.ScheduledDrainAtNs(issued) - p.DrainAtNs
}

// MovedDrainAtNs is drainAtNs moved by DrainMoveNs(issued), saturating.
func (p Program) MovedDrainAtNs(drainAtNs, issued int64) int64 {
	d := p.DrainMoveNs(issued)
	if d < 0 {
		return drainAtNs + d
	}
	return pace.AddSat(drainAtNs, d)
}

// WithChange returns p recording admin change id, made at at (history.Push).
func (p Program) WithChange(id string, at time.Time) Program {
	p.Changes = history.Push(p.Changes, p.Version, id, at)
	return p
}

// admissionMs is admissionTime in Unix ms.
func (p Program) admissionMs(ticket, ms int64) (int64, bool) {
	if p.pendingAt(ms) {
		if at, ok := p.Current.AdmittedAt(ticket, ms); ok && at < p.Next.AnchorMs {
			return at, true
		}
		return p.Next.AdmittedAt(ticket, p.Next.AnchorMs)
	}
	return p.SegmentAt(ms).AdmittedAt(ticket, ms)
}

// AdmissionTime is when ticket will be admitted if p's schedule holds, if known.
func (p Program) AdmissionTime(ticket int64, now time.Time) (time.Time, bool) {
	at, ok := p.admissionMs(ticket, pace.UnixMs(now))
	if !ok {
		return time.Time{}, false
	}
	return pace.FromUnixMs(at), true
}

// maxAdmitGap is the longest gap between two manual admissions of one pace.
const maxAdmitGap = 10 * time.Minute

// WithManualAdmission records a manual admission of n at now.
func (p Program) WithManualAdmission(n int64, now time.Time) Program {
	now = pace.FromUnixMs(pace.UnixMs(now))
	gap := now.Sub(p.LastAdmitAt)
	switch {
	case p.LastAdmitAt.IsZero() || gap <= 0 || gap > maxAdmitGap:
		p.ManualRate, p.LastAdmitGap = 0, 0
	default:
		measured, _ := pace.MulDiv(uint64(n), 1e6, uint64(gap.Milliseconds()), false)
		if p.ManualRate > 0 {
			measured = (int64(p.ManualRate) + measured) / 2
		}
		p.ManualRate, p.LastAdmitGap = pace.Rate(measured), gap
	}
	p.LastAdmitAt = now
	return p
}

// MeasuredRate is the pace of manual admissions at now, while it holds.
func (p Program) MeasuredRate(now time.Time) (pace.Rate, bool) {
	if p.ManualRate <= 0 || now.Sub(p.LastAdmitAt) > 2*p.LastAdmitGap+time.Second {
		return 0, false
	}
	return p.ManualRate, true
}

// Situation is what a polling policy may know about ticket at now; notice
// is ChangeNotice.
func (p Program) Situation(ticket int64, now time.Time, notice time.Duration) polling.Situation {
	ms := pace.UnixMs(now)
	seg := p.SegmentAt(ms)
	sit := polling.Situation{Position: ticket - p.CounterAt(ms), Paused: p.Settled().Paused}
	if seg.Advancing() {
		sit.RatePerSecond = seg.Rate.PerSecond()
	}
	at, known := p.admissionMs(ticket, ms)
	if known {
		capped, ok := p.Ceiling().AdmitsMs(ticket, at)
		if ok {
			sit.Wait = waitOf(capped - ms)
		}
		if capped > at || !ok {
			sit.RatePerSecond = p.Capacity.ReleaseRate.PerSecond() // the ceiling sets the pace
		}
	} else if r, ok := p.MeasuredRate(now); ok && sit.Position > 0 {
		sit.RatePerSecond = r.PerSecond()
		wait, _ := pace.MulDiv(uint64(sit.Position), 1e6, uint64(r), false)
		sit.Wait = waitOf(wait)
	}
	if at, ok := p.earliestMs(ticket, ms, notice.Milliseconds(), at, known); ok && sit.Position > 0 {
		l := p.Ceiling()
		c, held := l.EarliestMs(ticket, ms, notice.Milliseconds(), RoundMs(notice))
		if t, bounded := l.TurnoverMs(ticket, ms); held && bounded && sit.Wait > 0 {
			// Only the ceiling's budgeted rise can let the place in (a
			// backlog may free more than a round's worth): the policies
			// sleep on the estimate, the time to show on this.
			sit.HeldEarliest = min(waitOf(max(t-ms, 1)), sit.Wait)
			return sit
		}
		if held {
			at = max(at, c) // the ceiling holds the place back too
		}
		sit.Earliest = waitOf(max(at-ms, 1))
		if sit.Wait > 0 {
			sit.Earliest = min(sit.Earliest, sit.Wait) // a measured manual pace may be faster
		}
	}
	return sit
}

// earliestMs is the first Unix ms at which ticket could be admitted at no
// faster than the settled rate, whatever the changes from notice ms on;
// at and known are p.admissionMs(ticket, ms).
func (p Program) earliestMs(ticket, ms, notice, at int64, known bool) (int64, bool) {
	settled := p.Settled()
	from := max(ms+notice, p.Current.AnchorMs)
	if p.pendingAt(ms) {
		from = max(from, p.Next.AnchorMs)
	}
	if known && p.Opened(pace.FromUnixMs(from)) || settled.Rate <= 0 {
		return at, known
	}
	resumed := pace.Segment{AnchorMs: from, Base: p.SegmentAt(from).Counter(from), Rate: settled.Rate}
	soonest, _ := resumed.AdmittedAt(ticket, from)
	if known {
		return min(at, soonest), true
	}
	return soonest, true
}

// MaxEstimatedWait caps an estimated wait.
const MaxEstimatedWait = 100 * 365 * 24 * time.Hour

// waitOf is ms milliseconds as a wait, capped at MaxEstimatedWait.
func waitOf(ms int64) time.Duration {
	if ms >= MaxEstimatedWait.Milliseconds() {
		return MaxEstimatedWait
	}
	return time.Duration(max(ms, 0)) * time.Millisecond
}
