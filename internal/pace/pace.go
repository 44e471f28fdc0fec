// Package pace is the exact arithmetic of a program's serving counter: an
// admission Rate, the Segment along which the counter grows, and the
// saturating integer operations and Unix-millisecond instants every
// package of the domain computes with (docs/design.md, "The admission
// model").
//
// Invariants:
//   - Everything is integer arithmetic on whole milliseconds and
//     thousandths of a person a second, in 128 bits where a product can
//     pass 64 (MulDiv): every instance computes the same counter from the
//     same segment, without rounding drift.
//   - Results beyond int64 saturate at math.MaxInt64 (AddSat, MulSat,
//     MulDiv), so a slow rate behind millions of tickets gives a far
//     instant, never a wrapped one.
//   - A Segment's Counter never decreases with time, and AdmittedAt is the
//     first instant at which it reaches a ticket.
//   - DrainAtNs rounds up: it is at or before an instant exactly when the
//     counter has reached the tickets issued by then, never early.
package pace

import (
	"math"
	"strconv"
)

// The range of an admission rate, in people per second; MinAdmissionRate
// is also the Rate unit.
const (
	MaxAdmissionRate = 100_000.0
	MinAdmissionRate = 0.001 // one person in about 17 minutes
)

// Rate is an admission rate in thousandths of a person per second: 1 is
// 0.001/s, OnePerSecond is 1/s.
type Rate int64

// OnePerSecond is the Rate of one person per second.
const OnePerSecond Rate = 1000

// NewRate returns perSecond as a Rate, false unless 0 or in range in whole
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
// or a later StartMs, it grows from Base at Rate, unless Paused.
type Segment struct {
	AnchorMs int64
	Base     int64
	Rate     Rate
	Paused   bool
	StartMs  int64 // the program's opening, when after AnchorMs
}

// origin is the instant the counter starts to grow from Base.
func (s Segment) origin() int64 { return max(s.AnchorMs, s.StartMs) }

// Advancing reports whether the counter grows by itself in this segment.
func (s Segment) Advancing() bool { return !s.Paused && s.Rate > 0 }

// Counter returns the serving counter at Unix ms t, not capped by the
// tickets issued: Base + ⌊Rate × (t − origin)⌋.
func (s Segment) Counter(t int64) int64 {
	o := s.origin()
	if !s.Advancing() || t <= o {
		return s.Base
	}
	// ms × thousandths per second / 10⁶ = people.
	n, _ := MulDiv(uint64(t)-uint64(o), uint64(s.Rate), 1e6, false)
	return AddSat(s.Base, n)
}

// AdmittedAt returns the first Unix ms at or after from at which the
// counter reaches ticket, false if it never does.
func (s Segment) AdmittedAt(ticket, from int64) (int64, bool) {
	if s.Counter(from) >= ticket {
		return from, true
	}
	if !s.Advancing() {
		return 0, false
	}
	// Counter(t) ≥ ticket ⟺ (t − origin) × Rate ≥ (ticket − Base) × 10⁶.
	d, _ := MulDiv(uint64(ticket)-uint64(s.Base), 1e6, uint64(s.Rate), true)
	return max(AddSat(s.origin(), d), from), true
}

// StepNs is one ticket's time in nanoseconds, rounded up; 0 when the
// segment does not advance.
func (s Segment) StepNs() int64 {
	if !s.Advancing() {
		return 0
	}
	n, _ := MulDiv(1, 1e12, uint64(s.Rate), true)
	return n
}

// DrainAtNs returns the Unix ns, rounded up, at which the counter reaches
// issued (its origin if it has, or does not advance).
func (s Segment) DrainAtNs(issued int64) int64 {
	at := MsToNs(s.origin())
	if !s.Advancing() || issued <= s.Base {
		return at
	}
	d, _ := MulDiv(uint64(issued)-uint64(s.Base), 1e12, uint64(s.Rate), true)
	return AddSat(at, d)
}
