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
	q := startQueueWith(t, w, QueueConfig{Capacity: 128, BatchSize: 16, MaxWait: time.Minute}, nil, fastRetry())
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
# HELP toolgate_sink_events_written_total Events the sink destination stored.
# TYPE toolgate_sink_events_written_total counter
toolgate_sink_events_written_total 3
# HELP toolgate_sink_groups_written_total Group writes of the sink queue; each takes every event recorded while the previous one was under way.
# TYPE toolgate_sink_groups_written_total counter
toolgate_sink_groups_written_total 4
# HELP toolgate_sink_inline_groups_total Groups a call wrote itself, finding no write under way; counted in groups_written_total too.
# TYPE toolgate_sink_inline_groups_total counter
toolgate_sink_inline_groups_total 0
# HELP toolgate_sink_queue_capacity Events the sink queue holds before a call waits for room (at most events.queue.max_wait) and then drops.
# TYPE toolgate_sink_queue_capacity gauge
toolgate_sink_queue_capacity 128
# HELP toolgate_sink_queue_depth Events in the sink queue's memory: waiting for the next group write, or in the one under way.
# TYPE toolgate_sink_queue_depth gauge
toolgate_sink_queue_depth 0
# HELP toolgate_sink_syncs_total Fsyncs of written events, by outcome: ok or error.
# TYPE toolgate_sink_syncs_total counter
toolgate_sink_syncs_total{outcome="error"} 0
toolgate_sink_syncs_total{outcome="ok"} 0
# HELP toolgate_sink_write_failing 1 while the last write of events failed (a full disk, say) and none succeeded since: events recorded now are not kept, and under events.on_write_failure: refuse calls are refused.
# TYPE toolgate_sink_write_failing gauge
toolgate_sink_write_failing 1
# HELP toolgate_sink_wait_timeouts_total Calls answered before their event was written, because the write took longer than events.queue.max_wait.
# TYPE toolgate_sink_wait_timeouts_total counter
toolgate_sink_wait_timeouts_total 0
# HELP toolgate_sink_write_errors_total Failed writes to the sink destination, retries included.
# TYPE toolgate_sink_write_errors_total counter
toolgate_sink_write_errors_total 3
`
	if err := testutil.CollectAndCompare(q, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
	if got := testutil.CollectAndCount(q); got != 14 {
		t.Errorf("CollectAndCount = %d, want 14", got)
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
	q := startQueue(t, w, QueueConfig{Capacity: 4, BatchSize: 1, Async: true}, nil)
	q.Record(ev(0))
	<-w.entered
	for i := 1; i <= 6; i++ {
		q.Record(ev(i))
	}
	const want = `
# HELP toolgate_sink_queue_depth Events in the sink queue's memory: waiting for the next group write, or in the one under way.
# TYPE toolgate_sink_queue_depth gauge
toolgate_sink_queue_depth 4
# HELP toolgate_sink_events_dropped_total Events lost by the sink, by reason: queue_full, write_error or shutdown.
# TYPE toolgate_sink_events_dropped_total counter
toolgate_sink_events_dropped_total{reason="queue_full"} 3
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
