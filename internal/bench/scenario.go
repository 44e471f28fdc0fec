// Package bench holds what the bench CLI's load test (loadtest) and
// simulator (simulate) share: the scenario (how many users, how they arrive,
// how fast they are admitted), the polling policies by name, the result of a
// run with its statistics, the cost model, and the reports (text table,
// JSON, Markdown, SVG chart).
package bench

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/example/waitingroom/internal/queue"
)

// Arrival says when each virtual user makes its first request (the enter).
// The zero value is a burst: everyone at the start.
type Arrival struct {
	// Over spreads the users evenly over this duration: user i of n arrives
	// at i×Over/n. Zero means a burst.
	Over time.Duration
}

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
// on; a rate of 0 pauses admission.
type RateChange struct {
	At   time.Duration
	Rate float64
}

// Schedule is the admission rate over a run: changes in ascending At, the
// first at 0. A constant rate (the -admit-rate flag) is a one-change
// schedule, -rate-schedule (ParseSchedule) any other. The first change is
// the program's setting when the run starts; the load test applies the
// later ones through the admin API at their offsets, the simulator with
// queue.Program.Rebased (see ApplyChange), and the service makes each take
// effect one program-cache TTL after it is made.
type Schedule []RateChange

// ConstantRate returns the schedule of a rate that never changes.
func ConstantRate(rate float64) Schedule { return Schedule{{At: 0, Rate: rate}} }

// ParseSchedule reads a rate schedule as comma-separated OFFSET:RATE
// changes, e.g. "0s:200,120s:100,240s:0,300s:200" (200/s, halved at 2
// minutes, paused at 4, restarted at 5); offsets are Go durations from the
// start of admission, ascending, the first 0s; a rate is people per second,
// 0 (paused) or within the service's limits. The result is validated.
func ParseSchedule(spec string) (Schedule, error) {
	var s Schedule
	for item := range strings.SplitSeq(spec, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		at, rate, ok := strings.Cut(item, ":")
		if !ok {
			return nil, fmt.Errorf("rate schedule %q: want OFFSET:RATE (120s:100)", item)
		}
		d, err := time.ParseDuration(strings.TrimSpace(at))
		if err != nil || d < 0 {
			return nil, fmt.Errorf("rate schedule %q: offset %q is not a duration (120s)", item, at)
		}
		r, err := strconv.ParseFloat(strings.TrimSpace(rate), 64)
		if _, ok := queue.NewRate(r); err != nil || !ok {
			return nil, fmt.Errorf("rate schedule %q: rate %q: want 0 (paused) or %g to %g people per second, in steps of %g", item, rate, queue.MinAdmissionRate, queue.MaxAdmissionRate, queue.MinAdmissionRate)
		}
		s = append(s, RateChange{At: d, Rate: r})
	}
	return s, s.Validate()
}

// Validate reports whether s can drive a run.
func (s Schedule) Validate() error {
	if len(s) == 0 {
		return errors.New("rate schedule: empty")
	}
	if s[0].At != 0 {
		return errors.New("rate schedule: the first change must be at 0")
	}
	for i, c := range s {
		if _, ok := queue.NewRate(c.Rate); !ok {
			return fmt.Errorf("rate schedule: change %d: rate %g is not 0 or %g to %g people per second, in steps of %g", i+1, c.Rate, queue.MinAdmissionRate, queue.MaxAdmissionRate, queue.MinAdmissionRate)
		}
		if i > 0 && c.At <= s[i-1].At {
			return fmt.Errorf("rate schedule: change %d: offsets must ascend", i+1)
		}
	}
	return nil
}

// Final returns the rate in force after the last change.
func (s Schedule) Final() float64 { return s[len(s)-1].Rate }

// String returns a constant rate as "10/s", any other schedule as
// ParseSchedule reads it ("0s:200,120s:100").
func (s Schedule) String() string {
	if len(s) == 1 {
		return strconv.FormatFloat(s[0].Rate, 'g', -1, 64) + "/s"
	}
	parts := make([]string, len(s))
	for i, c := range s {
		parts[i] = shortDuration(c.At) + ":" + strconv.FormatFloat(c.Rate, 'g', -1, 64)
	}
	return strings.Join(parts, ",")
}

