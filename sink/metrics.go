package sink

import "github.com/prometheus/client_golang/prometheus"

// Metric descriptions for Queue. The names share the toolgate namespace with
// sink as subsystem.
var (
	descQueueDepth = prometheus.NewDesc(
		prometheus.BuildFQName("toolgate", "sink", "queue_depth"),
		"Events waiting in the sink queue, not counting the batch being written.",
		nil, nil)
	descQueueCapacity = prometheus.NewDesc(
		prometheus.BuildFQName("toolgate", "sink", "queue_capacity"),
		"Events the sink queue holds before it drops.",
		nil, nil)
	descEventsRecorded = prometheus.NewDesc(
		prometheus.BuildFQName("toolgate", "sink", "events_recorded_total"),
		"Events passed to the sink queue, accepted or dropped.",
		nil, nil)
	descEventsWritten = prometheus.NewDesc(
		prometheus.BuildFQName("toolgate", "sink", "events_written_total"),
		"Events the sink destination stored.",
		nil, nil)
	descEventsDropped = prometheus.NewDesc(
		prometheus.BuildFQName("toolgate", "sink", "events_dropped_total"),
		"Events lost by the sink, by reason: queue_full, write_error or shutdown.",
		[]string{"reason"}, nil)
	descWriteErrors = prometheus.NewDesc(
		prometheus.BuildFQName("toolgate", "sink", "write_errors_total"),
		"Failed writes to the sink destination, retries included.",
		nil, nil)
	descEventsSpilled = prometheus.NewDesc(
		prometheus.BuildFQName("toolgate", "sink", "events_spilled_total"),
		"Events a full queue handed straight to the spool instead of dropping them.",
		nil, nil)
)

// Queue is a prometheus.Collector; register it in the binary's registry.
var _ prometheus.Collector = (*Queue)(nil)

// Describe sends the descriptions of the metrics Collect produces. Together
// with Collect it makes a Queue a prometheus.Collector.
func (q *Queue) Describe(ch chan<- *prometheus.Desc) {
	ch <- descQueueDepth
	ch <- descQueueCapacity
	ch <- descEventsRecorded
	ch <- descEventsWritten
	ch <- descEventsDropped
	ch <- descWriteErrors
	ch <- descEventsSpilled
}

// Collect sends the queue's current metrics: toolgate_sink_queue_depth and
// toolgate_sink_queue_capacity (gauges), and the counters
// toolgate_sink_events_recorded_total, toolgate_sink_events_written_total,
// toolgate_sink_events_dropped_total{reason} (every reason, zero or not),
// toolgate_sink_write_errors_total and toolgate_sink_events_spilled_total.
func (q *Queue) Collect(ch chan<- prometheus.Metric) {
	s := q.Stats()
	ch <- prometheus.MustNewConstMetric(descQueueDepth, prometheus.GaugeValue, float64(s.Depth))
	ch <- prometheus.MustNewConstMetric(descQueueCapacity, prometheus.GaugeValue, float64(s.Capacity))
	ch <- prometheus.MustNewConstMetric(descEventsRecorded, prometheus.CounterValue, float64(s.Recorded))
	ch <- prometheus.MustNewConstMetric(descEventsWritten, prometheus.CounterValue, float64(s.Written))
	ch <- prometheus.MustNewConstMetric(descEventsDropped, prometheus.CounterValue, float64(s.DroppedQueueFull), DropQueueFull)
	ch <- prometheus.MustNewConstMetric(descEventsDropped, prometheus.CounterValue, float64(s.DroppedWriteError), DropWriteError)
	ch <- prometheus.MustNewConstMetric(descEventsDropped, prometheus.CounterValue, float64(s.DroppedShutdown), DropShutdown)
	ch <- prometheus.MustNewConstMetric(descWriteErrors, prometheus.CounterValue, float64(s.WriteErrors))
	ch <- prometheus.MustNewConstMetric(descEventsSpilled, prometheus.CounterValue, float64(s.Spilled))
}
