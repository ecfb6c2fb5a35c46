package sink

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestQueueCollector(t *testing.T) {
	// A writer that refuses batches holding a "bad" event.
	w := writerFunc(func(_ context.Context, events []Event) error {
		for _, e := range events {
			if e.Tool == "bad" {
				return errors.New("refused")
			}
		}
		return nil
	})
	q := newQueue(w, QueueConfig{Capacity: 128, BatchSize: 16, FlushInterval: time.Hour}, nil, fastRetry())
	ctx := testCtx(t)
	for i := range 3 {
		q.Record(ev(i))
	}
	if err := q.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	bad := ev(3)
	bad.Tool = "bad"
	q.Record(bad)
	if err := q.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	closeQueue(t, q)
	q.Record(ev(4))
	q.Record(ev(5))

	const want = `
# HELP toolgate_sink_events_dropped_total Events lost by the sink, by reason: queue_full, write_error or shutdown.
# TYPE toolgate_sink_events_dropped_total counter
toolgate_sink_events_dropped_total{reason="queue_full"} 0
toolgate_sink_events_dropped_total{reason="shutdown"} 2
toolgate_sink_events_dropped_total{reason="write_error"} 1
# HELP toolgate_sink_events_recorded_total Events passed to the sink queue, accepted or dropped.
# TYPE toolgate_sink_events_recorded_total counter
toolgate_sink_events_recorded_total 6
# HELP toolgate_sink_events_spilled_total Events a full queue handed straight to the spool instead of dropping them.
# TYPE toolgate_sink_events_spilled_total counter
toolgate_sink_events_spilled_total 0
# HELP toolgate_sink_events_written_total Events the sink destination stored.
# TYPE toolgate_sink_events_written_total counter
toolgate_sink_events_written_total 3
# HELP toolgate_sink_queue_capacity Events the sink queue holds before it drops.
# TYPE toolgate_sink_queue_capacity gauge
toolgate_sink_queue_capacity 128
# HELP toolgate_sink_queue_depth Events waiting in the sink queue, not counting the batch being written.
# TYPE toolgate_sink_queue_depth gauge
toolgate_sink_queue_depth 0
# HELP toolgate_sink_write_errors_total Failed writes to the sink destination, retries included.
# TYPE toolgate_sink_write_errors_total counter
toolgate_sink_write_errors_total 3
`
	if err := testutil.CollectAndCompare(q, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
	if got := testutil.CollectAndCount(q); got != 9 {
		t.Errorf("CollectAndCount = %d, want 9", got)
	}
	problems, err := testutil.CollectAndLint(q)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
}

func TestQueueCollectorDepth(t *testing.T) {
	w := newStuckWriter(false)
	q := NewQueue(w, QueueConfig{Capacity: 4, BatchSize: 1, FlushInterval: time.Hour}, nil)
	q.Record(ev(0))
	<-w.entered
	for i := 1; i <= 6; i++ {
		q.Record(ev(i))
	}
	const want = `
# HELP toolgate_sink_queue_depth Events waiting in the sink queue, not counting the batch being written.
# TYPE toolgate_sink_queue_depth gauge
toolgate_sink_queue_depth 4
# HELP toolgate_sink_events_dropped_total Events lost by the sink, by reason: queue_full, write_error or shutdown.
# TYPE toolgate_sink_events_dropped_total counter
toolgate_sink_events_dropped_total{reason="queue_full"} 2
toolgate_sink_events_dropped_total{reason="shutdown"} 0
toolgate_sink_events_dropped_total{reason="write_error"} 0
`
	if err := testutil.CollectAndCompare(q, strings.NewReader(want),
		"toolgate_sink_queue_depth", "toolgate_sink_events_dropped_total"); err != nil {
		t.Error(err)
	}
	close(w.release)
	closeQueue(t, q)
}
