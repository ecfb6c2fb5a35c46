package sidecar

import (
	"github.com/prometheus/client_golang/prometheus"
)

// budgetCollector serves the budgets' series of the configuration in
// force (toolgate_budget_...). It describes nothing up front (an
// unchecked collector): which series exist depends on the budgets
// configured, which a reload changes.
type budgetCollector struct{ sc *Sidecar }

// Describe implements prometheus.Collector.
func (budgetCollector) Describe(chan<- *prometheus.Desc) {}

// Collect implements prometheus.Collector.
func (b budgetCollector) Collect(ch chan<- prometheus.Metric) {
	if lc := b.sc.cfg.Load(); lc != nil && lc.BudgetEngine != nil {
		lc.BudgetEngine.Metrics().Collect(ch)
	}
}

var _ prometheus.Collector = budgetCollector{}
