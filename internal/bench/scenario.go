// Package bench holds what the bench CLI's load test (loadtest) and
// simulator (simulate) share: the scenario (how many users, how they arrive,
// how fast they are admitted), the polling policies by name, the result of a
// run with its statistics, the cost model, and the reports (text table,
// JSON, Markdown, SVG chart).
package bench

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
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
// schedule; a later -rate-schedule flag will parse into the same type, and
// both the load test (admin PUTs at the offsets) and the simulator
// (queue.Program.Rebased at the offsets) already apply every change.
type Schedule []RateChange

// ConstantRate returns the schedule of a rate that never changes.
func ConstantRate(rate float64) Schedule { return Schedule{{At: 0, Rate: rate}} }

// Validate reports whether s can drive a run.
func (s Schedule) Validate() error {
	if len(s) == 0 {
		return errors.New("rate schedule: empty")
	}
	if s[0].At != 0 {
		return errors.New("rate schedule: the first change must be at 0")
	}
	for i, c := range s {
		if c.Rate < 0 || c.Rate != c.Rate {
			return fmt.Errorf("rate schedule: change %d: rate %g is negative", i+1, c.Rate)
		}
		if i > 0 && c.At <= s[i-1].At {
			return fmt.Errorf("rate schedule: change %d: offsets must ascend", i+1)
		}
	}
	return nil
}

// Final returns the rate in force after the last change.
func (s Schedule) Final() float64 { return s[len(s)-1].Rate }

// String returns the schedule as "10/s" or "0/s@0s,10/s@60s".
func (s Schedule) String() string {
	if len(s) == 1 {
		return strconv.FormatFloat(s[0].Rate, 'g', -1, 64) + "/s"
	}
	parts := make([]string, len(s))
	for i, c := range s {
		parts[i] = strconv.FormatFloat(c.Rate, 'g', -1, 64) + "/s@" + shortDuration(c.At)
	}
	return strings.Join(parts, ",")
}

// Scenario is what a run or a simulation exercises; the same flags build it
// for both.
type Scenario struct {
	Users   int
	Arrival Arrival
	Rates   Schedule
	// Timeout bounds the run from its start; 0 means until every user has
	// seen ADMITTED (the simulator requires it when admission can stop).
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
	return sc.Rates.Validate()
}
