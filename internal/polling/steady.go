package polling

import (
	"math/rand/v2"
	"time"
)

// Steady polls at the earliest admission (Situation.Earliest), once before it when the
// wait is over Direct, within Cap (Hold while paused); Fallback (DefaultETA when nil) without a rate.
type Steady struct {
	Floor    time.Duration // shortest delay
	Cap      time.Duration // longest delay while admission runs
	Hold     time.Duration // longest delay while paused
	Direct   time.Duration // waits up to this are slept through in one go
	Lead     time.Duration // margin after the expected admission, plus up to Lead of jitter
	Jitter   float64       // relative jitter of capped polls: shortened by up to 2×Jitter
	Fallback Policy
}

// DefaultSteady is the steady policy with the parameters of docs/benchmarks.md.
func DefaultSteady() Steady {
	return Steady{
		Floor:    time.Second,
		Cap:      MaxInterval,
		Hold:     time.Minute,
		Direct:   40 * time.Second,
		Lead:     100 * time.Millisecond,
		Jitter:   0.05,
		Fallback: DefaultETA(),
	}
}

// RetryAfter implements Policy.
func (p Steady) RetryAfter(s Situation, rng *rand.Rand) time.Duration {
	switch {
	case s.Earliest <= 0 && p.Fallback == nil:
		return DefaultETA().RetryAfter(s, rng)
	case s.Earliest <= 0:
		return p.Fallback.RetryAfter(s, rng)
	}
	w := soonest(s)
	switch {
	case s.Paused && w > p.Hold:
		return max(lessJitter(p.Hold, p.Jitter, rng), p.Floor).Truncate(time.Millisecond)
	case s.Paused:
		return max(w, p.Floor)
	case w <= p.Direct:
		return max(w+p.Lead+uniform(p.Lead, rng), p.Floor)
	}
	// One early poll, when between Direct/2 and Direct are left.
	d := w - p.Direct + uniform(p.Direct/2, rng)
	if d > p.Cap {
		return max(lessJitter(p.Cap, p.Jitter, rng), p.Floor).Truncate(time.Millisecond)
	}
	return max(d, p.Floor)
}

// String returns the policy's name as the bench CLI and POLL_POLICY spell it.
func (p Steady) String() string { return NameSteady }

// Validate reports whether the parameters make a usable policy.
func (p Steady) Validate() error {
	return validTiming(NameSteady, p.Floor, p.Cap, p.Hold, p.Direct, p.Lead, p.Jitter)
}

// ParseSteady reads Steady's parameters (floor, cap, hold, direct, lead, jitter) as
// comma-separated key=value pairs over DefaultSteady, e.g. "hold=30s,cap=10m".
func ParseSteady(spec string) (Steady, error) {
	p := DefaultSteady()
	err := setParams(NameSteady, spec, map[string]any{
		"floor": &p.Floor, "cap": &p.Cap, "hold": &p.Hold,
		"direct": &p.Direct, "lead": &p.Lead, "jitter": &p.Jitter,
	})
	if err != nil {
		return Steady{}, err
	}
	return p, p.Validate()
}
