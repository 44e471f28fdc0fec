package polling

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"
)

// ETA is the rate-aware policy: Fraction of a wait longer than Direct, within Floor and
// Cap, or through a shorter one; Fallback (DefaultTiers when nil) without an estimate.
type ETA struct {
	Fraction float64       // of the wait slept while the wait exceeds Direct, in (0, 1]
	Floor    time.Duration // shortest delay
	Cap      time.Duration // longest delay: bounds how late a surprise speed-up is heard
	Direct   time.Duration // waits up to this are slept through in one go
	Lead     time.Duration // margin after the expected admission, plus up to Lead of jitter
	Jitter   float64       // relative jitter of early polls: they are shortened by up to 2×Jitter
	Hold     time.Duration // longest delay while a program with a rate is paused
	Fallback Policy
}

// DefaultETA is the rate-aware policy with the parameters of docs/benchmarks.md.
func DefaultETA() ETA {
	return ETA{
		Fraction: 0.65,
		Floor:    time.Second,
		Cap:      10 * time.Minute,
		Direct:   40 * time.Second,
		Lead:     100 * time.Millisecond,
		Jitter:   0.05,
		Hold:     34 * time.Second,
		Fallback: DefaultTiers(),
	}
}

// RetryAfter implements Policy: the sooner of Wait and Earliest decides (within Hold while paused).
func (e ETA) RetryAfter(s Situation, rng *rand.Rand) time.Duration {
	w := soonest(s)
	switch {
	case w <= 0 && e.Fallback == nil:
		return DefaultTiers().RetryAfter(s, rng)
	case w <= 0:
		return e.Fallback.RetryAfter(s, rng)
	case s.Paused && s.Earliest > 0:
		return e.share(w, e.Hold, rng)
	}
	return e.fromWait(w, rng)
}

// soonest is the sooner of s.Wait and s.Earliest that is known, 0 if neither.
func soonest(s Situation) time.Duration {
	if s.Earliest > 0 && (s.Wait <= 0 || s.Earliest < s.Wait) {
		return s.Earliest
	}
	return s.Wait
}

// fromWait is the delay for an estimated wait w.
func (e ETA) fromWait(w time.Duration, rng *rand.Rand) time.Duration {
	if w <= e.Direct {
		return max(w+e.Lead+uniform(e.Lead, rng), e.Floor)
	}
	return e.share(w, e.Cap, rng)
}

// share is Fraction of w within [Floor, limit], shortened by jitter.
func (e ETA) share(w, limit time.Duration, rng *rand.Rand) time.Duration {
	d := min(max(time.Duration(float64(w)*e.Fraction), e.Floor), limit)
	return max(min(lessJitter(d, e.Jitter, rng), w), e.Floor).Truncate(time.Millisecond)
}

// lessJitter is d less up to 2×jitter of it, drawn from rng.
func lessJitter(d time.Duration, jitter float64, rng *rand.Rand) time.Duration {
	if jitter <= 0 {
		return d
	}
	return d - uniform(time.Duration(2*jitter*float64(d)), rng)
}

// uniform returns a uniform duration in [0, max] at millisecond resolution.
func uniform(max time.Duration, rng *rand.Rand) time.Duration {
	ms := max.Milliseconds()
	if ms <= 0 {
		return 0
	}
	n := rand.Int64N
	if rng != nil {
		n = rng.Int64N
	}
	return time.Duration(n(ms+1)) * time.Millisecond
}

// String returns the policy's name as the bench CLI and POLL_POLICY spell it.
func (e ETA) String() string { return NameETA }

// Validate reports whether the parameters make a usable policy.
func (e ETA) Validate() error {
	if e.Fraction <= 0 || e.Fraction > 1 {
		return fmt.Errorf("eta: fraction %g outside (0, 1]", e.Fraction)
	}
	return validTiming(NameETA, e.Floor, e.Cap, e.Hold, e.Direct, e.Lead, e.Jitter)
}

// validTiming checks the delays eta and steady share.
func validTiming(policy string, floor, cap, hold, direct, lead time.Duration, jitter float64) error {
	switch {
	case floor < MinInterval || floor > cap:
		return fmt.Errorf("%s: floor %s must be at least %s and at most the cap", policy, floor, MinInterval)
	case cap > MaxInterval || hold > MaxInterval:
		return fmt.Errorf("%s: cap %s and hold %s must be at most %s", policy, cap, hold, MaxInterval)
	case hold < floor:
		return fmt.Errorf("%s: hold %s below the floor %s", policy, hold, floor)
	case direct < 0 || direct > cap:
		return fmt.Errorf("%s: direct %s must be within [0, cap]", policy, direct)
	case lead < 0 || lead > 5*time.Second:
		return fmt.Errorf("%s: lead %s outside [0s, 5s]", policy, lead)
	case jitter < 0 || jitter >= 0.5:
		return fmt.Errorf("%s: jitter %g outside [0, 0.5)", policy, jitter)
	}
	return nil
}

// ParseETA reads ETA's parameters (fraction, floor, cap, direct, lead, jitter, hold) as
// comma-separated key=value pairs over DefaultETA, e.g. "fraction=0.8,cap=2m".
func ParseETA(spec string) (ETA, error) {
	e := DefaultETA()
	err := setParams(NameETA, spec, map[string]any{
		"fraction": &e.Fraction, "floor": &e.Floor, "cap": &e.Cap, "direct": &e.Direct,
		"lead": &e.Lead, "jitter": &e.Jitter, "hold": &e.Hold,
	})
	if err != nil {
		return ETA{}, err
	}
	return e, e.Validate()
}

// setParams sets fields (*float64 or *time.Duration, by key) from spec's key=value pairs.
func setParams(policy, spec string, fields map[string]any) error {
	for kv := range strings.SplitSeq(spec, ",") {
		kv = strings.TrimSpace(kv)
		if kv == "" {
			continue
		}
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return fmt.Errorf("%s: %q: want key=value", policy, kv)
		}
		k = strings.TrimSpace(k)
		var err error
		switch f := fields[k].(type) {
		case *float64:
			*f, err = strconv.ParseFloat(v, 64)
		case *time.Duration:
			*f, err = time.ParseDuration(v)
		default:
			return fmt.Errorf("%s: unknown parameter %q (%s)", policy, k, strings.Join(slices.Sorted(maps.Keys(fields)), ", "))
		}
		if err != nil {
			return fmt.Errorf("%s: %s: %w", policy, k, err)
		}
	}
	return nil
}
