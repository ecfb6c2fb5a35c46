package sidecar

import (
	"context"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolgate/toolgate/cmd/toolgate/internal/config"
	"github.com/toolgate/toolgate/proxy"
	"github.com/toolgate/toolgate/sink/tracing"
)

// spans is the tracing exporter of a sidecar, or nil when tracing is off.
type spans struct {
	exp *tracing.Exporter
}

// openTracing starts the span exporter when the tracing section is on.
// It sends nothing until a call finishes.
func openTracing(lc *config.Loaded, version string, log *slog.Logger) (*spans, error) {
	if !lc.Tracing.Enabled() {
		return nil, nil
	}
	exp, err := tracing.New(lc.Tracing, tracing.Options{Logger: log.With("component", "tracing"),
		Sidecar: lc.Events.Sidecar, Version: version})
	if err != nil {
		return nil, err
	}
	log.Info("tracing", "to", lc.Tracing.String())
	return &spans{exp: exp}, nil
}

// tracer is what the proxy calls, nil when tracing is off (a nil
// *spans must not become a non-nil proxy.Tracer).
func (s *spans) tracer() proxy.Tracer {
	if s == nil {
		return nil
	}
	return s.exp
}

// collectors are the exporter's metrics.
func (s *spans) collectors() []prometheus.Collector {
	if s == nil {
		return nil
	}
	return []prometheus.Collector{s.exp}
}

// stats are the exporter's counters for /status, nil when off.
func (s *spans) stats() *tracing.Stats {
	if s == nil {
		return nil
	}
	st := s.exp.Stats()
	return &st
}

// close exports what is queued, within ctx, and stops the exporter.
func (s *spans) close(ctx context.Context) error {
	if s == nil {
		return nil
	}
	return s.exp.Shutdown(ctx)
}
