// Package polling chooses how long a waiting client sleeps before it polls again: a
// Policy turns a waiting token's Situation into a retry delay. A deployment offers three
// by name (Registry): Tiers by position, ETA from the estimated wait, Steady from the
// earliest admission (docs/design.md, "Polling policies"). A validated policy answers
// within its floor and MaxInterval (plus jitter or twice Lead); ETA's and Steady's jitter
// only shortens a delay.
package polling

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"time"
)

// Situation is what a policy may know about one waiting token when it answers.
type Situation struct {
	Position      int64         // the number of tickets ahead of the token plus one (1 = next)
	RatePerSecond float64       // the program's admission rate; 0 when unknown or paused
	Wait          time.Duration // the estimated time until admission; 0 when unknown
	// Earliest is the least time before the token could be admitted if admission never
	// runs faster than the program's configured rate; 0 when the program has no rate.
	Earliest time.Duration
	// HeldEarliest replaces Earliest when a cap on active people holds the
	// place back and Wait estimates the turnover: the least time before
	// the admission for the time to show (docs/design.md, "Capacity").
	HeldEarliest time.Duration
	Paused       bool // admission is paused, or is about to be by a scheduled change
}

// Policy chooses the delay before a waiting client's next poll; rng is the jitter source
// (nil: math/rand/v2's).
type Policy interface {
	RetryAfter(s Situation, rng *rand.Rand) time.Duration
}

// Fixed is a policy that always answers the same interval.
type Fixed time.Duration

// RetryAfter returns the fixed interval.
func (f Fixed) RetryAfter(Situation, *rand.Rand) time.Duration { return time.Duration(f) }

// String returns the policy's name as the bench CLI spells it ("fixed:3s").
func (f Fixed) String() string { return "fixed:" + time.Duration(f).String() }

// Tier is one band of a Tiers policy.
type Tier struct {
	MaxPosition int64         // the largest position the tier covers; 0 (last tier only): no limit
	Interval    time.Duration // the centre of the delay
	Jitter      time.Duration // the half-width of the uniform jitter around Interval
}

// Tiers is a policy of position bands, each with uniform jitter, ordered by MaxPosition,
// the last one unbounded. Validate it (or build it with ParseTiers) before use.
type Tiers []Tier

// DefaultTiers returns the default bands, DefaultTiersSpec.
func DefaultTiers() Tiers {
	return Tiers{
		{MaxPosition: 100, Interval: time.Second},
		{MaxPosition: 1000, Interval: 5 * time.Second, Jitter: 300 * time.Millisecond},
		{MaxPosition: 10000, Interval: 15 * time.Second, Jitter: 500 * time.Millisecond},
		{MaxPosition: 0, Interval: 30 * time.Second, Jitter: 4 * time.Second},
	}
}

// Tier returns the band that covers position (the first below 1).
func (ts Tiers) Tier(position int64) Tier {
	for _, t := range ts {
		if t.MaxPosition == 0 || position <= t.MaxPosition {
			return t
		}
	}
	return ts[len(ts)-1]
}

// RetryAfter returns the tier's interval plus its Jitter.
func (ts Tiers) RetryAfter(s Situation, rng *rand.Rand) time.Duration {
	t := ts.Tier(s.Position)
	return t.Interval + Jitter(t.Jitter, rng)
}

// Jitter returns a uniform whole number of milliseconds in [-j, +j], drawn from rng.
func Jitter(j time.Duration, rng *rand.Rand) time.Duration {
	ms := max(j, 0).Truncate(time.Millisecond)
	return uniform(2*ms, rng) - ms
}

// String returns the policy's name as the bench CLI spells it.
func (ts Tiers) String() string { return NameTiers }

// Names of the policies a deployment offers (POLL_POLICY, a program's pollingPolicy).
const (
	NameTiers  = "tiers"
	NameETA    = "eta"
	NameSteady = "steady"
	// DefaultName is the policy of programs that choose none, unless POLL_POLICY says otherwise.
	DefaultName = NameTiers
)

// Registry is the set of policies a deployment offers, by name.
type Registry map[string]Policy

// Named returns the registry of tiers, eta and steady, each the fallback of the next.
func Named(tiers Tiers, eta ETA, steady Steady) Registry {
	eta.Fallback = tiers
	steady.Fallback = eta
	return Registry{NameTiers: tiers, NameETA: eta, NameSteady: steady}
}

// Names returns the registry's names, sorted.
func (r Registry) Names() []string { return slices.Sorted(maps.Keys(r)) }

// Lookup returns the policy called name (DefaultName for ""), or an error listing the names.
func (r Registry) Lookup(name string) (Policy, error) {
	if name == "" {
		name = DefaultName
	}
	if p, ok := r[name]; ok {
		return p, nil
	}
	return nil, fmt.Errorf("%q is not one of %s", name, strings.Join(r.Names(), ", "))
}
