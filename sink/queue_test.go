package sink

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/toolgate/toolgate/internal/section"
	"github.com/toolgate/toolgate/internal/testutil"
)

// memWriter stores every batch it is given.
type memWriter struct {
	mu       sync.Mutex
	events   []Event
	calls    int
	maxBatch int
}

func (w *memWriter) WriteEvents(_ context.Context, events []Event) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.calls++
	w.maxBatch = max(w.maxBatch, len(events))
	w.events = append(w.events, events...)
	return nil
}

func (w *memWriter) snapshot() []Event {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]Event(nil), w.events...)
}

// stuckWriter blocks every call until release is closed (or, if honorCtx,
// until the call's context ends), then stores the batch.
type stuckWriter struct {
	memWriter
	honorCtx bool
	entered  chan struct{} // one value per call, as the call starts
	release  chan struct{}
}

func newStuckWriter(honorCtx bool) *stuckWriter {
	return &stuckWriter{honorCtx: honorCtx, entered: make(chan struct{}, 1000), release: make(chan struct{})}
}

func (w *stuckWriter) WriteEvents(ctx context.Context, events []Event) error {
	w.entered <- struct{}{}
	done := ctx.Done()
	if !w.honorCtx {
		done = nil
	}
	select {
	case <-w.release:
	case <-done:
		return ctx.Err()
	}
	return w.memWriter.WriteEvents(ctx, events)
}

// appenderFunc adapts a function to Appender, so that callers may write
// their own groups.
type appenderFunc func(ctx context.Context, events []Event) error

func (f appenderFunc) WriteEvents(ctx context.Context, events []Event) error { return f(ctx, events) }
func (appenderFunc) AppendsLocally()                                         {}

// writerFunc adapts a function to Writer.
type writerFunc func(ctx context.Context, events []Event) error

func (f writerFunc) WriteEvents(ctx context.Context, events []Event) error { return f(ctx, events) }

