package polling

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"
)

// ETA is the rate-aware policy: while the estimated wait exceeds Direct it
// answers Fraction of the wait, shortened by jitter and kept within Floor and
// Cap; a shorter wait is slept through to Lead plus up to Lead after it.
// Without an estimate (Situation.Wait 0) it answers Fallback's delay, or
// DefaultTiers' when Fallback is nil.
type ETA struct {
	Fraction float64       // of the wait slept while the wait exceeds Direct, in (0, 1]
	Floor    time.Duration // shortest delay
	Cap      time.Duration // longest delay: bounds how late a surprise speed-up is heard
	Direct   time.Duration // waits up to this are slept through in one go
	Lead     time.Duration // margin after the expected admission, plus up to Lead of jitter
	Jitter   float64       // relative jitter of early polls: they are shortened by up to 2×Jitter
	Fallback Policy
}

// DefaultETA is the rate-aware policy with the parameters measured in
// docs/benchmarks.md, falling back to DefaultTiers.
func DefaultETA() ETA {
	return ETA{
		Fraction: 0.65,
		Floor:    time.Second,
		Cap:      10 * time.Minute,
		Direct:   40 * time.Second,
		Lead:     100 * time.Millisecond,
		Jitter:   0.05,
		Fallback: DefaultTiers(),
	}
}

// RetryAfter implements Policy.
func (e ETA) RetryAfter(s Situation, rng *rand.Rand) time.Duration {
	if s.Wait <= 0 {
		if e.Fallback == nil {
			return DefaultTiers().RetryAfter(s, rng)
		}
		return e.Fallback.RetryAfter(s, rng)
	}
	if s.Wait <= e.Direct {
		d := s.Wait + e.Lead + uniform(e.Lead, rng)
		return max(d, e.Floor)
	}
	d := min(max(time.Duration(float64(s.Wait)*e.Fraction), e.Floor), e.Cap)
	// Jitter only shortens: a client never sleeps past the cap or past its
	// share of the wait, and the many clients at the cap do not return in
	// the same second.
	if e.Jitter > 0 {
		d -= uniform(time.Duration(2*e.Jitter*float64(d)), rng)
	}
	return max(min(d, s.Wait), e.Floor).Truncate(time.Millisecond)
}

// uniform returns a uniform duration in [0, max] at millisecond resolution.
func uniform(max time.Duration, rng *rand.Rand) time.Duration {
	ms := max.Milliseconds()
	if ms <= 0 {
		return 0
	}
	if rng == nil {
		return time.Duration(rand.Int64N(ms+1)) * time.Millisecond
	}
	return time.Duration(rng.Int64N(ms+1)) * time.Millisecond
}

// String returns the policy's name as the bench CLI and POLL_POLICY spell it.
func (e ETA) String() string { return NameETA }

// Validate reports whether the parameters make a usable policy.
func (e ETA) Validate() error {
	switch {
	case e.Fraction <= 0 || e.Fraction > 1:
		return fmt.Errorf("eta: fraction %g outside (0, 1]", e.Fraction)
	case e.Floor < MinInterval || e.Floor > e.Cap:
		return fmt.Errorf("eta: floor %s must be at least %s and at most the cap", e.Floor, MinInterval)
	case e.Cap > MaxInterval:
		return fmt.Errorf("eta: cap %s above %s", e.Cap, MaxInterval)
	case e.Direct < 0 || e.Direct > e.Cap:
		return fmt.Errorf("eta: direct %s must be within [0, cap]", e.Direct)
	case e.Lead < 0 || e.Lead > 5*time.Second:
		return fmt.Errorf("eta: lead %s outside [0s, 5s]", e.Lead)
	case e.Jitter < 0 || e.Jitter >= 0.5:
		return fmt.Errorf("eta: jitter %g outside [0, 0.5)", e.Jitter)
	}
	return nil
}

// ParseETA reads ETA parameters as comma-separated key=value pairs over
// DefaultETA, e.g. "fraction=0.8,cap=2m,direct=10s"; "" gives the default.
// Keys: fraction, floor, cap, direct, lead, jitter.
func ParseETA(spec string) (ETA, error) {
	e := DefaultETA()
	for kv := range strings.SplitSeq(spec, ",") {
		kv = strings.TrimSpace(kv)
		if kv == "" {
			continue
		}
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return ETA{}, fmt.Errorf("eta: %q: want key=value", kv)
		}
		var err error
		switch k = strings.TrimSpace(k); k {
		case "fraction":
			e.Fraction, err = strconv.ParseFloat(v, 64)
		case "jitter":
			e.Jitter, err = strconv.ParseFloat(v, 64)
		case "floor":
			e.Floor, err = time.ParseDuration(v)
		case "cap":
			e.Cap, err = time.ParseDuration(v)
		case "direct":
			e.Direct, err = time.ParseDuration(v)
		case "lead":
			e.Lead, err = time.ParseDuration(v)
		default:
			return ETA{}, fmt.Errorf("eta: unknown parameter %q (fraction, floor, cap, direct, lead, jitter)", k)
		}
		if err != nil {
			return ETA{}, fmt.Errorf("eta: %s: %w", k, err)
		}
	}
	return e, e.Validate()
}
