package queue

import (
	"math"
	"math/bits"
	"strconv"
	"time"
)

// Rate is an admission rate in thousandths of a person per second: 1 is
// 0.001/s, OnePerSecond is 1/s.
type Rate int64

// OnePerSecond is the Rate of one person per second.
const OnePerSecond Rate = 1000

// NewRate returns perSecond people per second as a Rate, and false unless
// it is 0 or between MinAdmissionRate and MaxAdmissionRate in whole
// thousandths (0.0015 is refused, not rounded).
func NewRate(perSecond float64) (Rate, bool) {
	if math.IsNaN(perSecond) || perSecond < 0 || perSecond > MaxAdmissionRate || perSecond > 0 && perSecond < MinAdmissionRate {
		return 0, false
	}
	m := math.Round(perSecond * 1000)
	if m/1000 != perSecond {
		return 0, false
	}
	return Rate(m), true
}

// PerSecond returns r in people per second.
func (r Rate) PerSecond() float64 { return float64(r) / 1000 }

// String returns r as people per second ("2.5/s").
func (r Rate) String() string { return strconv.FormatFloat(r.PerSecond(), 'f', -1, 64) + "/s" }

// Segment is one stretch of the serving counter: from AnchorMs (Unix ms),
// or from StartMs if later (a scheduled opening), it grows from Base at
// Rate, unless Paused. All its arithmetic is exact integer arithmetic;
// results beyond int64 saturate at math.MaxInt64.
type Segment struct {
	AnchorMs int64
	Base     int64
	Rate     Rate
	Paused   bool
	// StartMs, when after AnchorMs, holds the counter at Base until then:
	// the program's opening (Program.OpensAt).
	StartMs int64
}

// origin is the instant the counter starts to grow from Base.
func (s Segment) origin() int64 { return max(s.AnchorMs, s.StartMs) }

// Advancing reports whether the counter grows by itself in this segment.
func (s Segment) Advancing() bool { return !s.Paused && s.Rate > 0 }

// Counter returns the serving counter at Unix ms t, not capped by the
// tickets issued: Base + ⌊Rate × (t − origin)⌋, the origin being AnchorMs
// or a later StartMs.
func (s Segment) Counter(t int64) int64 {
	o := s.origin()
	if !s.Advancing() || t <= o {
		return s.Base
	}
	// ms × thousandths per second / 10⁶ = people.
	n, _ := mulDiv(uint64(t)-uint64(o), uint64(s.Rate), 1e6, false)
	return addSat(s.Base, n)
}

// AdmittedAt returns the first Unix ms at or after from at which the
// counter reaches ticket, and false if it never does (the segment does not
// advance). An instant beyond int64 is math.MaxInt64.
func (s Segment) AdmittedAt(ticket, from int64) (int64, bool) {
	if s.Counter(from) >= ticket {
		return from, true
	}
	if !s.Advancing() {
		return 0, false
	}
	// Counter(t) ≥ ticket ⟺ (t − origin) × Rate ≥ (ticket − Base) × 10⁶.
	d, _ := mulDiv(uint64(ticket)-uint64(s.Base), 1e6, uint64(s.Rate), true)
	return max(addSat(s.origin(), d), from), true
}

// StepNs is one ticket's time in nanoseconds, rounded up: how far each
// ticket pushes the drain instant back; 0 when the segment does not
// advance.
func (s Segment) StepNs() int64 {
	if !s.Advancing() {
		return 0
	}
	n, _ := mulDiv(1, 1e12, uint64(s.Rate), true)
	return n
}

// DrainAtNs returns the Unix ns, rounded up, at which the counter reaches
// issued (its origin if it has already, or if the segment does not
// advance), so that it is at or before now exactly when Counter(now) ≥
// issued.
func (s Segment) DrainAtNs(issued int64) int64 {
	at := msToNs(s.origin())
	if !s.Advancing() || issued <= s.Base {
		return at
	}
	d, _ := mulDiv(uint64(issued)-uint64(s.Base), 1e12, uint64(s.Rate), true)
	return addSat(at, d)
}

// MaxEstimatedWait caps an estimated wait: a wait beyond it (a slow rate
// behind millions of tickets) is reported as MaxEstimatedWait.
const MaxEstimatedWait = 100 * 365 * 24 * time.Hour

// waitOf is ms milliseconds as a wait, capped at MaxEstimatedWait.
func waitOf(ms int64) time.Duration {
	if ms >= MaxEstimatedWait.Milliseconds() {
		return MaxEstimatedWait
	}
	return time.Duration(max(ms, 0)) * time.Millisecond
}

// mulDiv returns a×b/c rounded down (or up), and false, with
// math.MaxInt64, when that exceeds int64. c must not be 0.
func mulDiv(a, b, c uint64, up bool) (int64, bool) {
	hi, lo := bits.Mul64(a, b)
	if up {
		var carry uint64
		lo, carry = bits.Add64(lo, c-1, 0)
		hi += carry
	}
	if hi >= c {
		return math.MaxInt64, false
	}
	q, _ := bits.Div64(hi, lo, c)
	if q > math.MaxInt64 {
		return math.MaxInt64, false
	}
	return int64(q), true
}

// MulSat returns a×b for a, b ≥ 0, saturating at math.MaxInt64.
func MulSat(a, b int64) int64 {
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	if hi != 0 || lo > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(lo)
}

// addSat returns a+b for b ≥ 0, saturating at math.MaxInt64.
func addSat(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

const nsPerMs = int64(time.Millisecond)

// msToNs returns ms in nanoseconds, saturating at the int64 bounds.
func msToNs(ms int64) int64 {
	switch {
	case ms > math.MaxInt64/nsPerMs:
		return math.MaxInt64
	case ms < math.MinInt64/nsPerMs:
		return math.MinInt64
	}
	return ms * nsPerMs
}

// nsToMs returns ns in milliseconds, rounded down.
func nsToMs(ns int64) int64 {
	ms := ns / nsPerMs
	if ns%nsPerMs < 0 {
		ms--
	}
	return ms
}

// UnixMs is t in Unix milliseconds, rounded down; the zero time is 0, as
// the store writes an absent time.
func UnixMs(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

// FromUnixMs is the inverse of UnixMs, in UTC: 0 is the zero time.
func FromUnixMs(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms).UTC()
}