func testLogger(buf *testutil.SyncBuffer) *slog.Logger {
	return slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// fastRetry keeps the retry policy but with millisecond waits.
func fastRetry() queueOptions {
	o := defaultQueueOptions()
	o.backoffMin, o.backoffMax = time.Millisecond, 5*time.Millisecond
	return o
}

func ev(i int) Event {
	return Event{
		EventID: fmt.Sprintf("e%06d", i),
		Time:    time.Date(2025, 11, 21, 9, 0, 0, i*1000, time.UTC),
		Tool:    "pubmed_search",
		Session: "secret-session-id",
	}
}

func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func closeQueue(t *testing.T, q *Queue) {
	t.Helper()
	if err := q.Close(testCtx(t)); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

// waitFor polls cond until it holds or 10 seconds pass.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestQueueConfigValidate(t *testing.T) {
	tests := []struct {
		name    string
		in      QueueConfig
		want    QueueConfig
		wantErr string
	}{
		{name: "zero gets defaults", in: QueueConfig{},
			want: QueueConfig{Capacity: 65536, BatchSize: 1000, MaxWait: 50 * time.Millisecond, SyncInterval: 100 * time.Millisecond}},
		{name: "small capacity caps default batch", in: QueueConfig{Capacity: 100},
			want: QueueConfig{Capacity: 100, BatchSize: 100, MaxWait: 50 * time.Millisecond, SyncInterval: 100 * time.Millisecond}},
		{name: "async gathers for 100ms by default", in: QueueConfig{Async: true},
			want: QueueConfig{Capacity: 65536, BatchSize: 1000, FlushInterval: 100 * time.Millisecond, MaxWait: 50 * time.Millisecond, Async: true, SyncInterval: 100 * time.Millisecond}},
		{name: "explicit values kept", in: QueueConfig{Capacity: 10, BatchSize: 10, FlushInterval: 5 * time.Millisecond, MaxWait: time.Second, Async: true, SyncInterval: time.Millisecond},
			want: QueueConfig{Capacity: 10, BatchSize: 10, FlushInterval: 5 * time.Millisecond, MaxWait: time.Second, Async: true, SyncInterval: time.Millisecond}},
		{name: "negative capacity", in: QueueConfig{Capacity: -1}, wantErr: "queue.capacity: must not be negative, got -1"},
		{name: "negative batch", in: QueueConfig{BatchSize: -5}, wantErr: "queue.batch_size: must not be negative, got -5"},
		{name: "negative interval", in: QueueConfig{FlushInterval: -time.Second}, wantErr: "queue.flush_interval: must not be negative, got -1s"},
		{name: "negative wait", in: QueueConfig{MaxWait: -time.Second}, wantErr: "queue.max_wait: must not be negative, got -1s"},
		{name: "negative sync", in: QueueConfig{SyncInterval: -time.Second}, wantErr: "queue.sync_interval: must not be negative, got -1s"},
		{name: "batch above capacity", in: QueueConfig{Capacity: 10, BatchSize: 11},
			wantErr: "queue.batch_size: must not exceed queue.capacity (10), got 11"},
		{name: "batch above default capacity", in: QueueConfig{BatchSize: 70000},
			wantErr: "queue.batch_size: must not exceed queue.capacity (65536), got 70000"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.in
			err := got.Validate()
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("Validate() error = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Validate() error = %v", err)
			}
			if got != tt.want {
				t.Errorf("Validate() = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestQueueConfigYAML(t *testing.T) {
	var got QueueConfig
	in := "capacity: 4096\nbatch_size: 500\nflush_interval: 500ms\nmax_wait: 5ms\nasync: true\nsync_interval: 1s\n"
	if err := yaml.Unmarshal([]byte(in), &got); err != nil {
		t.Fatalf("yaml.Unmarshal: %v", err)
	}
	want := QueueConfig{Capacity: 4096, BatchSize: 500, FlushInterval: 500 * time.Millisecond, MaxWait: 5 * time.Millisecond, Async: true, SyncInterval: time.Second}
	if got != want {
		t.Errorf("decoded %+v, want %+v", got, want)
	}
}

// startQueue is NewQueue for a configuration the test knows is valid.
func startQueue(tb testing.TB, w Writer, cfg QueueConfig, log *slog.Logger) *Queue {
	tb.Helper()
	return startQueueWith(tb, w, cfg, log, defaultQueueOptions())
}

// startQueueWith is startQueue with the test's retry policy and clock.
func startQueueWith(tb testing.TB, w Writer, cfg QueueConfig, log *slog.Logger, opts queueOptions) *Queue {
	tb.Helper()
	q, err := newQueue(w, cfg, log, opts)
	if err != nil {
		tb.Fatalf("NewQueue: %v", err)
	}
	return q
}

func TestNewQueueRefusesBadConfig(t *testing.T) {
	q, err := NewQueue(&memWriter{}, QueueConfig{Capacity: -1}, nil)
	var fe *section.Error
	if q != nil || !errors.As(err, &fe) || fe.Path != "queue.capacity" {
		t.Fatalf("NewQueue(capacity -1) = %v, %v; want nil and a section error at queue.capacity", q, err)
	}
	if _, err := NewQueue(nil, QueueConfig{}, nil); !errors.Is(err, ErrNilWriter) {
		t.Errorf("NewQueue(nil writer) error = %v, want ErrNilWriter", err)
	}
}

func TestQueueDeliversInOrder(t *testing.T) {
	const n = 5000
	tests := []struct {
		name string
		cfg  QueueConfig
	}{
		{name: "batch 1", cfg: QueueConfig{Capacity: n, BatchSize: 1}},
		{name: "batch 7", cfg: QueueConfig{Capacity: n, BatchSize: 7}},
		{name: "batch 1000", cfg: QueueConfig{Capacity: n, BatchSize: 1000}},
		{name: "async batch 7", cfg: QueueConfig{Capacity: n, BatchSize: 7, Async: true}},
		{name: "async batch 1000", cfg: QueueConfig{Capacity: n, BatchSize: 1000, Async: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := &memWriter{}
			q := startQueue(t, w, tt.cfg, nil)
			for i := range n {
				if !q.Record(ev(i)) {
					t.Fatalf("Record(%d) = false, want true", i)
				}
			}
			closeQueue(t, q)
			got := w.snapshot()
			if len(got) != n {
				t.Fatalf("writer got %d events, want %d", len(got), n)
			}
			for i, e := range got {
				if want := ev(i).EventID; e.EventID != want {
					t.Fatalf("event %d = %s, want %s", i, e.EventID, want)
				}
			}
			if w.maxBatch > tt.cfg.BatchSize {
				t.Errorf("largest batch = %d, want <= %d", w.maxBatch, tt.cfg.BatchSize)
			}
			s := q.Stats()
			if s.Recorded != n || s.Written != n || s.Dropped != 0 || s.Depth != 0 {
				t.Errorf("Stats() = %+v, want %d recorded and written, none dropped or queued", s, n)
			}
		})
	}
}

// TestQueueRecordWaitsForWrite checks the write-ahead promise: when
// Record returns, the Writer has stored the event, whether calls come one
// at a time or many at once (then several share one group write).
func TestQueueRecordWaitsForWrite(t *testing.T) {
	w := &memWriter{}
	q := startQueue(t, w, QueueConfig{MaxWait: time.Minute}, nil)
	defer closeQueue(t, q)
	has := func(id string) bool {
		for _, e := range w.snapshot() {
			if e.EventID == id {
				return true
			}
		}
		return false
	}
	for i := range 20 {
		if !q.Record(ev(i)) {
			t.Fatalf("Record(%d) = false", i)
		}
		if !has(ev(i).EventID) {
			t.Fatalf("Record(%d) returned before the Writer had the event", i)
		}
	}
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Go(func() {
			for i := range 50 {
				e := ev(i)
				e.EventID = fmt.Sprintf("g%d-%d", g, i)
				q.Record(e)
				if !has(e.EventID) {
					t.Errorf("Record(%s) returned before the Writer had the event", e.EventID)
					return
				}
			}
		})
	}
	wg.Wait()
	s := q.Stats()
	if s.WaitTimeouts != 0 || s.Written != 20+16*50 {
		t.Errorf("Stats() = %+v, want %d written and no wait timeouts", s, 20+16*50)
	}
	if s.Groups >= s.Written {
		t.Logf("no two concurrent calls shared a group: %d groups for %d events", s.Groups, s.Written)
	}
}

// TestQueueRecordBounded checks that a Writer that never returns holds a
// call up for MaxWait and no longer: first while its event waits to be
// written (accepted, counted as a wait timeout), then, once the queue is
// full, while it waits for room (dropped as queue_full).
func TestQueueRecordBounded(t *testing.T) {
	const capacity, extra = 4, 3
	const maxWait = 20 * time.Millisecond
	w := newStuckWriter(false)
	q := startQueue(t, w, QueueConfig{Capacity: capacity, BatchSize: 1, MaxWait: maxWait}, nil)
	timed := func(i int) (bool, time.Duration) {
		start := time.Now()
		ok := q.Record(ev(i))
		return ok, time.Since(start)
	}
	// The first event is taken by the writer goroutine, whose Writer blocks.
	for i := range capacity {
		ok, d := timed(i)
		if !ok {
			t.Fatalf("Record(%d) = false with room in the queue", i)
		}
		if d < maxWait || d > maxWait+2*time.Second {
			t.Errorf("Record(%d) took %v, want about MaxWait %v", i, d, maxWait)
		}
	}
	<-w.entered
	if got := q.Stats().Depth; got != capacity {
		t.Fatalf("Depth = %d, want %d", got, capacity)
	}
	for i := range extra {
		ok, d := timed(capacity + i)
		if ok {
			t.Fatalf("Record on a full queue = true, want false")
		}
		if d < maxWait || d > maxWait+2*time.Second {
			t.Errorf("Record on a full queue took %v, want about MaxWait %v", d, maxWait)
		}
	}
	s := q.Stats()
	if s.DroppedQueueFull != extra || s.Dropped != extra || s.WaitTimeouts != capacity {
		t.Errorf("Stats() = %+v; want %d dropped queue_full, %d wait timeouts", s, extra, capacity)
	}
	close(w.release)
	closeQueue(t, q)
	s = q.Stats()
	if s.Written != capacity {
		t.Errorf("Written = %d, want %d", s.Written, capacity)
	}
	if want := uint64(capacity + extra); s.Recorded != want || s.Written+s.Dropped != want {
		t.Errorf("Stats() = %+v, want recorded %d = written + dropped", s, want)
	}
}

// TestQueueAsyncNeverWaits checks Async: Record returns at once, even on a
// full queue with a Writer that never returns.
func TestQueueAsyncNeverWaits(t *testing.T) {
	const capacity, extra = 16, 5
	w := newStuckWriter(false)
	q := startQueue(t, w, QueueConfig{Capacity: capacity, BatchSize: 1, MaxWait: time.Hour, Async: true}, nil)
	start := time.Now()
	for i := range capacity {
		if !q.Record(ev(i)) {
			t.Fatalf("Record(%d) = false with room in the queue", i)
		}
	}
	<-w.entered
	for i := range extra {
		if q.Record(ev(capacity + i)) {
			t.Fatalf("Record on a full queue = true, want false")
		}
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("%d Records took %v", capacity+extra, d)
	}
	if s := q.Stats(); s.DroppedQueueFull != extra || s.WaitTimeouts != 0 {
		t.Errorf("Stats() = %+v; want %d dropped queue_full, no wait timeouts", s, extra)
	}
	close(w.release)
	closeQueue(t, q)
	if s := q.Stats(); s.Written != capacity {
		t.Errorf("Written = %d, want %d", s.Written, capacity)
	}
}

// syncWriter is a memWriter that counts Sync calls.
type syncWriter struct {
	memWriter
	syncs atomic.Int64
}

func (w *syncWriter) Sync() error { w.syncs.Add(1); return nil }

// TestQueueSyncs checks that a Syncer is synced while events are written
// (every SyncInterval) and not while none are, and once more at Close.
func TestQueueSyncs(t *testing.T) {
	w := &syncWriter{}
	q := startQueue(t, w, QueueConfig{SyncInterval: time.Millisecond}, nil)
	q.Record(ev(0))
	waitFor(t, "a sync after a write", func() bool { return w.syncs.Load() >= 1 })
	time.Sleep(20 * time.Millisecond)
	idle := w.syncs.Load()
	time.Sleep(20 * time.Millisecond)
	if got := w.syncs.Load(); got != idle {
		t.Errorf("%d syncs while nothing was written, want 0", got-idle)
	}
	q.Record(ev(1))
	closeQueue(t, q)
	if s := q.Stats(); s.Syncs != uint64(w.syncs.Load()) || s.Syncs < 2 || s.SyncErrors != 0 {
		t.Errorf("Stats() = %+v, writer synced %d times; want at least 2, all counted", s, w.syncs.Load())
	}
}

func TestQueueCloseFlushes(t *testing.T) {
	w := &memWriter{}
	q := startQueue(t, w, QueueConfig{BatchSize: 1000}, nil)
	for i := range 10 {
		q.Record(ev(i))
	}
	closeQueue(t, q)
	if got := len(w.snapshot()); got != 10 {
		t.Errorf("after Close the writer has %d events, want 10", got)
	}
	if q.Record(ev(10)) {
		t.Errorf("Record after Close = true, want false")
	}
	if err := q.Flush(testCtx(t)); !errors.Is(err, ErrClosed) {
		t.Errorf("Flush after Close = %v, want ErrClosed", err)
	}
	if err := q.Close(testCtx(t)); err != nil {
		t.Errorf("second Close = %v, want nil", err)
	}
	// Each Record waited for its own write: ten groups.
	want := QueueStats{Capacity: DefaultQueueCapacity, Recorded: 11, Written: 10, Dropped: 1, DroppedShutdown: 1, Groups: 10}
	if got := q.Stats(); got != want {
		t.Errorf("Stats() = %+v, want %+v", got, want)
	}
}

func TestQueueFlush(t *testing.T) {
	w := &memWriter{}
	q := startQueue(t, w, QueueConfig{BatchSize: 1000}, nil)
	defer closeQueue(t, q)
	for round := 1; round <= 3; round++ {
		for i := range 5 {
			q.Record(ev(i))
		}
		if err := q.Flush(testCtx(t)); err != nil {
			t.Fatalf("Flush: %v", err)
		}
		if got, want := len(w.snapshot()), 5*round; got != want {
			t.Errorf("after Flush %d the writer has %d events, want %d", round, got, want)
		}
	}
	// Flush on an empty queue returns at once.
	if err := q.Flush(testCtx(t)); err != nil {
		t.Errorf("Flush on an empty queue: %v", err)
	}
}

func TestQueueFlushContext(t *testing.T) {
	w := newStuckWriter(false)
	q := startQueue(t, w, QueueConfig{BatchSize: 1}, nil)
	q.Record(ev(0))
	<-w.entered
	q.Record(ev(1))
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	if err := q.Flush(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Flush with a stuck writer = %v, want DeadlineExceeded", err)
	}
	close(w.release)
	closeQueue(t, q)
	if got := len(w.snapshot()); got != 2 {
		t.Errorf("writer got %d events, want 2", got)
	}
}

func TestQueueCloseTimeout(t *testing.T) {
	w := newStuckWriter(true)
	var logs testutil.SyncBuffer
	q := startQueue(t, w, QueueConfig{BatchSize: 1}, testLogger(&logs))
	q.Record(ev(0))
	<-w.entered
	for i := 1; i <= 3; i++ {
		q.Record(ev(i))
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	if err := q.Close(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Close with a stuck writer = %v, want DeadlineExceeded", err)
	}
	<-q.stopped // the Writer saw its context end and returned
	// Every Record gave up after MaxWait; the stuck group went to the
	// Writer once. The writer goroutine may take the group pending behind
	// it before Close drops it (each event is counted by whichever side
	// takes it): then it is a second group, dropped without a write.
	want := QueueStats{Capacity: DefaultQueueCapacity, Recorded: 4, Dropped: 4, DroppedShutdown: 4, Groups: 1, WaitTimeouts: 4}
	got := q.Stats()
	if got.Groups == 2 {
		got.Groups = 1
	}
	if got != want {
		t.Errorf("Stats() = %+v, want %+v (or 2 groups)", q.Stats(), want)
	}
	if n := len(w.entered); n != 0 {
		t.Errorf("the Writer was called %d more times after Close gave up", n)
	}
	if strings.Contains(logs.String(), "secret-session-id") {
		t.Errorf("log holds event contents:\n%s", logs.String())
	}
}

func TestQueueWriteErrors(t *testing.T) {
	const n = 1 // Record waits for its group: one event, one group
	tests := []struct {
		failures        int // calls that fail before calls succeed
		wantWritten     uint64
		wantWriteErrors uint64
		wantDropped     uint64
		wantCalls       int
	}{
		{failures: 0, wantWritten: n, wantWriteErrors: 0, wantDropped: 0, wantCalls: 1},
		{failures: 1, wantWritten: n, wantWriteErrors: 1, wantDropped: 0, wantCalls: 2},
		{failures: 2, wantWritten: n, wantWriteErrors: 2, wantDropped: 0, wantCalls: 3},
		{failures: 3, wantWritten: 0, wantWriteErrors: 3, wantDropped: n, wantCalls: 3},
		{failures: 100, wantWritten: 0, wantWriteErrors: 3, wantDropped: n, wantCalls: 3},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%d failures", tt.failures), func(t *testing.T) {
			var calls int
			var stored []Event
			w := writerFunc(func(_ context.Context, events []Event) error {
				calls++
				if calls <= tt.failures {
					return errors.New("disk on fire")
				}
				stored = append(stored, events...)
				return nil
			})
			var logs testutil.SyncBuffer
			q := startQueueWith(t, w, QueueConfig{BatchSize: 1000, MaxWait: time.Minute}, testLogger(&logs), fastRetry())
			for i := range n {
				q.Record(ev(i))
			}
			if err := q.Flush(testCtx(t)); err != nil {
				t.Fatalf("Flush: %v", err)
			}
			closeQueue(t, q)
			s := q.Stats()
			if s.Written != tt.wantWritten || s.WriteErrors != tt.wantWriteErrors ||
				s.DroppedWriteError != tt.wantDropped || s.Dropped != tt.wantDropped {
				t.Errorf("Stats() = %+v, want written %d, write errors %d, dropped write_error %d",
					s, tt.wantWritten, tt.wantWriteErrors, tt.wantDropped)
			}
			if calls != tt.wantCalls {
				t.Errorf("writer called %d times, want %d", calls, tt.wantCalls)
			}
			if uint64(len(stored)) != tt.wantWritten {
				t.Errorf("writer stored %d events, want %d", len(stored), tt.wantWritten)
			}
			out := logs.String()
			if tt.failures > 0 && !strings.Contains(out, "disk on fire") {
				t.Errorf("log does not hold the write error:\n%s", out)
			}
			if strings.Contains(out, "secret-session-id") || strings.Contains(out, "e000000") {
				t.Errorf("log holds event contents:\n%s", out)
			}
		})
	}
}

func TestQueueRetryWaits(t *testing.T) {
	// The real policy: two failures wait 100ms and then 200ms.
	var times []time.Time
	w := writerFunc(func(context.Context, []Event) error {
		times = append(times, time.Now())
		if len(times) < 3 {
			return errors.New("not yet")
		}
		return nil
	})
	q := startQueue(t, w, QueueConfig{}, nil)
	q.Record(ev(0))
	closeQueue(t, q)
	if len(times) != 3 {
		t.Fatalf("writer called %d times, want 3", len(times))
	}
	if d := times[1].Sub(times[0]); d < 100*time.Millisecond {
		t.Errorf("first retry after %v, want >= 100ms", d)
	}
	if d := times[2].Sub(times[1]); d < 200*time.Millisecond {
		t.Errorf("second retry after %v, want >= 200ms", d)
	}
}

func TestBackoff(t *testing.T) {
	tests := []struct {
		attempt int
		want    time.Duration
	}{
		{1, 100 * time.Millisecond},
		{2, 200 * time.Millisecond},
		{3, 400 * time.Millisecond},
		{6, 3200 * time.Millisecond},
		{7, 5 * time.Second},
		{50, 5 * time.Second},
	}
	for _, tt := range tests {
		if got := backoff(tt.attempt, retryBackoffMin, retryBackoffMax); got != tt.want {
			t.Errorf("backoff(%d) = %v, want %v", tt.attempt, got, tt.want)
		}
	}
}

func TestQueueWriterPanics(t *testing.T) {
	const n = 1
	tests := []struct {
		name            string
		panics          int
		wantWritten     uint64
		wantWriteErrors uint64
		wantDropped     uint64
	}{
		{name: "once", panics: 1, wantWritten: n, wantWriteErrors: 1},
		{name: "always", panics: 1 << 30, wantWriteErrors: 3, wantDropped: n},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var calls int
			w := writerFunc(func(context.Context, []Event) error {
				calls++
				if calls <= tt.panics {
					panic("writer bug")
				}
				return nil
			})
			var logs testutil.SyncBuffer
			q := startQueueWith(t, w, QueueConfig{MaxWait: time.Minute}, testLogger(&logs), fastRetry())
			for i := range n {
				q.Record(ev(i))
			}
			closeQueue(t, q)
			s := q.Stats()
			if s.Written != tt.wantWritten || s.WriteErrors != tt.wantWriteErrors || s.DroppedWriteError != tt.wantDropped {
				t.Errorf("Stats() = %+v, want written %d, write errors %d, dropped write_error %d",
					s, tt.wantWritten, tt.wantWriteErrors, tt.wantDropped)
			}
			if !strings.Contains(logs.String(), "writer panicked: writer bug") {
				t.Errorf("log does not report the panic:\n%s", logs.String())
			}
		})
	}
}

