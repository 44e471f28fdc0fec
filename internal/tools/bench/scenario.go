// Package bench holds what the bench's load test (loadtest) and simulator
// (simulate) share: the Scenario and its Crowd, the policies by name, the
// Result of a run, the cost model and the reports (table, JSON, Markdown).
package bench

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/example/waitingroom/internal/admission"
	"github.com/example/waitingroom/internal/pace"
)

// Arrival says when each virtual user enters: user i of n at i×Over/n, or
// everyone at the start (a burst) when Over is zero.
type Arrival struct{ Over time.Duration }

// ParseArrival reads "burst" or "uniform:DUR" (e.g. uniform:60s).
func ParseArrival(s string) (Arrival, error) {
	s = strings.TrimSpace(s)
	if s == "burst" {
		return Arrival{}, nil
	}
	if rest, ok := strings.CutPrefix(s, "uniform:"); ok {
		d, err := time.ParseDuration(rest)
		if err != nil || d <= 0 {
			return Arrival{}, fmt.Errorf("arrival %q: want uniform:DURATION with a positive duration (uniform:60s)", s)
		}
		return Arrival{Over: d}, nil
	}
	return Arrival{}, fmt.Errorf("arrival %q: want burst or uniform:DURATION", s)
}

// At returns when user i of n arrives, from the start of the run.
func (a Arrival) At(i, n int) time.Duration {
	if a.Over <= 0 || n <= 0 {
		return 0
	}
	return time.Duration(int64(a.Over) / int64(n) * int64(i))
}

// String returns the arrival as ParseArrival reads it.
func (a Arrival) String() string {
	if a.Over <= 0 {
		return "burst"
	}
	return "uniform:" + shortDuration(a.Over)
}

// shortDuration writes whole seconds as "60s" rather than "1m0s".
func shortDuration(d time.Duration) string {
	if d%time.Second == 0 {
		return strconv.FormatInt(int64(d/time.Second), 10) + "s"
	}
	return d.String()
}

// RateChange sets the program's admission rate from an offset of the run
// on; a rate of 0 pauses admission, and Paused pauses it with Rate set.
type RateChange struct {
	At     time.Duration
	Rate   float64
	Paused bool
}

// Schedule is the admission rate over a run: changes in ascending At, the
// first at 0 (the program's setting when the run starts).
type Schedule []RateChange

// ConstantRate returns the schedule of a rate that never changes.
func ConstantRate(rate float64) Schedule { return Schedule{{At: 0, Rate: rate}} }

// PausedFor returns the schedule of a program made with rate and paused,
// and resumed d later.
func PausedFor(rate float64, d time.Duration) Schedule {
	return Schedule{{At: 0, Rate: rate, Paused: true}, {At: d, Rate: rate}}
}

// ParseSchedule reads and validates comma-separated OFFSET:RATE changes,
// e.g. "0s:200,120s:100,240s:0", or OFFSET:RATE:paused.
func ParseSchedule(spec string) (Schedule, error) {
	var s Schedule
	for item := range strings.SplitSeq(spec, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		at, rate, ok := strings.Cut(item, ":")
		if !ok {
			return nil, fmt.Errorf("rate schedule %q: want OFFSET:RATE (120s:100) or OFFSET:RATE:paused", item)
		}
		rate, flag, paused := strings.Cut(rate, ":")
		if paused && strings.TrimSpace(flag) != "paused" {
			return nil, fmt.Errorf("rate schedule %q: %q: want OFFSET:RATE:paused", item, flag)
		}
		d, err := time.ParseDuration(strings.TrimSpace(at))
		if err != nil || d < 0 {
			return nil, fmt.Errorf("rate schedule %q: offset %q is not a duration (120s)", item, at)
		}
		r, err := strconv.ParseFloat(strings.TrimSpace(rate), 64)
		if _, ok := pace.NewRate(r); err != nil || !ok {
			return nil, fmt.Errorf("rate schedule %q: rate %q: want 0 (paused) or %g to %g people per second, in steps of %g", item, rate, pace.MinAdmissionRate, pace.MaxAdmissionRate, pace.MinAdmissionRate)
		}
		s = append(s, RateChange{At: d, Rate: r, Paused: paused})
	}
	return s, s.Validate()
}

