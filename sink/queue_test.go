package sink

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
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

// writerFunc adapts a function to Writer.
type writerFunc func(ctx context.Context, events []Event) error

func (f writerFunc) WriteEvents(ctx context.Context, events []Event) error { return f(ctx, events) }

// syncBuffer is a bytes.Buffer safe for the queue's goroutine and the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

func testLogger(buf *syncBuffer) *slog.Logger {
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
			want: QueueConfig{Capacity: 65536, BatchSize: 1000, FlushInterval: time.Second}},
		{name: "small capacity caps default batch", in: QueueConfig{Capacity: 100},
			want: QueueConfig{Capacity: 100, BatchSize: 100, FlushInterval: time.Second}},
		{name: "explicit values kept", in: QueueConfig{Capacity: 10, BatchSize: 10, FlushInterval: 5 * time.Millisecond},
			want: QueueConfig{Capacity: 10, BatchSize: 10, FlushInterval: 5 * time.Millisecond}},
		{name: "negative capacity", in: QueueConfig{Capacity: -1}, wantErr: "queue.capacity: must not be negative, got -1"},
		{name: "negative batch", in: QueueConfig{BatchSize: -5}, wantErr: "queue.batch_size: must not be negative, got -5"},
		{name: "negative interval", in: QueueConfig{FlushInterval: -time.Second}, wantErr: "queue.flush_interval: must not be negative, got -1s"},
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
	in := "capacity: 4096\nbatch_size: 500\nflush_interval: 500ms\n"
	if err := yaml.Unmarshal([]byte(in), &got); err != nil {
		t.Fatalf("yaml.Unmarshal: %v", err)
	}
	want := QueueConfig{Capacity: 4096, BatchSize: 500, FlushInterval: 500 * time.Millisecond}
	if got != want {
		t.Errorf("decoded %+v, want %+v", got, want)
	}
}

func TestNewQueuePanicsOnBadConfig(t *testing.T) {
	defer func() {
		r := recover()
		if r == nil || !strings.Contains(fmt.Sprint(r), "queue.capacity") {
			t.Errorf("recover() = %v, want a panic naming queue.capacity", r)
		}
	}()
	NewQueue(&memWriter{}, QueueConfig{Capacity: -1}, nil)
}