func TestQueueDropWarning(t *testing.T) {
	var clock atomic.Int64
	clock.Store(time.Date(2025, 11, 21, 9, 0, 0, 0, time.UTC).UnixNano())
	opts := defaultQueueOptions()
	opts.now = func() time.Time { return time.Unix(0, clock.Load()) }

	w := newStuckWriter(false)
	var logs testutil.SyncBuffer
	q := startQueueWith(t, w, QueueConfig{Capacity: 1, BatchSize: 1, Async: true}, testLogger(&logs), opts)
	q.Record(ev(0)) // the group being written fills the queue
	<-w.entered

	warnings := func() []string {
		var out []string
		for line := range strings.Lines(logs.String()) {
			if strings.Contains(line, "queue full") {
				out = append(out, line)
			}
		}
		return out
	}
	for i := range 100 {
		q.Record(ev(2 + i))
	}
	got := warnings()
	if len(got) != 1 || !strings.Contains(got[0], " dropped=1 ") || !strings.Contains(got[0], "dropped_total=1 ") {
		t.Fatalf("after 100 drops in one instant, warnings = %q, want one with dropped=1", got)
	}
	clock.Add(int64(9 * time.Second))
	q.Record(ev(200))
	if got := warnings(); len(got) != 1 {
		t.Fatalf("9s later, %d warnings, want still 1", len(got))
	}
	clock.Add(int64(time.Second))
	q.Record(ev(201))
	got = warnings()
	if len(got) != 2 || !strings.Contains(got[1], " dropped=101 ") || !strings.Contains(got[1], "dropped_total=102 ") {
		t.Fatalf("10s later, warnings = %q, want a second one with dropped=101 dropped_total=102", got)
	}
	if s := q.Stats(); s.DroppedQueueFull != 102 {
		t.Errorf("dropped queue_full = %d, want 102", s.DroppedQueueFull)
	}
	close(w.release)
	closeQueue(t, q)
}