// Validate reports whether s can drive a run.
func (s Schedule) Validate() error {
	switch {
	case len(s) == 0:
		return errors.New("rate schedule: empty")
	case s[0].At != 0:
		return errors.New("rate schedule: the first change must be at 0")
	}
	for i, c := range s {
		if _, ok := pace.NewRate(c.Rate); !ok {
			return fmt.Errorf("rate schedule: change %d: rate %g is not 0 or %g to %g people per second, in steps of %g", i+1, c.Rate, pace.MinAdmissionRate, pace.MaxAdmissionRate, pace.MinAdmissionRate)
		}
		if i > 0 && c.At <= s[i-1].At {
			return fmt.Errorf("rate schedule: change %d: offsets must ascend", i+1)
		}
	}
	return nil
}

// Final returns the rate in force after the last change: 0 when paused.
func (s Schedule) Final() float64 {
	if c := s[len(s)-1]; !c.Paused {
		return c.Rate
	}
	return 0
}

// String returns a constant rate as "10/s", any other schedule as
// ParseSchedule reads it ("0s:200,120s:100", "0s:10:paused,60s:10").
func (s Schedule) String() string {
	if len(s) == 1 && !s[0].Paused {
		return strconv.FormatFloat(s[0].Rate, 'g', -1, 64) + "/s"
	}
	parts := make([]string, len(s))
	for i, c := range s {
		parts[i] = shortDuration(c.At) + ":" + strconv.FormatFloat(c.Rate, 'g', -1, 64)
		if c.Paused {
			parts[i] += ":paused"
		}
	}
	return strings.Join(parts, ",")
}

// ApplyChange returns p with change c made at now, as the service applies
// an admin change: at once when first, else delay later; rate 0 pauses and
// keeps the rate. ok is false, and p unchanged, while an earlier change is
// still pending.
func ApplyChange(p admission.Program, now time.Time, c RateChange, first bool, delay time.Duration) (_ admission.Program, ok bool) {
	if p.Pending(now) {
		return p, false
	}
	if first {
		delay = 0
	}
	if c.Rate == 0 { // a pause, as the load test sends it ({"paused": true})
		return p.Rebased(now, p.Settled().Rate, true, 0, delay), true
	}
	r, _ := pace.NewRate(c.Rate) // validated
	return p.Rebased(now, r, c.Paused, 0, delay), true
}

// Scenario is what a run or a simulation exercises.
type Scenario struct {
	Users   int
	Arrival Arrival
	Rates   Schedule
	Abandon float64       // the fraction of users, in [0, 1), who leave while waiting (see Leaving)
	Timeout time.Duration // bounds the run from its start; 0: until everyone has seen ADMITTED or left
}

// Result returns the Result of a run of sc under policy in mode, with the
// scenario's fields set.
func (sc Scenario) Result(policy, mode string, seed uint64) Result {
	return Result{Policy: policy, Mode: mode, Arrival: sc.Arrival.String(), AdmitRate: sc.Rates.String(),
		Abandon: sc.Abandon, Seed: seed, Users: sc.Users}
}

// Validate reports whether sc is runnable.
func (sc Scenario) Validate() error {
	switch {
	case sc.Users < 1:
		return fmt.Errorf("users: %d, want at least 1", sc.Users)
	case sc.Timeout < 0:
		return errors.New("timeout: negative")
	case !(sc.Abandon >= 0 && sc.Abandon < 1):
		return fmt.Errorf("abandon: %g, want a fraction in [0, 1)", sc.Abandon)
	}
	return sc.Rates.Validate()
}

// Leaving draws from seed alone round(Abandon × Users) users and, for each,
// the fraction of its wait in [0, 1) after which it leaves; the result is
// indexed by arrival order, negative for users who stay, nil when nobody
// leaves.
func (sc Scenario) Leaving(seed uint64) []float64 {
	k := int(math.Round(sc.Abandon * float64(sc.Users)))
	if k == 0 {
		return nil
	}
	rng := rand.New(rand.NewPCG(seed^0x5bd1e995, seed+0x2545f4914f6cdd1d))
	perm := make([]int32, sc.Users)
	for i := range perm {
		perm[i] = int32(i)
	}
	frac := slices.Repeat([]float64{-1}, sc.Users)
	// A partial Fisher–Yates shuffle picks k distinct users.
	for i := range k {
		j := i + rng.IntN(sc.Users-i)
		perm[i], perm[j] = perm[j], perm[i]
		frac[perm[i]] = rng.Float64()
	}
	return frac
}
