// Package prom records metrics.Defs in a Prometheus registry and serves it
// in the exposition format (the local server's GET /metrics).
package prom

import (
	"net/http"
	"regexp"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/example/waitingroom/internal/metrics"
)

// Sink is a metrics.Observer backed by its own Prometheus registry.
type Sink struct {
	reg     *prometheus.Registry
	records []record
}

// record is one metric of metrics.Defs and how a value is recorded in it.
type record struct {
	def     metrics.Def
	observe func(labels []string, v float64)
}

var _ metrics.Observer = (*Sink)(nil)

// New returns a Sink with every metric of metrics.Defs registered.
func New() *Sink {
	s := &Sink{reg: prometheus.NewRegistry()}
	for _, d := range metrics.Defs {
		labels := make([]string, len(d.Dimensions))
		for i, dim := range d.Dimensions {
			labels[i] = labelName(dim)
		}
		r := record{def: d}
		switch d.Kind {
		case metrics.Counter:
			c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: d.Prom, Help: d.Help}, labels)
			s.reg.MustRegister(c)
			r.observe = func(l []string, v float64) { c.WithLabelValues(l...).Add(v) }
		case metrics.Distribution:
			h := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: d.Prom, Help: d.Help, Buckets: d.Buckets}, labels)
			s.reg.MustRegister(h)
			r.observe = func(l []string, v float64) { h.WithLabelValues(l...).Observe(v) }
		case metrics.Level:
			g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: d.Prom, Help: d.Help}, labels)
			s.reg.MustRegister(g)
			r.observe = func(l []string, v float64) { g.WithLabelValues(l...).Set(v) }
		}
		s.records = append(s.records, r)
	}
	return s
}

// Observe records req in every metric it applies to.
func (s *Sink) Observe(req metrics.Request) {
	for _, r := range s.records {
		v, ok := r.def.Value(req)
		values := make([]string, len(r.def.Dimensions))
		for i, dim := range r.def.Dimensions {
			if values[i] = metrics.DimensionValue(dim, req); values[i] == "" {
				ok = false
			}
		}
		if !ok {
			continue
		}
		if r.def.Unit == metrics.Milliseconds {
			v /= 1000
		}
		r.observe(values, v)
	}
}

// Handler serves the registry in the Prometheus exposition formats.
func (s *Sink) Handler() http.Handler {
	return promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{})
}

// camelBoundary is a lower-case letter or digit before an upper-case one.
var camelBoundary = regexp.MustCompile(`([a-z0-9])([A-Z])`)

// labelName is the Prometheus label of dimension dim: "ProgramId" is "program_id".
func labelName(dim string) string {
	return strings.ToLower(camelBoundary.ReplaceAllString(dim, "${1}_${2}"))
}
