package metrics

import (
	"encoding/json"
	"io"
	"slices"
	"strings"
	"sync"
	"time"
)

// EMF writes each observed request's CloudWatch metrics as one Embedded Metric Format line:
// on Lambda, a line on stdout becomes CloudWatch metrics with no API call.
type EMF struct {
	mu        sync.Mutex
	w         io.Writer
	namespace string
	now       func() time.Time
}

// EMFOption configures NewEMF.
type EMFOption func(*EMF)

// WithEMFClock stamps each line with now's time (default time.Now).
func WithEMFClock(now func() time.Time) EMFOption { return func(e *EMF) { e.now = now } }

// NewEMF returns an EMF sink writing lines to w under namespace.
func NewEMF(w io.Writer, namespace string, opts ...EMFOption) *EMF {
	e := &EMF{w: w, namespace: namespace, now: time.Now}
	for _, o := range opts {
		o(e)
	}
	return e
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

const maxMetricsPerDirective = 100

// Observe writes r's line; a write error is dropped.
func (e *EMF) Observe(r Request) {
	line, ok := e.document(r)
	if !ok {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	_, _ = e.w.Write(line)
}

// document builds r's EMF line; false when r records no CloudWatch metric.
func (e *EMF) document(r Request) ([]byte, bool) {
	root := map[string]any{ // not dimensions: for Logs Insights queries
		DimMethod:    DimensionValue(DimMethod, r),
		DimHTTP:      r.Status,
		DimOperation: DimensionValue(DimOperation, r),
	}
	var directives []emfDirective
	index := map[string]int{} // dimension set -> directive
	for _, d := range Defs {
		v, ok := d.Value(r)
		if !ok || !d.CloudWatch() || slices.ContainsFunc(d.Dimensions, func(dim string) bool { return DimensionValue(dim, r) == "" }) {
			continue
		}
		dims := append([]string{}, d.Dimensions...)
		for _, dim := range dims {
			root[dim] = DimensionValue(dim, r)
		}
		root[d.Name] = v
		key := strings.Join(dims, ",")
		i, seen := index[key]
		if !seen || len(directives[i].Metrics) == maxMetricsPerDirective {
			i = len(directives)
			index[key] = i
			directives = append(directives, emfDirective{Namespace: e.namespace, Dimensions: [][]string{dims}})
		}
		directives[i].Metrics = append(directives[i].Metrics, emfMetric{Name: d.Name, Unit: d.Unit})
	}
	if len(directives) == 0 {
		return nil, false
	}
	root["_aws"] = map[string]any{
		"Timestamp":         e.now().UnixMilli(),
		"CloudWatchMetrics": directives,
	}
	b, err := json.Marshal(root)
	if err != nil { // only strings and numbers: cannot happen
		return nil, false
	}
	return append(b, '\n'), true
}