// TestQueueHammer records from many goroutines while others flush and read
// stats, with a Writer that sometimes fails, and checks the accounting.
func TestQueueHammer(t *testing.T) {
	t.Run("writer goroutine", func(t *testing.T) { hammerQueue(t, writes) })
	// An Appender lets callers that find the writer idle write their
	// group themselves: the two kinds of write interleave.
	t.Run("callers write", func(t *testing.T) { hammerQueue(t, appends) })
}

// How hammerQueue's Writer takes events: as a plain Writer or an
// Appender.
const (
	writes = iota
	appends
)

func hammerQueue(t *testing.T, kind int) {
	const producers, perProducer = 8, 5000
	var (
		mu     sync.Mutex
		seen   = map[string]bool{}
		last   = map[int]int{} // producer -> last sequence number stored
		stored uint64
		calls  int
		dupes  int
		order  int
	)
	w := writerFunc(func(_ context.Context, events []Event) error {
		mu.Lock()
		defer mu.Unlock()
		calls++
		if calls%7 == 0 {
			return errors.New("transient")
		}
		for _, e := range events {
			if seen[e.EventID] {
				dupes++
			}
			seen[e.EventID] = true
			var p, i int
			fmt.Sscanf(e.EventID, "p%d-%d", &p, &i)
			if prev, ok := last[p]; ok && i <= prev {
				order++
			}
			last[p] = i
			stored++
		}
		return nil
	})
	var dst Writer = w
	switch kind {
	case appends:
		dst = appenderFunc(w)
	}
	q := startQueueWith(t, dst, QueueConfig{Capacity: 4096, BatchSize: 64}, nil, fastRetry())

	stop := make(chan struct{})
	var helpers sync.WaitGroup
	for range 2 {
		helpers.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				// Each Flush gets its own bound: the whole run may take
				// longer than one on a loaded machine.
				ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
				err := q.Flush(ctx)
				cancel()
				if err != nil {
					t.Errorf("Flush: %v", err)
					return
				}
				s := q.Stats()
				if s.Written+s.Dropped > s.Recorded || s.Depth > s.Capacity {
					t.Errorf("inconsistent snapshot %+v", s)
					return
				}
			}
		})
	}
	var accepted atomic.Uint64
	var producersWG sync.WaitGroup
	for p := range producers {
		producersWG.Go(func() {
			for i := range perProducer {
				e := ev(i)
				e.EventID = fmt.Sprintf("p%d-%d", p, i)
				if q.Record(e) {
					accepted.Add(1)
				}
			}
		})
	}
	producersWG.Wait()
	close(stop)
	helpers.Wait()
	closeQueue(t, q)

	s := q.Stats()
	const total = producers * perProducer
	if s.Recorded != total {
		t.Errorf("Recorded = %d, want %d", s.Recorded, total)
	}
	if s.Written+s.Dropped != s.Recorded {
		t.Errorf("written %d + dropped %d != recorded %d", s.Written, s.Dropped, s.Recorded)
	}
	if s.DroppedShutdown != 0 {
		t.Errorf("dropped shutdown = %d, want 0", s.DroppedShutdown)
	}
	// Record says false for a dropped event, and for one it gave up
	// waiting for (MaxWait) while a write had just failed.
	if got := accepted.Load(); got > total-s.DroppedQueueFull || got < total-s.DroppedQueueFull-s.WaitTimeouts {
		t.Errorf("accepted %d, want recorded - dropped queue_full = %d, less at most the %d wait timeouts", got, total-s.DroppedQueueFull, s.WaitTimeouts)
	}
	if s.Depth != 0 {
		t.Errorf("Depth after Close = %d", s.Depth)
	}
	mu.Lock()
	defer mu.Unlock()
	if stored != s.Written {
		t.Errorf("writer stored %d, Written = %d", stored, s.Written)
	}
	if dupes != 0 {
		t.Errorf("%d duplicates", dupes)
	}
	if order != 0 {
		t.Errorf("%d out-of-order events", order)
	}
	if kind != writes && s.InlineGroups == 0 {
		t.Errorf("no caller wrote its own group: %+v", s)
	}
	if kind == writes && s.InlineGroups != 0 {
		t.Errorf("InlineGroups = %d with a Writer that is not an Appender", s.InlineGroups)
	}
	t.Logf("stats: %+v", s)
}

