// Package partitionmodel makes a local DynamoDB API server throttle a hot
// partition as DynamoDB does: a Model keeps a one-second token bucket of
// write units and one of read units per partition key value, which
// Transport charges single-item requests to.
package partitionmodel

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Limits are per-partition throughput limits, in capacity units a second.
type Limits struct {
	WriteUnits float64
	ReadUnits  float64 // strongly consistent; an eventual read costs half
}

// AWS is DynamoDB's per-partition limit: 1,000 WCU and 3,000 RCU a second.
var AWS = Limits{WriteUnits: 1000, ReadUnits: 3000}

// Scaled returns l with both limits multiplied by f.
func (l Limits) Scaled(f float64) Limits {
	return Limits{WriteUnits: l.WriteUnits * f, ReadUnits: l.ReadUnits * f}
}

// String returns l as ParseSpec reads it.
func (l Limits) String() string {
	return fmt.Sprintf("write=%g,read=%g", l.WriteUnits, l.ReadUnits)
}

// ParseSpec reads a limits specification: "scale=F" (AWS's limits times F),
// "write=W" and "read=R" (units a second), comma separated. "" and "aws"
// are AWS's limits.
func ParseSpec(spec string) (Limits, error) {
	l := AWS
	spec = strings.TrimSpace(spec)
	if spec == "" || spec == "aws" {
		return l, nil
	}
	var write, read float64
	for part := range strings.SplitSeq(spec, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if !ok || err != nil || !(f > 0) || f > 1e9 {
			return Limits{}, fmt.Errorf("partition limits %q: want scale=F, write=UNITS or read=UNITS with a positive number", part)
		}
		switch strings.TrimSpace(k) {
		case "scale":
			l = AWS.Scaled(f)
		case "write":
			write = f
		case "read":
			read = f
		default:
			return Limits{}, fmt.Errorf("partition limits %q: unknown key %q (scale, write, read)", part, k)
		}
	}
	return Limits{WriteUnits: cmp.Or(write, l.WriteUnits), ReadUnits: cmp.Or(read, l.ReadUnits)}, nil
}

// bucket is a token bucket of capacity units that refills at rate a second
// up to one second's worth.
type bucket struct {
	tokens float64
	at     time.Time
}

func (b *bucket) refill(now time.Time, rate float64) {
	if b.at.IsZero() {
		b.tokens, b.at = rate, now
		return
	}
	if d := now.Sub(b.at); d > 0 {
		b.tokens = min(rate, b.tokens+rate*d.Seconds())
		b.at = now
	}
}

// partition is one partition key value's state.
type partition struct {
	write, read bucket
	stats       PartitionStats
	second      int64 // the Unix second writesInSec counts
	writesInSec int64
}

// Model holds one write and one read bucket per partition key value, on
// the clock its callers pass. It is safe for concurrent use.
type Model struct {
	limits Limits
	mu     sync.Mutex
	parts  map[string]*partition
}

// NewModel returns a Model with full buckets for every partition.
func NewModel(l Limits) *Model {
	return &Model{limits: l, parts: make(map[string]*partition)}
}

// Kind is what a request does to its partition.
type Kind int

// Kinds of request.
const (
	Read Kind = iota
	Write
)

// bucketOf is key's partition, its bucket of kind refilled to now, and the
// bucket's rate; m.mu must be held.
func (m *Model) bucketOf(key string, kind Kind, now time.Time) (*partition, *bucket, float64) {
	p := m.parts[key]
	if p == nil {
		p = &partition{stats: PartitionStats{Key: key}}
		m.parts[key] = p
	}
	b, rate := &p.read, m.limits.ReadUnits
	if kind == Write {
		b, rate = &p.write, m.limits.WriteUnits
	}
	b.refill(now, rate)
	return p, b, rate
}

// Admit reports whether partition key can take a request of kind at now
// that is expected to cost units, and if so takes them. A refused request
// is counted as throttled; an admitted one must be settled with Settle.
func (m *Model) Admit(key string, kind Kind, units float64, now time.Time) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	p, b, rate := m.bucketOf(key, kind, now)
	if b.tokens >= units || units > rate && b.tokens >= rate {
		b.tokens -= units
		return true
	}
	if kind == Write {
		p.stats.ThrottledWrites++
	} else {
		p.stats.ThrottledReads++
	}
	return false
}

// Settle records a request Admit took estimate units for and that cost
// actual units, served at now; the bucket may go into debt. An actual cost
// of 0 is a request not served: the estimate is given back, nothing counted.
func (m *Model) Settle(key string, kind Kind, estimate, actual float64, now time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	p, b, rate := m.bucketOf(key, kind, now)
	if actual == 0 {
		b.tokens = min(rate, b.tokens+estimate)
		return
	}
	b.tokens += estimate - actual
	if kind == Read {
		p.stats.Reads++
		p.stats.ReadUnits += actual
		return
	}
	p.stats.Writes++
	p.stats.WriteUnits += actual
	if sec := now.Unix(); sec != p.second {
		p.second, p.writesInSec = sec, 0
	}
	p.writesInSec++
	p.stats.MaxWritesPerSecond = max(p.stats.MaxWritesPerSecond, p.writesInSec)
}

// Take admits and settles a request whose cost is known in advance: it
// reports whether the partition took it.
func (m *Model) Take(key string, kind Kind, units float64, now time.Time) bool {
	if !m.Admit(key, kind, units, now) {
		return false
	}
	m.Settle(key, kind, units, units, now)
	return true
}

// PartitionStats is what one partition served and refused.
type PartitionStats struct {
	Key                string  `json:"key"`
	Reads              int64   `json:"reads"`
	Writes             int64   `json:"writes"`
	ReadUnits          float64 `json:"readUnits"`
	WriteUnits         float64 `json:"writeUnits"`
	ThrottledReads     int64   `json:"throttledReads"`
	ThrottledWrites    int64   `json:"throttledWrites"`
	MaxWritesPerSecond int64   `json:"maxWritesPerSecond"`
}

// Stats returns every partition's counts, the busiest writer first.
func (m *Model) Stats() []PartitionStats {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]PartitionStats, 0, len(m.parts))
	for _, p := range m.parts {
		out = append(out, p.stats)
	}
	slices.SortFunc(out, func(a, b PartitionStats) int {
		return cmp.Or(cmp.Compare(b.Writes, a.Writes), cmp.Compare(b.Reads, a.Reads), strings.Compare(a.Key, b.Key))
	})
	return out
}

// StatsPath is where the local server (cmd/local -partition-limits)
// serves its model's Summary as JSON.
const StatsPath = "/debug/partition-model"

// Summary totals the stats of every partition.
type Summary struct {
	Limits          string           `json:"limits"`
	Partitions      int              `json:"partitions"`
	Reads           int64            `json:"reads"`
	Writes          int64            `json:"writes"`
	ThrottledReads  int64            `json:"throttledReads"`
	ThrottledWrites int64            `json:"throttledWrites"`
	Hottest         []PartitionStats `json:"hottest"` // the busiest writers, at most 5
}

// Summarize totals the model's stats.
func (m *Model) Summarize() Summary {
	all := m.Stats()
	s := Summary{Limits: m.limits.String(), Partitions: len(all)}
	for _, p := range all {
		s.Reads += p.Reads
		s.Writes += p.Writes
		s.ThrottledReads += p.ThrottledReads
		s.ThrottledWrites += p.ThrottledWrites
	}
	s.Hottest = all[:min(5, len(all))]
	return s
}
