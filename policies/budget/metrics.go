package budget

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the budgets' Prometheus series, namespace toolgate,
// subsystem budget. One Metrics outlives reloads (the sidecar keeps it),
// so counters carry on across engines.
type Metrics struct {
	decisions    *prometheus.CounterVec
	loopsVec     *prometheus.CounterVec
	limiterVec   *prometheus.CounterVec
	waitSeconds  *prometheus.CounterVec
	evictions    *prometheus.CounterVec
	fleetVec     *prometheus.CounterVec
	keysDesc     *prometheus.Desc
	degradedDesc *prometheus.Desc
	// fleetDecided and fleetUnavailable count the calls Redis decided and
	// those it could not (state.redis).
	fleetDecided, fleetUnavailable prometheus.Counter
	loops                          prometheus.Counter
	evictExpired                   prometheus.Counter
	evictLive                      prometheus.Counter

	mu       sync.Mutex
	budgets  map[string]*budgetMetrics
	limiters map[string]*limiterMetrics
	keys     func() int  // the engine in force's key count
	degraded func() bool // the fleet's Redis is unavailable (nil: no state.redis)
}

type budgetMetrics struct{ admitted, refused prometheus.Counter }

type limiterMetrics struct {
	passed, waited, refused, backoff, backoffsStarted prometheus.Counter
	waitSeconds                                       prometheus.Counter
}

// NewMetrics returns a fresh set of the budgets' series.
func NewMetrics() *Metrics {
	m := &Metrics{
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "toolgate", Subsystem: "budget", Name: "decisions_total",
			Help: "Calls a budget counted, by budget and decision (admitted, refused).",
		}, []string{"budget", "decision"}),
		loopsVec: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "toolgate", Subsystem: "budget", Name: "loops_refused_total",
			Help: "Calls refused as loop_detected.",
		}, nil),
		limiterVec: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "toolgate", Subsystem: "budget", Name: "limiter_calls_total",
			Help: "Calls through an upstream's limiter, by upstream and result (passed, waited, refused, backoff_refused, backoff_started).",
		}, []string{"upstream", "result"}),
		waitSeconds: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "toolgate", Subsystem: "budget", Name: "limiter_wait_seconds_total",
			Help: "Time calls waited for their turn under an upstream's rate, by upstream.",
		}, []string{"upstream"}),
		evictions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "toolgate", Subsystem: "budget", Name: "evictions_total",
			Help: "Counters dropped to stay under max_keys, by kind (expired: its window had ended; live: it had not, and its key starts over).",
		}, []string{"kind"}),
		fleetVec: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "toolgate", Subsystem: "budget", Name: "fleet_calls_total",
			Help: "Calls whose limits were kept in the fleet's Redis (state.redis), by result (fleet: Redis decided; unavailable: it could not answer and each limit's on_unavailable decided).",
		}, []string{"result"}),
		degradedDesc: prometheus.NewDesc("toolgate_budget_fleet_degraded", "1 while the fleet's Redis (state.redis) cannot be reached and limits fall back to on_unavailable; 0 when it answers. Absent without state.redis.", nil, nil),
		keysDesc:     prometheus.NewDesc("toolgate_budget_keys", "Counters held (budgets and loop breaking), at most max_keys.", nil, nil),
		budgets:      map[string]*budgetMetrics{},
		limiters:     map[string]*limiterMetrics{},
	}
	m.loops = m.loopsVec.WithLabelValues()
	m.evictExpired = m.evictions.WithLabelValues("expired")
	m.evictLive = m.evictions.WithLabelValues("live")
	m.fleetDecided = m.fleetVec.WithLabelValues("fleet")
	m.fleetUnavailable = m.fleetVec.WithLabelValues("unavailable")
	return m
}

func (m *Metrics) budget(name string) *budgetMetrics {
	m.mu.Lock()
	defer m.mu.Unlock()
	if b, ok := m.budgets[name]; ok {
		return b
	}
	b := &budgetMetrics{admitted: m.decisions.WithLabelValues(name, "admitted"), refused: m.decisions.WithLabelValues(name, "refused")}
	m.budgets[name] = b
	return b
}

func (m *Metrics) limiter(host string) *limiterMetrics {
	m.mu.Lock()
	defer m.mu.Unlock()
	if l, ok := m.limiters[host]; ok {
		return l
	}
	l := &limiterMetrics{
		passed: m.limiterVec.WithLabelValues(host, "passed"), waited: m.limiterVec.WithLabelValues(host, "waited"),
		refused: m.limiterVec.WithLabelValues(host, "refused"), backoff: m.limiterVec.WithLabelValues(host, "backoff_refused"),
		backoffsStarted: m.limiterVec.WithLabelValues(host, "backoff_started"),
		waitSeconds:     m.waitSeconds.WithLabelValues(host),
	}
	m.limiters[host] = l
	return l
}

// Describe implements prometheus.Collector.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	m.decisions.Describe(ch)
	m.loopsVec.Describe(ch)
	m.limiterVec.Describe(ch)
	m.waitSeconds.Describe(ch)
	m.evictions.Describe(ch)
	m.fleetVec.Describe(ch)
	ch <- m.keysDesc
	ch <- m.degradedDesc
}

// Collect implements prometheus.Collector.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	m.decisions.Collect(ch)
	m.loopsVec.Collect(ch)
	m.limiterVec.Collect(ch)
	m.waitSeconds.Collect(ch)
	m.evictions.Collect(ch)
	m.fleetVec.Collect(ch)
	m.mu.Lock()
	keys, degraded := m.keys, m.degraded
	m.mu.Unlock()
	if degraded != nil {
		d := 0.0
		if degraded() {
			d = 1
		}
		ch <- prometheus.MustNewConstMetric(m.degradedDesc, prometheus.GaugeValue, d)
	}
	n := 0
	if keys != nil {
		n = keys()
	}
	ch <- prometheus.MustNewConstMetric(m.keysDesc, prometheus.GaugeValue, float64(n))
}

var _ prometheus.Collector = (*Metrics)(nil)
