package sink

import "github.com/prometheus/client_golang/prometheus"

// Metric descriptions for Spool, in the toolgate namespace with sink as
// subsystem.
var (
	descSpoolBytes = prometheus.NewDesc(
		prometheus.BuildFQName("toolgate", "sink", "spool_bytes"),
		"Bytes of segment files waiting in the spool, the open one included.",
		nil, nil)
	descSpoolSegments = prometheus.NewDesc(
		prometheus.BuildFQName("toolgate", "sink", "spool_segments"),
		"Segment files waiting in the spool, the open one included.",
		nil, nil)
	descSpoolPending = prometheus.NewDesc(
		prometheus.BuildFQName("toolgate", "sink", "spool_pending_events"),
		"Events on disk in the spool, not yet acknowledged by the destination.",
		nil, nil)
	descSpoolOldest = prometheus.NewDesc(
		prometheus.BuildFQName("toolgate", "sink", "spool_oldest_pending_seconds"),
		"Age of the first event of the oldest pending spool segment: how far behind shipping is; 0 when nothing is pending.",
		nil, nil)
	descSpoolDroppedEvents = prometheus.NewDesc(
		prometheus.BuildFQName("toolgate", "sink", "spool_dropped_events_total"),
		"Events the spool dropped, by reason: budget (oldest segments dropped to stay within max_bytes).",
		[]string{"reason"}, nil)
	descSpoolDroppedSegments = prometheus.NewDesc(
		prometheus.BuildFQName("toolgate", "sink", "spool_dropped_segments_total"),
		"Segments the spool dropped, by reason: budget.",
		[]string{"reason"}, nil)
	descSpoolCorrupt = prometheus.NewDesc(
		prometheus.BuildFQName("toolgate", "sink", "spool_corrupt_segments_total"),
		"Spool segments found with damaged records and copied to the corrupt directory.",
		nil, nil)
	descSpoolTorn = prometheus.NewDesc(
		prometheus.BuildFQName("toolgate", "sink", "spool_torn_records_total"),
		"Spool records cut short by a crash mid-write and truncated away.",
		nil, nil)
	descSpoolShipErrors = prometheus.NewDesc(
		prometheus.BuildFQName("toolgate", "sink", "spool_ship_errors_total"),
		"Failed attempts to ship a spool segment to the destination.",
		nil, nil)
	descSpoolShipped = prometheus.NewDesc(
		prometheus.BuildFQName("toolgate", "sink", "spool_shipped_events_total"),
		"Events the destination acknowledged from the spool.",
		nil, nil)
	descSpoolLastSuccess = prometheus.NewDesc(
		prometheus.BuildFQName("toolgate", "sink", "spool_last_ship_success_timestamp_seconds"),
		"Unix time the destination last acknowledged a spool segment; 0 if never since start.",
		nil, nil)
	descSpoolDiskFree = prometheus.NewDesc(
		prometheus.BuildFQName("toolgate", "sink", "spool_disk_free_bytes"),
		"Free bytes of the spool directory's file system, read every second.",
		nil, nil)
	descSpoolLowSpace = prometheus.NewDesc(
		prometheus.BuildFQName("toolgate", "sink", "spool_low_space"),
		"1 while the spool's file system has less than events.spool.min_free_bytes free (the spool has shed its slack), else 0.",
		nil, nil)
)

// Spool is a prometheus.Collector; register it in the binary's registry.
var _ prometheus.Collector = (*Spool)(nil)

// Describe sends the descriptions of the metrics Collect produces. Together
// with Collect it makes a Spool a prometheus.Collector.
func (s *Spool) Describe(ch chan<- *prometheus.Desc) {
	ch <- descSpoolBytes
	ch <- descSpoolSegments
	ch <- descSpoolPending
	ch <- descSpoolOldest
	ch <- descSpoolDroppedEvents
	ch <- descSpoolDroppedSegments
	ch <- descSpoolCorrupt
	ch <- descSpoolTorn
	ch <- descSpoolShipErrors
	ch <- descSpoolShipped
	ch <- descSpoolLastSuccess
	ch <- descSpoolDiskFree
	ch <- descSpoolLowSpace
}

// Collect sends the spool's current metrics: the gauges
// toolgate_sink_spool_bytes, _segments, _pending_events,
// _oldest_pending_seconds and _last_ship_success_timestamp_seconds, and
// the counters toolgate_sink_spool_dropped_events_total{reason},
// _dropped_segments_total{reason}, _corrupt_segments_total,
// _torn_records_total, _ship_errors_total and _shipped_events_total, and
// the gauges _disk_free_bytes and _low_space.
func (s *Spool) Collect(ch chan<- prometheus.Metric) {
	st := s.Status()
	var oldest, last float64
	if !st.OldestPending.IsZero() {
		oldest = max(0, s.opts.now().Sub(st.OldestPending).Seconds())
	}
	if !st.LastShipSuccess.IsZero() {
		last = float64(st.LastShipSuccess.UnixNano()) / 1e9
	}
	ch <- prometheus.MustNewConstMetric(descSpoolBytes, prometheus.GaugeValue, float64(st.Bytes))
	ch <- prometheus.MustNewConstMetric(descSpoolSegments, prometheus.GaugeValue, float64(st.Segments))
	ch <- prometheus.MustNewConstMetric(descSpoolPending, prometheus.GaugeValue, float64(st.PendingEvents))
	ch <- prometheus.MustNewConstMetric(descSpoolOldest, prometheus.GaugeValue, oldest)
	ch <- prometheus.MustNewConstMetric(descSpoolDroppedEvents, prometheus.CounterValue, float64(st.DroppedEvents), DropBudget)
	ch <- prometheus.MustNewConstMetric(descSpoolDroppedSegments, prometheus.CounterValue, float64(st.DroppedSegments), DropBudget)
	ch <- prometheus.MustNewConstMetric(descSpoolCorrupt, prometheus.CounterValue, float64(st.CorruptSegments))
	ch <- prometheus.MustNewConstMetric(descSpoolTorn, prometheus.CounterValue, float64(st.TornRecords))
	ch <- prometheus.MustNewConstMetric(descSpoolShipErrors, prometheus.CounterValue, float64(st.ShipErrors))
	ch <- prometheus.MustNewConstMetric(descSpoolShipped, prometheus.CounterValue, float64(st.ShippedEvents))
	ch <- prometheus.MustNewConstMetric(descSpoolLastSuccess, prometheus.GaugeValue, last)
	ch <- prometheus.MustNewConstMetric(descSpoolDiskFree, prometheus.GaugeValue, float64(st.DiskFreeBytes))
	low := 0.0
	if st.LowSpace {
		low = 1
	}
	ch <- prometheus.MustNewConstMetric(descSpoolLowSpace, prometheus.GaugeValue, low)
}
