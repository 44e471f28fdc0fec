// Package metricstest holds metrics helpers for tests: an Observer that
// records, and the lookup of a CloudWatch metric by name.
package metricstest

import (
	"slices"
	"sync"

	"github.com/example/waitingroom/internal/metrics"
)

// Recorder is a metrics.Observer that keeps what it observed; it is safe for
// concurrent use.
type Recorder struct {
	mu   sync.Mutex
	seen []metrics.Request
}

// Observe records req.
func (r *Recorder) Observe(req metrics.Request) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seen = append(r.seen, req)
}

// Requests returns the requests observed so far, in the order observed.
func (r *Recorder) Requests() []metrics.Request {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.seen)
}

// ByName returns the CloudWatch metric called name.
func ByName(name string) (metrics.Def, bool) {
	for _, d := range metrics.Defs {
		if d.Name != "" && d.Name == name {
			return d, true
		}
	}
	return metrics.Def{}, false
}
