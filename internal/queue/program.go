package queue

import (
	"math"
	"regexp"
	"time"

	"github.com/example/waitingroom/internal/polling"
)

// Limits on program settings and admissions.
const (
	MaxAdmissionRate         = 100_000.0 // people per second
	MinAdmissionRate         = 0.001     // the smallest non-zero rate: one person in about 17 minutes
	MaxAdmissionCount        = 1_000_000 // per manual admission
	DefaultAdmissionRate     = 10.0
	DefaultAdmissionWindow   = 10 * time.Minute
	MinAdmissionWindow       = time.Minute
	MaxAdmissionWindow       = 24 * time.Hour
	programIDMaxLen          = 64
	tokenIDLen               = 22 // 128 bits, base64url without padding
	waitingTokenRetention    = 48 * time.Hour
	endedTokenRetention      = 24 * time.Hour
	maxStoreOptimisticTrials = 8
)

var (
	programIDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$`)
	tokenIDPattern   = regexp.MustCompile(`^[A-Za-z0-9_-]{22}$`)
)

// ValidProgramID reports whether id is a well-formed program id: 1 to 64
// characters of ASCII letters, digits, '-' and '_', starting with a letter or
// digit.
func ValidProgramID(id string) bool {
	return len(id) <= programIDMaxLen && programIDPattern.MatchString(id)
}

// ValidTokenID reports whether id has the shape of a token id (22 base64url
// characters); it says nothing of whether the token exists.
func ValidTokenID(id string) bool { return len(id) == tokenIDLen && tokenIDPattern.MatchString(id) }

// Segment is one stretch of the serving counter: from Anchor on it grows
// from Base at Rate people per second, unless Paused.
type Segment struct {
	Base   int64
	Anchor time.Time // millisecond precision
	Rate   float64
	Paused bool
}

// Advancing reports whether the counter grows by itself in this segment.
func (s Segment) Advancing() bool { return !s.Paused && s.Rate > 0 }

// raw is the counter at t, not capped by the tickets issued.
func (s Segment) raw(t time.Time) int64 {
	v := s.Base
	if s.Advancing() {
		if ms := t.Sub(s.Anchor).Milliseconds(); ms > 0 {
			// The epsilon absorbs float error at exact multiples (0.1/s × 10 s).
			v += int64(math.Floor(s.Rate*float64(ms)/1000 + 1e-9))
		}
	}
	return v
}

// stepMs is the time between two automatic admissions, 0 when the segment
// does not advance (stored as is: DynamoDB numbers hold no infinity).
func (s Segment) stepMs() float64 {
	if !s.Advancing() {
		return 0
	}
	return 1000 / s.Rate
}

// Program is one queue: its ticket counter and its admission state.
//
// Admission is a counter computed from time rather than advanced by a timer.
// The current segment (Base, Anchor, Rate, Paused) says how it grows; an
// admin change is scheduled as the Next segment, taking effect at NextAt,
// one program-cache lifetime after it was made, so that every function
// instance — those still holding the program read before the change, and
// those that read it after — computes the same counter at every instant.
//
// DrainAtMs is the instant at which the counter reaches Issued (the queue
// is empty from then on); every ticket issued pushes it back by one ticket's
// time, and a ticket issued after it re-anchors the counter at that
// instant, so that credit never piles up while the queue is empty. See the
// README, "Admission".
type Program struct {
	ID        string
	CreatedAt time.Time
	Version   int64 // bumped by every settings or admission change
	Issued    int64 // tickets handed out, 1..Issued

	// The current segment.
	Rate   float64
	Paused bool
	Base   int64     // serving counter at Anchor
	Anchor time.Time // millisecond precision

	// The scheduled segment: zero NextAt means none.
	NextAt     time.Time
	NextBase   int64
	NextRate   float64
	NextPaused bool

	DrainAtMs       float64 // Unix ms at which the counter reaches Issued
	AdmissionWindow time.Duration

	// Policy names the polling policy of this program; "" is the
	// service's default.
	Policy string

	// Closed programs take no new entries (sold out, ended); people already
	// in the queue keep their place and are admitted as before.
	Closed bool

	// The pace of manual admissions, measured: an average of people per
	// second over the last admissions, when the last one happened, and the
	// gap before it.
	ManualRate   float64
	LastAdmitAt  time.Time
	LastAdmitGap time.Duration
}

func (p Program) current() Segment {
	return Segment{Base: p.Base, Anchor: p.Anchor, Rate: p.Rate, Paused: p.Paused}
}

func (p Program) next() Segment {
	return Segment{Base: p.NextBase, Anchor: p.NextAt, Rate: p.NextRate, Paused: p.NextPaused}
}

// Segment returns the segment in effect at t.
func (p Program) Segment(t time.Time) Segment {
	if !p.NextAt.IsZero() && !t.Before(p.NextAt) {
		return p.next()
	}
	return p.current()
}

// Settled returns the segment that holds once any scheduled change has
// taken effect: the settings an admin sees.
func (p Program) Settled() Segment {
	if !p.NextAt.IsZero() {
		return p.next()
	}
	return p.current()
}

// Pending reports whether a scheduled change has yet to take effect at now.
func (p Program) Pending(now time.Time) bool { return !p.NextAt.IsZero() && now.Before(p.NextAt) }

// StepMs is how far each ticket issued pushes DrainAtMs back: one ticket's
// time at the settled rate, 0 when admission is stopped.
func (p Program) StepMs() float64 { return p.Settled().stepMs() }

// Serving returns the serving counter at now: every ticket at or below it
// is admitted.
func (p Program) Serving(now time.Time) int64 { return min(p.Segment(now).raw(now), p.Issued) }

// Admits reports whether ticket is admitted at now. It does not depend on
// Issued, so a cached program answers it exactly for any ticket.
func (p Program) Admits(ticket int64, now time.Time) bool { return ticket <= p.Segment(now).raw(now) }

// Drained reports whether, at now, the counter has caught up with every
// ticket issued and the next ticket would find idle credit. Never while a
// change is pending: the counter is not re-anchored under instances that
// may still hold the program as it was.
func (p Program) Drained(now time.Time) bool {
	return !p.Pending(now) && p.Segment(now).Advancing() && p.DrainAtMs <= float64(now.UnixMilli())
}

// CacheableUntil is how long a program read at loadedAt may be reused: a
// ttl, but never past the drain instant, after which the counter may be
// re-anchored by the next ticket.
func (p Program) CacheableUntil(loadedAt time.Time, ttl time.Duration) time.Time {
	until := loadedAt.Add(ttl)
	if p.Segment(until).Advancing() || p.current().Advancing() {
		if d := time.UnixMilli(int64(math.Floor(p.DrainAtMs))); d.Before(until) {
			until = d
		}
	}
	return until
}

// folded returns p with a change that has taken effect by now made current.
func (p Program) folded(now time.Time) Program {
	if p.NextAt.IsZero() || now.Before(p.NextAt) {
		return p
	}
	p.Base, p.Anchor, p.Rate, p.Paused = p.NextBase, p.NextAt, p.NextRate, p.NextPaused
	p.NextAt, p.NextBase, p.NextRate, p.NextPaused = time.Time{}, 0, 0, false
	return p
}

// WithTicketIssued returns p after one more ticket is handed out at now.
// It is the rule every Store implements atomically: while the queue has
// people in it, admission is stopped or a change is pending, the ticket only
// extends DrainAt; when the queue has drained, the counter is re-anchored
// at now on the current Issued (a due change made current first), so the
// newcomer waits one ticket's time, not zero and not behind piled-up credit.
func (p Program) WithTicketIssued(now time.Time) Program {
	if p.Drained(now) {
		p = p.folded(now)
		p.Base = p.Issued
		p.Anchor = now.Truncate(time.Millisecond)
		p.DrainAtMs = float64(p.Anchor.UnixMilli())
		p.Version++
	}
	p.Issued++
	p.DrainAtMs += p.StepMs()
	return p
}

// Rebased returns p with an admin change made at now: admission continues at
// rate (or stops if paused), and admit more people are let in on top,
// never beyond the tickets issued; the counter never moves backwards.
//
// The change takes effect at now+delay, where delay is the longest any
// function instance may keep using a program it read (the program cache
// TTL), so that no instance computes a different counter than another for
// the same instant. When the queue has drained no instance may reuse its
// read (see CacheableUntil), and the change takes effect at once. A change
// still pending at now must have taken effect before another is made; the
// caller waits for it.
func (p Program) Rebased(now time.Time, rate float64, paused bool, admit int64, delay time.Duration) Program {
	now = now.Truncate(time.Millisecond)
	p = p.folded(now)
	p.Version++
	next := Segment{Rate: rate, Paused: paused}
	if delay <= 0 || p.Drained(now) {
		serving := min(p.current().raw(now), p.Issued) // credit beyond Issued is dropped
		p.Base, p.Anchor, p.Rate, p.Paused = min(serving+admit, p.Issued), now, rate, paused
		p.NextAt, p.NextBase, p.NextRate, p.NextPaused = time.Time{}, 0, 0, false
		p.DrainAtMs = drainAt(p.current(), p.Issued)
		return p
	}
	at := now.Add(delay).Truncate(time.Millisecond)
	raw := p.current().raw(at)
	next.Anchor, next.Base = at, raw
	if admit > 0 {
		next.Base = max(raw, min(raw+admit, p.Issued))
	}
	p.NextAt, p.NextBase, p.NextRate, p.NextPaused = next.Anchor, next.Base, next.Rate, next.Paused
	// The counter reaches Issued before the change, under the current
	// segment, or after it, under the next.
	if cur := p.current(); cur.Advancing() {
		if d := drainAt(cur, p.Issued); d <= float64(at.UnixMilli()) {
			p.DrainAtMs = d
			return p
		}
	}
	p.DrainAtMs = drainAt(next, p.Issued)
	return p
}

// drainAt is the Unix ms at which segment s reaches issued (its anchor if
// it already has, or if it does not advance).
func drainAt(s Segment, issued int64) float64 {
	at := float64(s.Anchor.UnixMilli())
	if s.Advancing() && issued > s.Base {
		at += float64(issued-s.Base) * s.stepMs()
	}
	return at
}

// admittedAt is the first instant at or after from at which segment s
// admits ticket, and whether it ever does.
func (s Segment) admittedAt(ticket int64, from time.Time) (time.Time, bool) {
	if s.raw(from) >= ticket {
		return from, true
	}
	if !s.Advancing() {
		return time.Time{}, false
	}
	// Solve raw(anchor+ms) >= ticket, then settle float error on the exact ms.
	ms := int64(math.Ceil(float64(ticket-s.Base)*1000/s.Rate - 1e-6))
	for s.raw(s.Anchor.Add(time.Duration(ms)*time.Millisecond)) < ticket {
		ms++
	}
	for ms > 0 && s.raw(s.Anchor.Add(time.Duration(ms-1)*time.Millisecond)) >= ticket {
		ms--
	}
	return s.Anchor.Add(time.Duration(ms) * time.Millisecond), true
}

// AdmissionTime is when ticket will be admitted if the schedule the program
// knows of (its current segment and any scheduled change) holds, and
// whether that is known at all: not while admission is stopped.
func (p Program) AdmissionTime(ticket int64, now time.Time) (time.Time, bool) {
	if p.Pending(now) {
		if at, ok := p.current().admittedAt(ticket, now); ok && at.Before(p.NextAt) {
			return at, true
		}
		return p.next().admittedAt(ticket, p.NextAt)
	}
	return p.Segment(now).admittedAt(ticket, now)
}

// maxAdmitGap is the longest gap between two manual admissions that still
// counts as one pace.
const maxAdmitGap = 10 * time.Minute

// withManualAdmission records a manual admission of n at now in the
// measured pace.
func (p Program) withManualAdmission(n int64, now time.Time) Program {
	gap := now.Sub(p.LastAdmitAt)
	switch {
	case p.LastAdmitAt.IsZero() || gap <= 0 || gap > maxAdmitGap:
		p.ManualRate, p.LastAdmitGap = 0, 0
	case p.ManualRate == 0:
		p.ManualRate, p.LastAdmitGap = float64(n)/gap.Seconds(), gap
	default:
		p.ManualRate, p.LastAdmitGap = 0.5*p.ManualRate+0.5*float64(n)/gap.Seconds(), gap
	}
	p.LastAdmitAt = now.Truncate(time.Millisecond)
	return p
}

// MeasuredRate is the pace of manual admissions at now, if they have come
// at a steady pace recently enough to predict the next: within twice the
// last gap (plus a second) of the last one.
func (p Program) MeasuredRate(now time.Time) (float64, bool) {
	if p.ManualRate <= 0 || now.Sub(p.LastAdmitAt) > 2*p.LastAdmitGap+time.Second {
		return 0, false
	}
	return p.ManualRate, true
}

// Situation is what a polling policy may know about ticket at now: its
// position, the admission rate, and the estimated wait, from the schedule
// when admission is automatic or from the measured pace when it is manual.
func (p Program) Situation(ticket int64, now time.Time) polling.Situation {
	seg := p.Segment(now)
	sit := polling.Situation{Position: ticket - seg.raw(now)}
	if seg.Advancing() {
		sit.RatePerSecond = seg.Rate
	}
	if at, ok := p.AdmissionTime(ticket, now); ok {
		sit.Wait = at.Sub(now)
	} else if r, ok := p.MeasuredRate(now); ok && sit.Position > 0 {
		sit.RatePerSecond = r
		sit.Wait = time.Duration(float64(sit.Position) / r * float64(time.Second)).Truncate(time.Millisecond)
	}
	return sit
}

// Equal reports whether p and q are the same program state, comparing
// times as instants.
func (p Program) Equal(q Program) bool {
	return p.ID == q.ID && p.CreatedAt.Equal(q.CreatedAt) && p.Version == q.Version && p.Issued == q.Issued &&
		p.Base == q.Base && p.Rate == q.Rate && p.Paused == q.Paused && p.Anchor.Equal(q.Anchor) &&
		p.NextAt.Equal(q.NextAt) && p.NextBase == q.NextBase && p.NextRate == q.NextRate && p.NextPaused == q.NextPaused &&
		p.DrainAtMs == q.DrainAtMs && p.AdmissionWindow == q.AdmissionWindow && p.Policy == q.Policy && p.Closed == q.Closed &&
		p.ManualRate == q.ManualRate && p.LastAdmitAt.Equal(q.LastAdmitAt) && p.LastAdmitGap == q.LastAdmitGap
}
