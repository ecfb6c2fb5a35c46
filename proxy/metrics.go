package proxy

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/toolgate/toolgate/proxy/internal/mcpcall"
)

// Describe implements prometheus.Collector.
func (s *Server) Describe(ch chan<- *prometheus.Desc) {
	s.Metrics.Calls.Describe(ch)
	s.Metrics.Duration.Describe(ch)
	s.Metrics.Upstream.Describe(ch)
	s.tlsm.describe(ch)
	s.connm.Describe(ch)
	ch <- mcpcall.UnlistedDesc
	s.EventsLost.Describe(ch)
}

// Collect implements prometheus.Collector.
func (s *Server) Collect(ch chan<- prometheus.Metric) {
	s.Metrics.Calls.Collect(ch)
	s.Metrics.Duration.Collect(ch)
	s.Metrics.Upstream.Collect(ch)
	s.tlsm.collect(ch)
	s.connm.Collect(ch)
	ch <- prometheus.MustNewConstMetric(mcpcall.UnlistedDesc, prometheus.GaugeValue, float64(len(s.UnlistedNames())))
	s.EventsLost.Collect(ch)
}

var _ prometheus.Collector = (*Server)(nil)