// TestQueueRecordAllocations checks what Record costs the heap: nothing
// when Async, and one channel per group when it waits (the wait's timer
// comes from a pool).
func TestQueueRecordAllocations(t *testing.T) {
	for _, async := range []bool{true, false} {
		q := startQueue(t, writerFunc(func(context.Context, []Event) error { return nil }), QueueConfig{Async: async}, nil)
		e := ev(1)
		e.ViolationPaths = []string{"/a", "/b"}
		want := 1.0
		if async {
			want = 0
		}
		if allocs := testing.AllocsPerRun(1000, func() { q.Record(e) }); allocs > want {
			t.Errorf("async %v: Record allocates %v times per call, want at most %v", async, allocs, want)
		}
		closeQueue(t, q)
	}
}

func BenchmarkQueueRecord(b *testing.B) {
	q := startQueue(b, writerFunc(func(context.Context, []Event) error { return nil }), QueueConfig{Async: true}, nil)
	e := ev(1)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			q.Record(e)
		}
	})
	b.StopTimer()
	if err := q.Close(context.Background()); err != nil {
		b.Fatal(err)
	}
	s := q.Stats()
	b.ReportMetric(float64(s.Dropped)/float64(s.Recorded), "dropped/op")
}

// BenchmarkQueueToSpool is what the event path costs a call: Record into
// the production queue (default settings) in front of a disk spool, whose
// destination takes everything. serial is one caller (ns/op is the time a
// call spends in Record, its wait for the write included); parallel is 32
// callers. cpu-us/op is the CPU of the whole process per event: Record, the
// writer, the spool's writes, fsyncs and shipping. docs/performance.md
// compares it with the queue before write-ahead group commit.
func BenchmarkQueueToSpool(b *testing.B) {
	cpu := func() time.Duration {
		var ru syscall.Rusage
		syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	for _, kind := range []string{"map", "write"} {
		for _, par := range []int{1, 32} {
			name := kind + "/serial"
			if par > 1 {
				name = kind + "/parallel32"
			}
			b.Run(name, func(b *testing.B) {
				dst := writerFunc(func(context.Context, []Event) error { return nil })
				opts := spoolOptions{now: time.Now, maxEventBytes: maxEventBytes, noMap: kind == "write"}
				s, err := openSpool(SpoolConfig{Dir: b.TempDir(), MaxBytes: 4 << 30}, dst, nil, opts)
				if err != nil {
					b.Fatal(err)
				}
				q := startQueue(b, s, QueueConfig{}, nil)
				e := validatedEvent(1)
				b.ResetTimer()
				cpu0 := cpu()
				if par == 1 {
					for i := 0; i < b.N; i++ {
						q.Record(e)
					}
				} else {
					b.SetParallelism(max(1, par/runtime.GOMAXPROCS(0)))
					b.RunParallel(func(pb *testing.PB) {
						for pb.Next() {
							q.Record(e)
						}
					})
				}
				if err := q.Close(context.Background()); err != nil {
					b.Fatal(err)
				}
				// The spool's Close ships what it holds: the clock and the
				// CPU include the shipping of every event.
				if err := s.Close(context.Background()); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				b.ReportMetric(float64((cpu()-cpu0).Nanoseconds())/1000/float64(b.N), "cpu-us/op")
				st := q.Stats()
				if st.Dropped > 0 {
					b.Fatalf("dropped %d events: %+v", st.Dropped, st)
				}
				if ss := s.Status(); ss.PendingEvents != 0 || ss.ShippedEvents != uint64(b.N) {
					b.Fatalf("spool status after Close %+v, want %d events shipped and none pending", ss, b.N)
				}
				b.ReportMetric(float64(st.Written)/float64(max(1, st.Groups)), "events/group")
			})
		}
	}
}

// TestQueueCallerWritesWhenIdle checks the lone call's path: a call that
// finds the writer idle writes its own event, which is in the file when
// Record returns, with no flush and no writer goroutine involved.
func TestQueueCallerWritesWhenIdle(t *testing.T) {
	path := t.TempDir() + "/events.ndjson"
	f, err := OpenFile(FileConfig{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	q := startQueue(t, f, QueueConfig{}, nil)
	defer closeQueue(t, q)
	for i := range 20 {
		if !q.Record(ev(i)) {
			t.Fatalf("event %d refused", i)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if got := bytes.Count(data, []byte("\n")); got != i+1 {
			t.Fatalf("after Record %d the file holds %d lines, want %d", i, got, i+1)
		}
	}
	// Each call was alone, so each is a group. The first call wrote its
	// own; later ones did too unless a write took over slowWrite on this
	// machine, which sends calls to the writer goroutine for a while.
	if s := q.Stats(); s.InlineGroups < 1 || s.Groups != 20 || s.Written != 20 {
		t.Errorf("stats %+v, want 20 groups, the first written by its caller", s)
	}
}

// TestQueueSlowWriteHandsOver checks that once a caller's own write took
// longer than slowWrite, calls hand their events to the writer goroutine
// (whose wait MaxWait bounds) until its writes are fast again.
func TestQueueSlowWriteHandsOver(t *testing.T) {
	var mw memWriter
	var slow atomic.Int32
	slow.Store(1)
	w := appenderFunc(func(ctx context.Context, events []Event) error {
		if slow.Add(-1) == 0 {
			time.Sleep(5 * slowWrite)
		}
		return mw.WriteEvents(ctx, events)
	})
	q := startQueue(t, w, QueueConfig{MaxWait: 10 * time.Second}, nil)
	defer closeQueue(t, q)
	q.Record(ev(0)) // written by its caller, slowly
	if s := q.Stats(); s.InlineGroups != 1 {
		t.Fatalf("first event: stats %+v, want it written by its caller", s)
	}
	q.Record(ev(1)) // handed over; the writer's fast lone write hands back
	if s := q.Stats(); s.InlineGroups != 1 || s.Written != 2 {
		t.Fatalf("after a slow write: stats %+v, want the next event written by the writer goroutine", s)
	}
	waitFor(t, "callers writing again", func() bool {
		q.Record(ev(2))
		return q.Stats().InlineGroups > 1
	})
	if got := len(mw.snapshot()); uint64(got) != q.Stats().Written {
		t.Errorf("writer holds %d events, Written = %d", got, q.Stats().Written)
	}
}

// TestQueueCallerWriteRetried checks that a call's own write that fails is
// retried by the writer goroutine, in order, and that the call waits for
// it within MaxWait.
func TestQueueCallerWriteRetried(t *testing.T) {
	var mw memWriter
	var calls atomic.Int32
	w := appenderFunc(func(ctx context.Context, events []Event) error {
		if calls.Add(1) == 1 {
			return errors.New("disk hiccup")
		}
		return mw.WriteEvents(ctx, events)
	})
	q := startQueueWith(t, w, QueueConfig{MaxWait: 5 * time.Second}, nil, fastRetry())
	if !q.Record(ev(0)) {
		t.Fatal("event refused")
	}
	if got := mw.snapshot(); len(got) != 1 || got[0].EventID != ev(0).EventID {
		t.Fatalf("when Record returned the writer held %v, want the event (retried)", got)
	}
	q.Record(ev(1))
	closeQueue(t, q)
	s := q.Stats()
	if s.Written != 2 || s.WriteErrors != 1 || s.Dropped != 0 || s.WaitTimeouts != 0 {
		t.Errorf("stats %+v, want 2 written after 1 write error, none dropped", s)
	}
	if got := mw.snapshot(); len(got) != 2 || got[1].EventID != ev(1).EventID {
		t.Errorf("writer holds %v, want both events in order", got)
	}
}
