package polling

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// DefaultTiersSpec is DefaultTiers in the syntax ParseTiers reads.
const DefaultTiersSpec = "100:1s,1000:5s+-300ms,10000:15s+-500ms,inf:30s+-4s"

// Limits on a tier configuration and on ETA's delays.
const (
	MinInterval = 100 * time.Millisecond
	MaxInterval = 30 * time.Minute
	maxTiers    = 32
)

// ParseTiers reads and validates tiers such as DefaultTiersSpec: comma-separated bands
// "MAXPOS:INTERVAL[+-JITTER]", MAXPOS ascending, the last "inf"; Go durations.
func ParseTiers(spec string) (Tiers, error) {
	spec = strings.TrimSpace(spec)
	if spec == "" {
		return nil, errors.New("polling tiers: empty configuration")
	}
	parts := strings.Split(spec, ",")
	if len(parts) > maxTiers {
		return nil, fmt.Errorf("polling tiers: %d bands, at most %d allowed", len(parts), maxTiers)
	}
	ts := make(Tiers, 0, len(parts))
	for i, p := range parts {
		p = strings.TrimSpace(p)
		pos, rest, ok := strings.Cut(p, ":")
		if !ok {
			return nil, fmt.Errorf("polling tiers: band %d %q: want MAXPOS:INTERVAL[+-JITTER]", i+1, p)
		}
		var t Tier
		var err error
		if pos = strings.TrimSpace(pos); pos != "inf" && pos != "*" {
			if t.MaxPosition, err = strconv.ParseInt(pos, 10, 64); err != nil || t.MaxPosition < 1 {
				return nil, fmt.Errorf("polling tiers: band %d: max position %q is not a whole number ≥ 1 (or inf)", i+1, pos)
			}
		}
		iv, jit, hasJitter := strings.Cut(rest, "+-")
		if t.Interval, err = time.ParseDuration(strings.TrimSpace(iv)); err != nil {
			return nil, fmt.Errorf("polling tiers: band %d: interval %q: %w", i+1, iv, err)
		}
		if hasJitter {
			if t.Jitter, err = time.ParseDuration(strings.TrimSpace(jit)); err != nil {
				return nil, fmt.Errorf("polling tiers: band %d: jitter %q: %w", i+1, jit, err)
			}
		}
		ts = append(ts, t)
	}
	if err := ts.Validate(); err != nil {
		return nil, err
	}
	return ts, nil
}

// Validate reports whether the tiers form a usable policy: positions ascending, the last
// band alone unbounded, delays within [MinInterval, MaxInterval], jitter whole milliseconds.
func (ts Tiers) Validate() error {
	if len(ts) == 0 {
		return errors.New("polling tiers: no bands")
	}
	var prev int64
	for i, t := range ts {
		last := i == len(ts)-1
		switch {
		case t.MaxPosition == 0 && !last:
			return fmt.Errorf("polling tiers: band %d is unbounded but not last", i+1)
		case t.MaxPosition != 0 && last:
			return fmt.Errorf("polling tiers: last band must be unbounded (inf), got %d", t.MaxPosition)
		case t.MaxPosition != 0 && t.MaxPosition <= prev:
			return fmt.Errorf("polling tiers: band %d: max position %d not above %d", i+1, t.MaxPosition, prev)
		case t.Interval < MinInterval || t.Interval > MaxInterval:
			return fmt.Errorf("polling tiers: band %d: interval %s outside [%s, %s]", i+1, t.Interval, MinInterval, MaxInterval)
		case t.Jitter < 0 || t.Jitter%time.Millisecond != 0:
			return fmt.Errorf("polling tiers: band %d: jitter %s must be whole non-negative milliseconds", i+1, t.Jitter)
		case t.Interval-t.Jitter < MinInterval:
			return fmt.Errorf("polling tiers: band %d: jitter %s would bring the delay under %s", i+1, t.Jitter, MinInterval)
		}
		prev = t.MaxPosition
	}
	return nil
}

// Spec returns the tiers in the syntax ParseTiers reads.
func (ts Tiers) Spec() string {
	bands := make([]string, len(ts))
	for i, t := range ts {
		bands[i] = "inf:" + t.Interval.String()
		if t.MaxPosition != 0 {
			bands[i] = strconv.FormatInt(t.MaxPosition, 10) + ":" + t.Interval.String()
		}
		if t.Jitter > 0 {
			bands[i] += "+-" + t.Jitter.String()
		}
	}
	return strings.Join(bands, ",")
}
