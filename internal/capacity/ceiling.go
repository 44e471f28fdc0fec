package capacity

import "github.com/example/waitingroom/internal/pace"

// Ceiling bounds a capped program's serving counter: the cap + the slots
// freed by t − those bypass passes hold at t (no cap: no ceiling).
type Ceiling struct {
	// Cap is maxActiveUsers less the raises made since admission started,
	// which the folds free as slots (Program.CapRaised).
	Cap int64
	// Capacity holds the slots freed, as the folds wrote them.
	Capacity Capacity
	// Reserved are the slots bypass passes hold (Reserve).
	Reserved []Reservation
}

// At is the ceiling at Unix ms, and false without a cap.
func (l Ceiling) At(ms int64) (int64, bool) {
	if l.Cap <= 0 {
		return 0, false
	}
	return max(pace.AddSat(l.Cap, l.Capacity.FreedAt(ms))-l.ReservedAt(ms), 0), true
}

// ReservedAt is how many slots bypass passes hold at Unix ms.
func (l Ceiling) ReservedAt(ms int64) int64 {
	n := int64(0)
	for _, r := range l.Reserved {
		n = pace.AddSat(n, r.HeldAt(ms))
	}
	return n
}

// AdmitsMs is the first Unix ms at or after at at which the ceiling lets
// place in, from the steps written then the ReleaseRate; false if unknown.
func (l Ceiling) AdmitsMs(place, at int64) (int64, bool) {
	// The slots bypass passes hold count as if held to the end.
	need := pace.AddSat(place-l.Cap, l.ReservedAt(at))
	if l.Cap <= 0 || need <= 0 {
		return at, true
	}
	c := l.Capacity
	if reach, ok := c.ReachMs(need, at); ok {
		return reach, true
	}
	if c.ReleaseRate <= 0 {
		return 0, false
	}
	// Past the steps written: the last one's target, then the pace.
	from, level := at, c.FreedAt(at)
	if n := len(c.Steps); n > 0 {
		last := c.Steps[n-1]
		if end, ok := c.ReachMs(last.Freed, at); ok {
			from, level = end, max(level, last.Freed)
		}
	}
	d, _ := pace.MulDiv(uint64(need-level), 1e6, uint64(c.ReleaseRate), true)
	return pace.AddSat(from, d), true
}

// EarliestMs is a lower bound, seen at ms, on when the ceiling could let
// place in (false without a cap, or when it does already).
func (l Ceiling) EarliestMs(place, ms, notice, round int64) (int64, bool) {
	at, ok := l.At(ms)
	if !ok || place <= at {
		return 0, false
	}
	c := l.Capacity
	from := max(ms+notice, ms)
	need := place - pace.AddSat(l.Cap, c.FreedAt(from))
	if need <= 0 {
		reach, _ := c.ReachMs(place-l.Cap, ms)
		return reach, true
	}
	rounds := (need + l.Cap - 1) / l.Cap
	earliest := pace.AddSat(from, pace.MulSat(rounds-1, round))
	if reach, ok := c.ReachMs(place-l.Cap, from); ok {
		earliest = min(earliest, reach)
	}
	return earliest, true
}

// TurnoverMs is a lower bound, seen at ms, on when the ceiling could let
// place in under the turnover bound: the steps written, a burst of the
// budget and the BoundRate from ms on (false without a cap or a bound).
func (l Ceiling) TurnoverMs(place, ms int64) (int64, bool) {
	c := l.Capacity
	if l.Cap <= 0 || c.BoundRate <= 0 {
		return 0, false
	}
	top := c.Level
	if n := len(c.Steps); n > 0 {
		top = max(top, c.Steps[n-1].Freed)
	}
	over := place - pace.AddSat(l.Cap, top)
	if over <= 0 {
		return ms, true
	}
	need := pace.MulSat(over, 1000) - burstOf(c.BoundRate) // in thousandths of a slot, as the budget counts
	if need <= 0 {
		return ms, true
	}
	d, _ := pace.MulDiv(uint64(need), 1e3, uint64(c.BoundRate), false)
	return pace.AddSat(ms, d), true
}

// maxReservations bounds the bypass reservations a program keeps.
const maxReservations = 8

// Reservation is N slots of the ceiling held by bypass passes from FromMs
// to UntilMs (Unix ms), then freed at Rate.
type Reservation struct {
	FromMs  int64     `dynamodbav:"from"`
	UntilMs int64     `dynamodbav:"until"`
	N       int64     `dynamodbav:"n"`
	Rate    pace.Rate `dynamodbav:"rate"`
}

// HeldAt is how many of r's slots are held at Unix ms.
func (r Reservation) HeldAt(ms int64) int64 {
	switch {
	case ms < r.FromMs:
		return 0
	case ms < r.UntilMs:
		return r.N
	case r.Rate <= 0:
		return 0
	}
	return max(r.N-releasedBy(r.UntilMs, ms, r.Rate), 0)
}

// Reserve returns rs, less those over at ms, with r added, or merged into
// the one ending nearest it when rs is full.
func Reserve(rs []Reservation, r Reservation, ms int64) []Reservation {
	kept := make([]Reservation, 0, len(rs)+1)
	for _, x := range rs {
		if ms < x.UntilMs || x.HeldAt(ms) > 0 {
			kept = append(kept, x)
		}
	}
	if len(kept) < maxReservations {
		return append(kept, r)
	}
	near, dist := 0, func(x Reservation) int64 { return max(x.UntilMs, r.UntilMs) - min(x.UntilMs, r.UntilMs) }
	for i, x := range kept {
		if dist(x) < dist(kept[near]) {
			near = i
		}
	}
	x := &kept[near]
	x.FromMs, x.UntilMs, x.N = min(x.FromMs, r.FromMs), max(x.UntilMs, r.UntilMs), pace.AddSat(x.N, r.N)
	if x.Rate <= 0 || r.Rate > 0 && r.Rate < x.Rate {
		x.Rate = r.Rate // the slower release; 0 (all at once) only if both are
	}
	return kept
}
