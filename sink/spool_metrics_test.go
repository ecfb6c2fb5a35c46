package sink

import (
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestSpoolCollector(t *testing.T) {
	var clock atomic.Int64
	clock.Store(spoolEpoch.Add(time.Minute).UnixNano())
	opts := spoolOptions{now: func() time.Time { return time.Unix(0, clock.Load()).UTC() }, maxEventBytes: maxEventBytes}
	// One segment per batch; after its first failure the shipper waits an
	// hour on a clock that stands still, so only Close ships again.
	cfg := SpoolConfig{Dir: t.TempDir(), SegmentBytes: 1, SegmentAge: time.Hour, RetryMin: time.Hour, RetryMax: time.Hour}
	dst := &testDest{err: errors.New("down")}
	s := openTestSpoolOpts(t, cfg, dst, nil, opts)
	writeSpool(t, s, spoolBatch(0, 3))
	waitFor(t, "the first failure", func() bool { return s.Status().ShipErrors == 1 })
	writeSpool(t, s, spoolBatch(3, 2))

	bytes := recordSize(t, spoolBatch(0, 3)) + recordSize(t, spoolBatch(3, 2))
	want := fmt.Sprintf(`
# HELP toolgate_sink_spool_bytes Bytes of segment files waiting in the spool, the open one included.
# TYPE toolgate_sink_spool_bytes gauge
toolgate_sink_spool_bytes %d
# HELP toolgate_sink_spool_corrupt_segments_total Spool segments found with damaged records and copied to the corrupt directory.
# TYPE toolgate_sink_spool_corrupt_segments_total counter
toolgate_sink_spool_corrupt_segments_total 0
# HELP toolgate_sink_spool_dropped_events_total Events the spool dropped, by reason: budget (oldest segments dropped to stay within max_bytes).
# TYPE toolgate_sink_spool_dropped_events_total counter
toolgate_sink_spool_dropped_events_total{reason="budget"} 0
# HELP toolgate_sink_spool_dropped_segments_total Segments the spool dropped, by reason: budget.
# TYPE toolgate_sink_spool_dropped_segments_total counter
toolgate_sink_spool_dropped_segments_total{reason="budget"} 0
# HELP toolgate_sink_spool_last_ship_success_timestamp_seconds Unix time the destination last acknowledged a spool segment; 0 if never since start.
# TYPE toolgate_sink_spool_last_ship_success_timestamp_seconds gauge
toolgate_sink_spool_last_ship_success_timestamp_seconds 0
# HELP toolgate_sink_spool_oldest_pending_seconds Age of the first event of the oldest pending spool segment: how far behind shipping is; 0 when nothing is pending.
# TYPE toolgate_sink_spool_oldest_pending_seconds gauge
toolgate_sink_spool_oldest_pending_seconds 60
# HELP toolgate_sink_spool_pending_events Events on disk in the spool, not yet acknowledged by the destination.
# TYPE toolgate_sink_spool_pending_events gauge
toolgate_sink_spool_pending_events 5
# HELP toolgate_sink_spool_segments Segment files waiting in the spool, the open one included.
# TYPE toolgate_sink_spool_segments gauge
toolgate_sink_spool_segments 2
# HELP toolgate_sink_spool_ship_errors_total Failed attempts to ship a spool segment to the destination.
# TYPE toolgate_sink_spool_ship_errors_total counter
toolgate_sink_spool_ship_errors_total 1
# HELP toolgate_sink_spool_shipped_events_total Events the destination acknowledged from the spool.
# TYPE toolgate_sink_spool_shipped_events_total counter
toolgate_sink_spool_shipped_events_total 0
# HELP toolgate_sink_spool_torn_records_total Spool records cut short by a crash mid-write and truncated away.
# TYPE toolgate_sink_spool_torn_records_total counter
toolgate_sink_spool_torn_records_total 0
`, bytes)
	// The disk's free space (spool_disk_free_bytes, spool_low_space) is
	// the machine's: those two are counted, not compared.
	if err := testutil.CollectAndCompare(s, strings.NewReader(want),
		"toolgate_sink_spool_bytes", "toolgate_sink_spool_segments", "toolgate_sink_spool_pending_events",
		"toolgate_sink_spool_oldest_pending_seconds", "toolgate_sink_spool_dropped_events_total",
		"toolgate_sink_spool_dropped_segments_total", "toolgate_sink_spool_corrupt_segments_total",
		"toolgate_sink_spool_torn_records_total", "toolgate_sink_spool_ship_errors_total",
		"toolgate_sink_spool_shipped_events_total", "toolgate_sink_spool_last_ship_success_timestamp_seconds"); err != nil {
		t.Errorf("while the destination is down: %v", err)
	}
	if got := testutil.CollectAndCount(s); got != 13 {
		t.Errorf("CollectAndCount = %d, want 13", got)
	}
	problems, err := testutil.CollectAndLint(s)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}

	// The destination is back; Close ships both segments.
	dst.setErr(nil)
	clock.Add(int64(30 * time.Second))
	closeSpool(t, s)
	shippedAt := spoolEpoch.Add(90 * time.Second).Unix()
	want = fmt.Sprintf(`
# HELP toolgate_sink_spool_bytes Bytes of segment files waiting in the spool, the open one included.
# TYPE toolgate_sink_spool_bytes gauge
toolgate_sink_spool_bytes 0
# HELP toolgate_sink_spool_last_ship_success_timestamp_seconds Unix time the destination last acknowledged a spool segment; 0 if never since start.
# TYPE toolgate_sink_spool_last_ship_success_timestamp_seconds gauge
toolgate_sink_spool_last_ship_success_timestamp_seconds %d
# HELP toolgate_sink_spool_oldest_pending_seconds Age of the first event of the oldest pending spool segment: how far behind shipping is; 0 when nothing is pending.
# TYPE toolgate_sink_spool_oldest_pending_seconds gauge
toolgate_sink_spool_oldest_pending_seconds 0
# HELP toolgate_sink_spool_pending_events Events on disk in the spool, not yet acknowledged by the destination.
# TYPE toolgate_sink_spool_pending_events gauge
toolgate_sink_spool_pending_events 0
# HELP toolgate_sink_spool_segments Segment files waiting in the spool, the open one included.
# TYPE toolgate_sink_spool_segments gauge
toolgate_sink_spool_segments 0
# HELP toolgate_sink_spool_ship_errors_total Failed attempts to ship a spool segment to the destination.
# TYPE toolgate_sink_spool_ship_errors_total counter
toolgate_sink_spool_ship_errors_total 1
# HELP toolgate_sink_spool_shipped_events_total Events the destination acknowledged from the spool.
# TYPE toolgate_sink_spool_shipped_events_total counter
toolgate_sink_spool_shipped_events_total 5
`, shippedAt)
	if err := testutil.CollectAndCompare(s, strings.NewReader(want),
		"toolgate_sink_spool_bytes", "toolgate_sink_spool_last_ship_success_timestamp_seconds",
		"toolgate_sink_spool_oldest_pending_seconds", "toolgate_sink_spool_pending_events",
		"toolgate_sink_spool_segments", "toolgate_sink_spool_ship_errors_total",
		"toolgate_sink_spool_shipped_events_total"); err != nil {
		t.Errorf("after Close: %v", err)
	}
}