func TestQueueDeliversInOrder(t *testing.T) {
	const n = 5000
	tests := []struct {
		name string
		cfg  QueueConfig
	}{
		{name: "batch 1", cfg: QueueConfig{Capacity: n, BatchSize: 1, FlushInterval: time.Hour}},
		{name: "batch 7", cfg: QueueConfig{Capacity: n, BatchSize: 7, FlushInterval: time.Hour}},
		{name: "batch 1000", cfg: QueueConfig{Capacity: n, BatchSize: 1000, FlushInterval: time.Hour}},
		{name: "short interval", cfg: QueueConfig{Capacity: n, BatchSize: 1000, FlushInterval: time.Microsecond}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := &memWriter{}
			q := NewQueue(w, tt.cfg, nil)
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

func TestQueueFlushInterval(t *testing.T) {
	w := &memWriter{}
	q := NewQueue(w, QueueConfig{BatchSize: 1000, FlushInterval: 10 * time.Millisecond}, nil)
	defer closeQueue(t, q)
	for i := range 3 {
		q.Record(ev(i))
	}
	// Neither a full batch nor Flush: only the interval writes these.
	waitFor(t, "3 events written by the interval", func() bool { return len(w.snapshot()) == 3 })
}

func TestQueueRecordNeverBlocks(t *testing.T) {
	const capacity, extra = 16, 5
	w := newStuckWriter(false)
	q := NewQueue(w, QueueConfig{Capacity: capacity, BatchSize: 1, FlushInterval: time.Hour}, nil)

	// The first event is taken by the drain goroutine, whose Writer blocks.
	q.Record(ev(0))
	<-w.entered
	for i := 1; i <= capacity; i++ {
		if !q.Record(ev(i)) {
			t.Fatalf("Record(%d) = false with room in the queue", i)
		}
	}
	if got := q.Stats().Depth; got != capacity {
		t.Fatalf("Depth = %d, want %d", got, capacity)
	}
	start := time.Now()
	for i := range extra {
		if q.Record(ev(capacity + 1 + i)) {
			t.Fatalf("Record on a full queue = true, want false")
		}
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("%d Records on a full queue took %v", extra, d)
	}
	s := q.Stats()
	if s.DroppedQueueFull != extra || s.Dropped != extra {
		t.Errorf("dropped queue_full = %d, total %d; want %d", s.DroppedQueueFull, s.Dropped, extra)
	}

	close(w.release)
	closeQueue(t, q)
	s = q.Stats()
	if want := uint64(1 + capacity); s.Written != want {
		t.Errorf("Written = %d, want %d", s.Written, want)
	}
	if want := uint64(1 + capacity + extra); s.Recorded != want || s.Written+s.Dropped != want {
		t.Errorf("Stats() = %+v, want recorded %d = written + dropped", s, want)
	}
}

func TestQueueCloseFlushes(t *testing.T) {
	w := &memWriter{}
	q := NewQueue(w, QueueConfig{BatchSize: 1000, FlushInterval: time.Hour}, nil)
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
	want := QueueStats{Capacity: DefaultQueueCapacity, Recorded: 11, Written: 10, Dropped: 1, DroppedShutdown: 1}
	if got := q.Stats(); got != want {
		t.Errorf("Stats() = %+v, want %+v", got, want)
	}
}

func TestQueueFlush(t *testing.T) {
	w := &memWriter{}
	q := NewQueue(w, QueueConfig{BatchSize: 1000, FlushInterval: time.Hour}, nil)
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
	q := NewQueue(w, QueueConfig{BatchSize: 1, FlushInterval: time.Hour}, nil)
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
	var logs syncBuffer
	q := NewQueue(w, QueueConfig{BatchSize: 1, FlushInterval: time.Hour}, testLogger(&logs))
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
	want := QueueStats{Capacity: DefaultQueueCapacity, Recorded: 4, Dropped: 4, DroppedShutdown: 4}
	if got := q.Stats(); got != want {
		t.Errorf("Stats() = %+v, want %+v", got, want)
	}
	if strings.Contains(logs.String(), "secret-session-id") {
		t.Errorf("log holds event contents:\n%s", logs.String())
	}
}

func TestQueueWriteErrors(t *testing.T) {
	const n = 4
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
			var logs syncBuffer
			q := newQueue(w, QueueConfig{BatchSize: 1000, FlushInterval: time.Hour}, testLogger(&logs), fastRetry())
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
			if strings.Contains(out, "secret-session-id") || strings.Contains(out, "e000001") {
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
	q := NewQueue(w, QueueConfig{}, nil)
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
	const n = 3
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
			var logs syncBuffer
			q := newQueue(w, QueueConfig{FlushInterval: time.Hour}, testLogger(&logs), fastRetry())
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
	var logs syncBuffer
	q := newQueue(w, QueueConfig{Capacity: 1, BatchSize: 1, FlushInterval: time.Hour}, testLogger(&logs), opts)
	q.Record(ev(0))
	<-w.entered
	q.Record(ev(1)) // fills the queue

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
	q := newQueue(w, QueueConfig{Capacity: 4096, BatchSize: 64, FlushInterval: time.Millisecond}, nil, fastRetry())

	ctx := testCtx(t)
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
				if err := q.Flush(ctx); err != nil {
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
	if got := accepted.Load(); got != total-s.DroppedQueueFull {
		t.Errorf("accepted %d, want recorded - dropped queue_full = %d", got, total-s.DroppedQueueFull)
	}
	if s.Depth != 0 {
		t.Errorf("Depth after Close = %d", s.Depth)
	}
	mu.Lock()
	defer mu.Unlock()
	if stored != s.Written {
		t.Errorf("writer stored %d, Written = %d", stored, s.Written)
	}
	if dupes != 0 || order != 0 {
		t.Errorf("%d duplicates and %d out-of-order events", dupes, order)
	}
	t.Logf("stats: %+v", s)
}

func TestQueueRecordDoesNotAllocate(t *testing.T) {
	q := NewQueue(writerFunc(func(context.Context, []Event) error { return nil }), QueueConfig{}, nil)
	defer closeQueue(t, q)
	e := ev(1)
	e.ViolationPaths = []string{"/a", "/b"}
	if allocs := testing.AllocsPerRun(1000, func() { q.Record(e) }); allocs != 0 {
		t.Errorf("Record allocates %v times per call, want 0", allocs)
	}
}

func BenchmarkQueueRecord(b *testing.B) {
	q := NewQueue(writerFunc(func(context.Context, []Event) error { return nil }), QueueConfig{}, nil)
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

// TestQueueFullSpillsToSpool blocks the queue's writer, fills the queue,
// and checks the calls past capacity go to a real spool on disk instead of
// being dropped: nothing is lost, and the accounting stays exact.
func TestQueueFullSpillsToSpool(t *testing.T) {
	dest := &memWriter{}
	cfg := SpoolConfig{Dir: t.TempDir(), SegmentAge: 10 * time.Millisecond, RetryMin: 10 * time.Millisecond, RetryMax: 50 * time.Millisecond}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	sp, err := OpenSpool(cfg, dest, nil)
	if err != nil {
		t.Fatal(err)
	}
	stuck := newStuckWriter(false)
	q := newQueue(stuck, QueueConfig{Capacity: 4, BatchSize: 1, FlushInterval: time.Hour}, nil, fastRetry())
	q.SpillTo(sp)
	const n = 40
	for i := range n {
		if !q.Record(ev(i)) {
			t.Fatalf("event %d was not kept", i)
		}
	}
	st := q.Stats()
	if st.Dropped != 0 || st.Spilled == 0 || st.Spilled > n {
		t.Fatalf("stats = %+v; want spills and no drops", st)
	}
	close(stuck.release)
	closeQueue(t, q)
	if err := sp.Close(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	st = q.Stats()
	if st.Recorded != n || st.Written+st.Dropped != n || st.Dropped != 0 {
		t.Errorf("after close: %+v; want all %d written, none dropped", st, n)
	}
	if got := uint64(len(dest.snapshot())) + st.Written - st.Spilled; got != n {
		t.Errorf("spool shipped %d, queue wrote %d more: %d of %d events", len(dest.snapshot()), st.Written-st.Spilled, got, n)
	}
}