// ApplyChange returns p with change c, made at now, as the service applies
// an admin change: the first change of a schedule is the setting the
// program is created with and holds at once; a later one takes effect
// delay (the program-cache TTL) after it is made (queue.Program.Rebased).
// A rate of 0 pauses admission, keeping the rate. ok is false, and p unchanged, while an
// earlier change is still pending: the service makes an admin wait for it,
// so the caller tries again at a later instant.
func ApplyChange(p queue.Program, now time.Time, c RateChange, first bool, delay time.Duration) (_ queue.Program, ok bool) {
	if p.Pending(now) {
		return p, false
	}
	if first {
		delay = 0
	}
	if c.Rate == 0 {
		// A pause, as the load test sends it ({"paused": true}): the rate
		// is kept for the restart.
		return p.Rebased(now, p.Settled().Rate, true, 0, delay), true
	}
	r, _ := queue.NewRate(c.Rate) // validated
	return p.Rebased(now, r, false, 0, delay), true
}

// Scenario is what a run or a simulation exercises; the same flags build it
// for both.
type Scenario struct {
	Users   int
	Arrival Arrival
	Rates   Schedule
	// Abandon is the fraction of users, in [0, 1), who leave the queue
	// while waiting, each at a random instant of its wait (see Leaving).
	Abandon float64
	// Timeout bounds the run from its start; 0 means until every user has
	// seen ADMITTED or left (the simulator requires it when admission can
	// stop).
	Timeout time.Duration
}

// Validate reports whether sc is runnable.
func (sc Scenario) Validate() error {
	if sc.Users < 1 {
		return fmt.Errorf("users: %d, want at least 1", sc.Users)
	}
	if sc.Timeout < 0 {
		return errors.New("timeout: negative")
	}
	if !(sc.Abandon >= 0 && sc.Abandon < 1) {
		return fmt.Errorf("abandon: %g, want a fraction in [0, 1)", sc.Abandon)
	}
	return sc.Rates.Validate()
}

// Leaving draws who abandons the queue: exactly round(Abandon × Users)
// users, a uniform sample by seed, and for each the fraction of its wait
// after which it leaves, uniform in [0, 1). The result is indexed by user
// (arrival order); a negative value means the user stays. nil when nobody
// leaves. The draws are independent of the policy's jitter, so every
// policy of a comparison loses the same people at the same point of their
// wait.
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
	frac := make([]float64, sc.Users)
	for i := range frac {
		frac[i] = -1
	}
	// A partial Fisher–Yates shuffle picks k distinct users.
	for i := range k {
		j := i + rng.IntN(sc.Users-i)
		perm[i], perm[j] = perm[j], perm[i]
		frac[perm[i]] = rng.Float64()
	}
	return frac
}

// AdmissionTimes returns, for each ticket 1..Users (index 0 is unused),
// the offset from the start of admission at which the serving counter
// passes it, as the service computes it: user i takes ticket i+1 at its
// arrival instant (queue.Program.WithTicketIssued), rate changes apply
// through ApplyChange with delay, and -1 marks a ticket not admitted
// before the timeout. With createdPaused the program starts paused and even
// the first change is an admin change that waits delay, as in a load test,
// which creates its program paused and sets the rate once the run starts.
//
// The simulator's own clock gives the same instants; the load test uses
// them to place abandonment within each user's wait.
func AdmissionTimes(sc Scenario, delay time.Duration, createdPaused bool) []time.Duration {
	epoch := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	n := sc.Users
	at := make([]time.Duration, n+1)
	for i := range at {
		at[i] = -1
	}
	p := queue.Program{ID: "plan", CreatedAt: epoch, Current: queue.Segment{Paused: createdPaused}, Options: queue.Options{AdmissionWindow: queue.DefaultAdmissionWindow}}
	end := int64(math.MaxInt64)
	if sc.Timeout > 0 {
		end = sc.Timeout.Milliseconds()
	} else if sc.Rates.Final() == 0 {
		return at
	}
	var admitted int64
	nextUser, nextChange := 0, 0
	for t := int64(0); t < end && admitted < int64(n); t++ {
		now := epoch.Add(time.Duration(t) * time.Millisecond)
		for nextChange < len(sc.Rates) && sc.Rates[nextChange].At.Milliseconds() <= t {
			c := sc.Rates[nextChange]
			if nextChange == 0 && createdPaused && c.Rate == 0 {
				nextChange++ // created paused already
				continue
			}
			var ok bool
			if p, ok = ApplyChange(p, now, c, nextChange == 0 && !createdPaused, delay); !ok {
				break
			}
			nextChange++
		}
		for nextUser < n && sc.Arrival.At(nextUser, n).Milliseconds() <= t {
			p = p.WithTicketIssued(now)
			nextUser++
		}
		for serving := p.Serving(now); admitted < serving; {
			admitted++
			at[admitted] = time.Duration(t) * time.Millisecond
		}
	}
	return at
}
