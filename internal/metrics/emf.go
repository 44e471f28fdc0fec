package metrics

import (
	"cmp"
	"encoding/json"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"
)

// EMF writes the observed requests' CloudWatch metrics as Embedded Metric Format lines,
// aggregated over an interval: a line per dimension set per interval, counters summed,
// levels at their maximum, distributions as their values (docs/operations.md, "Metrics").
// On Lambda a line on stdout becomes CloudWatch metrics with no API call.
type EMF struct {
	mu        sync.Mutex
	w         io.Writer
	namespace string
	now       func() time.Time
	interval  time.Duration
	pending   map[emfKey]*emfSeries
	oldest    int64 // the bucket start (Unix ms) of the oldest pending series
	held      int   // the observations pending
	wroteAt   int64 // when the last flush wrote (Unix ms)
}

// EMFOption configures NewEMF.
type EMFOption func(*EMF)

// WithEMFClock stamps observations with now's time (default time.Now).
func WithEMFClock(now func() time.Time) EMFOption { return func(e *EMF) { e.now = now } }

// WithEMFInterval aggregates observations over intervals of d aligned on the clock, each
// written once a later one starts, on a 5xx (once a second at most), or on Flush; 0 (the
// default) writes each at once.
func WithEMFInterval(d time.Duration) EMFOption { return func(e *EMF) { e.interval = max(d, 0) } }

// NewEMF returns an EMF sink writing lines to w under namespace.
func NewEMF(w io.Writer, namespace string, opts ...EMFOption) *EMF {
	e := &EMF{w: w, namespace: namespace, now: time.Now, pending: map[emfKey]*emfSeries{}}
	for _, o := range opts {
		o(e)
	}
	return e
}

// emfKey is one series: an interval's start and a set of dimension values.
type emfKey struct {
	at   int64  // Unix ms
	dims string // "Name=value\x00…", in the Def's order
}

// emfSeries is what an interval recorded for one dimension set.
type emfSeries struct {
	dims    []string // names, in order
	values  []string // their values
	metrics map[string]*emfValue
}

type emfValue struct {
	def    *Def
	values []float64 // one value for a Counter (the sum) or a Level (the maximum)
}

// emfDirective is a MetricDirective of the EMF specification.
type emfDirective struct {
	Namespace  string      `json:"Namespace"`
	Dimensions [][]string  `json:"Dimensions"`
	Metrics    []emfMetric `json:"Metrics"`
}

type emfMetric struct {
	Name string `json:"Name"`
	Unit Unit   `json:"Unit"`
}

// maxValues is the specification's limit on the values of one metric in one document;
// maxHeld bounds the values an EMF holds before it writes them.
const (
	maxValues = 100
	maxHeld   = 10_000
)

// Observe adds r's metrics to its interval and writes what is due; a write error is dropped.
func (e *EMF) Observe(r Request) {
	e.mu.Lock()
	defer e.mu.Unlock()
	now := e.now().UnixMilli()
	at := now
	if e.interval > 0 {
		at -= at % e.interval.Milliseconds()
	}
	if len(e.pending) > 0 && at > e.oldest {
		e.flush() // the oldest interval is over
	}
	for i := range Defs {
		d := &Defs[i]
		v, ok := d.Value(r)
		if !ok || !d.CloudWatch() || slices.ContainsFunc(d.Dimensions, func(dim string) bool { return DimensionValue(dim, r) == "" }) {
			continue
		}
		e.add(at, d, r, v)
	}
	if e.interval <= 0 || r.Status >= 500 && now-e.wroteAt >= time.Second.Milliseconds() || e.held >= maxHeld {
		e.flush() // at once, an error the alarms read (once a second at most), or memory bounded
		e.wroteAt = now
	}
}

// add records d's value v for r in the interval starting at.
func (e *EMF) add(at int64, d *Def, r Request, v float64) {
	values := make([]string, len(d.Dimensions))
	var key strings.Builder
	for i, dim := range d.Dimensions {
		values[i] = DimensionValue(dim, r)
		key.WriteString(dim + "=" + values[i] + "\x00")
	}
	k := emfKey{at, key.String()}
	s := e.pending[k]
	if s == nil {
		if len(e.pending) == 0 || at < e.oldest {
			e.oldest = at
		}
		s = &emfSeries{dims: d.Dimensions, values: values, metrics: map[string]*emfValue{}}
		e.pending[k] = s
	}
	m := s.metrics[d.Name]
	e.held++
	switch {
	case m == nil:
		s.metrics[d.Name] = &emfValue{def: d, values: []float64{v}}
	case d.Kind == Counter:
		m.values[0] += v
	case d.Kind == Level:
		m.values[0] = max(m.values[0], v)
	default:
		m.values = append(m.values, v)
	}
}

// Flush writes every pending interval, for a process about to end.
func (e *EMF) Flush() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.flush()
}

// flush writes every pending series, oldest first; e.mu is held.
func (e *EMF) flush() {
	keys := slices.SortedFunc(maps.Keys(e.pending), func(a, b emfKey) int {
		return cmp.Or(cmp.Compare(a.at, b.at), strings.Compare(a.dims, b.dims))
	})
	for _, k := range keys {
		for _, line := range e.documents(k.at, e.pending[k]) {
			_, _ = e.w.Write(line)
		}
	}
	clear(e.pending)
	e.held = 0
}

// documents are s's EMF lines stamped at: more than one when a distribution has more
// values than one document may carry.
func (e *EMF) documents(at int64, s *emfSeries) [][]byte {
	names := slices.Sorted(maps.Keys(s.metrics))
	var lines [][]byte
	for part := 0; ; part++ {
		root := map[string]any{}
		for i, dim := range s.dims {
			root[dim] = s.values[i]
		}
		dir := emfDirective{Namespace: e.namespace, Dimensions: [][]string{append([]string{}, s.dims...)}}
		for _, name := range names {
			m := s.metrics[name]
			lo := part * maxValues
			if lo >= len(m.values) {
				continue
			}
			chunk := m.values[lo:min(lo+maxValues, len(m.values))]
			if len(chunk) == 1 {
				root[name] = chunk[0]
			} else {
				root[name] = chunk
			}
			dir.Metrics = append(dir.Metrics, emfMetric{Name: name, Unit: m.def.Unit})
		}
		if len(dir.Metrics) == 0 {
			return lines
		}
		root["_aws"] = map[string]any{"Timestamp": at, "CloudWatchMetrics": []emfDirective{dir}}
		b, err := json.Marshal(root)
		if err != nil { // only strings and numbers: cannot happen
			return lines
		}
		lines = append(lines, append(b, '\n'))
	}
}
