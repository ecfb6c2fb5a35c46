package pipe

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the proxy's Prometheus series, namespace toolgate, subsystem
// proxy. Per-tool handles are resolved once per configuration, so the hot
// path does no label lookups.
type metrics struct {
	Calls    *prometheus.CounterVec
	Duration *prometheus.HistogramVec
	Upstream *prometheus.HistogramVec

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

func NewMetrics() *metrics {
	buckets := []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}
	return &metrics{
		Calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "toolgate", Subsystem: "proxy", Name: "calls_total",
			Help: "Tool calls by tool and error code (ok for success).",
		}, []string{"tool", "code"}),
		Duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "toolgate", Subsystem: "proxy", Name: "call_duration_seconds",
			Help: "Time from a call's arrival to the end of its answer, by tool.", Buckets: buckets,
		}, []string{"tool"}),
		Upstream: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "toolgate", Subsystem: "proxy", Name: "upstream_duration_seconds",
			Help: "Time from dispatch to the end of upstream's answer, by tool.", Buckets: buckets,
		}, []string{"tool"}),
		tools: map[string]*toolMetrics{},
	}
}

func (m *metrics) ForTool(name string) *toolMetrics {
	m.mu.Lock()
	defer m.mu.Unlock()
	if tm, ok := m.tools[name]; ok {
		return tm
	}
	tm := &toolMetrics{
		duration: m.Duration.WithLabelValues(name),
		upstream: m.Upstream.WithLabelValues(name),
	}
	for _, c := range codeLabels {
		tm.calls = append(tm.calls, m.Calls.WithLabelValues(name, c))
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

// Call records a call that matched no tool.
func (m *metrics) Call(_ string, code string, total time.Duration) {
	tm := m.ForTool(unmatchedTool)
	tm.calls[codeIndex(code)].Inc()
	if total > 0 {
		tm.duration.Observe(total.Seconds())
	}
}
