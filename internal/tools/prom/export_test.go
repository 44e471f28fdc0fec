package prom

import "github.com/prometheus/client_golang/prometheus"

// Gatherer returns the registry, for tests.
func (s *Sink) Gatherer() prometheus.Gatherer { return s.reg }
