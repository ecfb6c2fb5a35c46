package proxy

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the proxy's Prometheus series, namespace toolgate, subsystem
// proxy. Per-tool handles are resolved once per configuration, so the hot
// path does no label lookups.
type metrics struct {
	calls    *prometheus.CounterVec
	duration *prometheus.HistogramVec
	upstream *prometheus.HistogramVec

	mu    sync.Mutex
	tools map[string]*toolMetrics
}

// codeLabels are the values of the code label: "ok" for success, the error
// codes, and "client_closed" for calls whose caller went away first.
var codeLabels = []string{"ok", "validation", "policy", "rate_limit", "auth", "upstream", "client_closed", "unknown"}

// unmatchedTool is the tool label of calls that matched no tool.
const unmatchedTool = "_unmatched"

type toolMetrics struct {
	calls    []prometheus.Counter // by codeIndex
	duration prometheus.Observer
	upstream prometheus.Observer
}

func newMetrics() *metrics {
	buckets := []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}
	return &metrics{
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "toolgate", Subsystem: "proxy", Name: "calls_total",
			Help: "Tool calls by tool and error code (ok for success).",
		}, []string{"tool", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "toolgate", Subsystem: "proxy", Name: "call_duration_seconds",
			Help: "Time from a call's arrival to the end of its answer, by tool.", Buckets: buckets,
		}, []string{"tool"}),
		upstream: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "toolgate", Subsystem: "proxy", Name: "upstream_duration_seconds",
			Help: "Time from dispatch to the end of upstream's answer, by tool.", Buckets: buckets,
		}, []string{"tool"}),
		tools: map[string]*toolMetrics{},
	}
}

func (m *metrics) forTool(name string) *toolMetrics {
	m.mu.Lock()
	defer m.mu.Unlock()
	if tm, ok := m.tools[name]; ok {
		return tm
	}
	tm := &toolMetrics{
		duration: m.duration.WithLabelValues(name),
		upstream: m.upstream.WithLabelValues(name),
	}
	for _, c := range codeLabels {
		tm.calls = append(tm.calls, m.calls.WithLabelValues(name, c))
	}
	m.tools[name] = tm
	return tm
}

func codeIndex(code string) int {
	if code == "" {
		return 0
	}
	for i, c := range codeLabels {
		if c == code {
			return i
		}
	}
	return len(codeLabels) - 1
}

func (tm *toolMetrics) observe(code string, total, up time.Duration) {
	tm.calls[codeIndex(code)].Inc()
	tm.duration.Observe(total.Seconds())
	if up > 0 {
		tm.upstream.Observe(up.Seconds())
	}
}

// call records a call that matched no tool.
func (m *metrics) call(_ string, code string, total time.Duration) {
	tm := m.forTool(unmatchedTool)
	tm.calls[codeIndex(code)].Inc()
	if total > 0 {
		tm.duration.Observe(total.Seconds())
	}
}

// Describe implements prometheus.Collector.
func (s *Server) Describe(ch chan<- *prometheus.Desc) {
	s.metrics.calls.Describe(ch)
	s.metrics.duration.Describe(ch)
	s.metrics.upstream.Describe(ch)
	s.tlsm.describe(ch)
	s.connm.Describe(ch)
	ch <- unlistedDesc
	s.eventsLost.Describe(ch)
}

// Collect implements prometheus.Collector.
func (s *Server) Collect(ch chan<- prometheus.Metric) {
	s.metrics.calls.Collect(ch)
	s.metrics.duration.Collect(ch)
	s.metrics.upstream.Collect(ch)
	s.tlsm.collect(ch)
	s.connm.Collect(ch)
	ch <- prometheus.MustNewConstMetric(unlistedDesc, prometheus.GaugeValue, float64(len(s.UnlistedNames())))
	s.eventsLost.Collect(ch)
}

var _ prometheus.Collector = (*Server)(nil)
