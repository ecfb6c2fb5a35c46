package sink

import "github.com/prometheus/client_golang/prometheus"

// Metric descriptions for Queue. The names share the toolgate namespace with
// sink as subsystem.
var (
	descQueueDepth = prometheus.NewDesc(
		prometheus.BuildFQName("toolgate", "sink", "queue_depth"),
		"Events in the sink queue's memory: waiting for the next group write, or in the one under way.",
		nil, nil)
	descQueueCapacity = prometheus.NewDesc(
		prometheus.BuildFQName("toolgate", "sink", "queue_capacity"),
		"Events the sink queue holds before a call waits for room (at most events.queue.max_wait) and then drops.",
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
	descGroups = prometheus.NewDesc(
		prometheus.BuildFQName("toolgate", "sink", "groups_written_total"),
		"Group writes of the sink queue; each takes every event recorded while the previous one was under way.",
		nil, nil)
	descInlineGroups = prometheus.NewDesc(
		prometheus.BuildFQName("toolgate", "sink", "inline_groups_total"),
		"Groups a call wrote itself, finding no write under way; counted in groups_written_total too.",
		nil, nil)
	descWaitTimeouts = prometheus.NewDesc(
		prometheus.BuildFQName("toolgate", "sink", "wait_timeouts_total"),
		"Calls answered before their event was written, because the write took longer than events.queue.max_wait.",
		nil, nil)
	descSyncs = prometheus.NewDesc(
		prometheus.BuildFQName("toolgate", "sink", "syncs_total"),
		"Fsyncs of written events, by outcome: ok or error.",
		[]string{"outcome"}, nil)
	descWriteFailing = prometheus.NewDesc(
		prometheus.BuildFQName("toolgate", "sink", "write_failing"),
		"1 while the last write of events failed (a full disk, say) and none succeeded since: events recorded now are not kept, and under events.on_write_failure: refuse calls are refused.",
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
	ch <- descGroups
	ch <- descInlineGroups
	ch <- descWaitTimeouts
	ch <- descSyncs
	ch <- descWriteFailing
}

// Collect sends the queue's current metrics: toolgate_sink_queue_depth and
// toolgate_sink_queue_capacity (gauges), and the counters
// toolgate_sink_events_recorded_total, toolgate_sink_events_written_total,
// toolgate_sink_events_dropped_total{reason} (every reason, zero or not),
// toolgate_sink_write_errors_total, toolgate_sink_groups_written_total,
// toolgate_sink_inline_groups_total, toolgate_sink_wait_timeouts_total and toolgate_sink_syncs_total{outcome},
// and the gauge toolgate_sink_write_failing.
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
	ch <- prometheus.MustNewConstMetric(descGroups, prometheus.CounterValue, float64(s.Groups))
	ch <- prometheus.MustNewConstMetric(descInlineGroups, prometheus.CounterValue, float64(s.InlineGroups))
	ch <- prometheus.MustNewConstMetric(descWaitTimeouts, prometheus.CounterValue, float64(s.WaitTimeouts))
	ch <- prometheus.MustNewConstMetric(descSyncs, prometheus.CounterValue, float64(s.Syncs), "ok")
	ch <- prometheus.MustNewConstMetric(descSyncs, prometheus.CounterValue, float64(s.SyncErrors), "error")
	failing := 0.0
	if s.WriteFailing {
		failing = 1
	}
	ch <- prometheus.MustNewConstMetric(descWriteFailing, prometheus.GaugeValue, failing)
}
