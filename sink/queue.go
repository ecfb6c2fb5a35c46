package sink

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// Queue defaults, applied by QueueConfig.Validate to zero fields.
const (
	// DefaultQueueCapacity is the default number of events a Queue holds.
	DefaultQueueCapacity = 65536
	// DefaultBatchSize is the default largest batch handed to a Writer.
	DefaultBatchSize = 1000
	// DefaultFlushInterval is the default longest time an event waits for
	// its batch to fill before the batch is written anyway.
	DefaultFlushInterval = time.Second
)

// Write retry policy: a failed batch is tried writeAttempts times in all,
// waiting retryBackoffMin before the second attempt and doubling the wait
// each time up to retryBackoffMax. Then the batch is dropped.
const (
	writeAttempts   = 3
	retryBackoffMin = 100 * time.Millisecond
	retryBackoffMax = 5 * time.Second
)

// dropLogEvery is the shortest time between two "queue full" warnings.
const dropLogEvery = 10 * time.Second

// Drop reasons, used as the reason label of toolgate_sink_events_dropped_total.
const (
	// DropQueueFull counts events Record refused because the queue was full.
	DropQueueFull = "queue_full"
	// DropWriteError counts events in batches the Writer failed to store
	// after every retry.
	DropWriteError = "write_error"
	// DropShutdown counts events recorded after Close began, and events
	// still queued when Close's context ended.
	DropShutdown = "shutdown"
)

// QueueConfig configures a Queue. The zero value is valid: Validate replaces
// each zero field with its default.
type QueueConfig struct {
	// Capacity is how many events the queue holds before Record starts
	// dropping them. Default DefaultQueueCapacity (65536).
	Capacity int `yaml:"capacity"`
	// BatchSize is the largest number of events handed to the Writer in one
	// call. It may not exceed Capacity. Default DefaultBatchSize (1000), or
	// Capacity when Capacity is set below that.
	BatchSize int `yaml:"batch_size"`
	// FlushInterval is the longest time an event waits for its batch to
	// fill before the batch is written anyway; a duration such as "500ms"
	// in YAML. Default DefaultFlushInterval (1s).
	FlushInterval time.Duration `yaml:"flush_interval"`
}

// Validate applies the defaults to zero fields and rejects negative values
// and a BatchSize larger than Capacity. Errors name the field as
// "queue.<field>".
func (c *QueueConfig) Validate() error {
	if c.Capacity < 0 {
		return fmt.Errorf("queue.capacity: must not be negative, got %d", c.Capacity)
	}
	if c.BatchSize < 0 {
		return fmt.Errorf("queue.batch_size: must not be negative, got %d", c.BatchSize)
	}
	if c.FlushInterval < 0 {
		return fmt.Errorf("queue.flush_interval: must not be negative, got %s", c.FlushInterval)
	}
	if c.Capacity == 0 {
		c.Capacity = DefaultQueueCapacity
	}
	if c.BatchSize == 0 {
		c.BatchSize = min(DefaultBatchSize, c.Capacity)
	}
	if c.FlushInterval == 0 {
		c.FlushInterval = DefaultFlushInterval
	}
	if c.BatchSize > c.Capacity {
		return fmt.Errorf("queue.batch_size: must not exceed queue.capacity (%d), got %d", c.Capacity, c.BatchSize)
	}
	return nil
}

// QueueStats is a snapshot of a Queue's counters. The counters are read one
// by one, so a snapshot taken while events flow may be slightly skewed; once
// Close has returned nil, Recorded == Written + Dropped.
type QueueStats struct {
	// Depth is the number of events waiting in the queue, not counting the
	// batch the Writer is working on.
	Depth int `json:"depth"`
	// Capacity is the configured capacity.
	Capacity int `json:"capacity"`
	// Recorded counts every call to Record, accepted or not.
	Recorded uint64 `json:"recorded"`
	// Written counts events the Writer stored.
	Written uint64 `json:"written"`
	// Dropped counts events lost for any reason; it is the sum of the three
	// fields below.
	Dropped uint64 `json:"dropped"`
	// DroppedQueueFull counts events Record refused because the queue was full.
	DroppedQueueFull uint64 `json:"dropped_queue_full"`
	// DroppedWriteError counts events in batches that failed every attempt.
	DroppedWriteError uint64 `json:"dropped_write_error"`
	// DroppedShutdown counts events recorded after Close began or abandoned
	// when Close's context ended.
	DroppedShutdown uint64 `json:"dropped_shutdown"`
	// WriteErrors counts failed WriteEvents calls, retries included; a
	// panicking Writer counts as a failed call.
	WriteErrors uint64 `json:"write_errors"`
	// Spilled counts events a full queue handed straight to its spill
	// writer (see SpillTo); they are included in Written.
	Spilled uint64 `json:"spilled"`
}

// Queue is a bounded asynchronous queue in front of a Writer. Record adds an
// event without ever blocking; one background goroutine collects events into
// batches of up to BatchSize, or whatever arrived within FlushInterval, and
// hands each batch to the Writer in arrival order.
//
// A failed batch is retried with exponential backoff (100ms, then doubling,
// at most 5s between tries) for 3 attempts in all and then dropped. A
// Writer that panics is treated as one that failed. The Writer must not
// retain the slice it is given: the Queue reuses it.
//
// Nothing is lost silently: every event passed to Record ends up counted as
// written or as dropped with a reason (see QueueStats and the Prometheus
// metrics from Collect). Log messages carry counts and errors, never event
// contents.
type Queue struct {
	w    Writer
	cfg  QueueConfig
	log  *slog.Logger
	opts queueOptions

	ch chan Event

	// mu guards closed. Record holds it for reading only around its
	// non-blocking send, so that Close, which takes it for writing, knows
	// no send is in progress once closed is set.
	mu     sync.RWMutex
	closed bool

	closeOnce sync.Once
	closing   chan struct{}      // closed when Close begins
	stopped   chan struct{}      // closed when the drain goroutine returns
	flushReq  chan chan struct{} // Flush requests
	runCtx    context.Context    // passed to the Writer; canceled when Close gives up
	cancel    context.CancelFunc

	recorded          atomic.Uint64
	written           atomic.Uint64
	droppedQueueFull  atomic.Uint64
	droppedWriteError atomic.Uint64
	droppedShutdown   atomic.Uint64
	writeErrors       atomic.Uint64

	spill   Writer        // takes an event when the queue is full (SpillTo)
	spilled atomic.Uint64 // events spill took

	lastDropLog atomic.Int64  // unix nanoseconds of the last "queue full" warning
	dropsLogged atomic.Uint64 // droppedQueueFull at the last warning
}

// queueOptions holds what tests change: the retry policy and the clock.
type queueOptions struct {
	attempts   int
	backoffMin time.Duration
	backoffMax time.Duration
	now        func() time.Time
}

func defaultQueueOptions() queueOptions {
	return queueOptions{
		attempts:   writeAttempts,
		backoffMin: retryBackoffMin,
		backoffMax: retryBackoffMax,
		now:        time.Now,
	}
}

// NewQueue returns a Queue that drains into w and starts its background
// goroutine; call Close to stop it. cfg is validated (defaults applied) on a
// copy; NewQueue panics if w is nil or cfg is one Validate rejects, so
// validate configuration from files first. A nil log discards messages.
func NewQueue(w Writer, cfg QueueConfig, log *slog.Logger) *Queue {
	return newQueue(w, cfg, log, defaultQueueOptions())
}

func newQueue(w Writer, cfg QueueConfig, log *slog.Logger, opts queueOptions) *Queue {
	if w == nil {
		panic("sink: NewQueue with a nil Writer")
	}
	if err := cfg.Validate(); err != nil {
		panic("sink: NewQueue: " + err.Error())
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	q := &Queue{
		w:        w,
		cfg:      cfg,
		log:      log,
		opts:     opts,
		ch:       make(chan Event, cfg.Capacity),
		closing:  make(chan struct{}),
		stopped:  make(chan struct{}),
		flushReq: make(chan chan struct{}),
		runCtx:   ctx,
		cancel:   cancel,
	}
	go q.run()
	return q
}

// Record enqueues e and reports whether it was accepted. It never blocks:
// when the queue is full, or Close has begun, e is dropped and counted, and
// Record returns false. While drops continue a warning with the count is
// logged at most once every 10 seconds.
func (q *Queue) Record(e Event) bool {
	q.recorded.Add(1)
	q.mu.RLock()
	if q.closed {
		q.mu.RUnlock()
		q.droppedShutdown.Add(1)
		return false
	}
	select {
	case q.ch <- e:
		q.mu.RUnlock()
		return true
	default:
	}
	q.mu.RUnlock()
	if q.spill != nil {
		if err := q.spill.WriteEvents(q.runCtx, []Event{e}); err == nil {
			q.spilled.Add(1)
			q.written.Add(1)
			return true
		}
	}
	q.dropFull()
	return false
}

// SpillTo makes a full queue hand an event straight to w (the disk spool)
// instead of dropping it: the call that records it waits for that one
// append, which is the price of losing nothing when the queue cannot keep
// up. Spilled events count as written, and in Stats().Spilled. Call it
// before the first Record.
func (q *Queue) SpillTo(w Writer) { q.spill = w }

// dropFull counts one event dropped because the queue is full and logs a
// warning unless one was logged within dropLogEvery.
func (q *Queue) dropFull() {
	q.droppedQueueFull.Add(1)
	now := q.opts.now().UnixNano()
	last := q.lastDropLog.Load()
	if last != 0 && now-last < int64(dropLogEvery) {
		return
	}
	if !q.lastDropLog.CompareAndSwap(last, now) {
		return // another goroutine logs this round
	}
	total := q.droppedQueueFull.Load()
	since := total - q.dropsLogged.Swap(total)
	q.log.Warn("sink: queue full, dropping events",
		"dropped", since, "dropped_total", total, "capacity", q.cfg.Capacity)
}

// Flush blocks until every event recorded before the call has been handed
// to the Writer and the Writer has returned (the events are then written or
// counted as dropped), or until ctx ends. It returns ErrClosed once Close
// has begun; Close flushes by itself.
func (q *Queue) Flush(ctx context.Context) error {
	done := make(chan struct{})
	select {
	case q.flushReq <- done:
	case <-q.closing:
		return ErrClosed
	case <-ctx.Done():
		return fmt.Errorf("sink: flush queue: %w", ctx.Err())
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("sink: flush queue: %w", ctx.Err())
	}
}

// Close stops accepting events (Record then drops with reason "shutdown"),
// hands everything queued to the Writer, and returns when that is done. If
// ctx ends first, Close cancels the context given to the Writer, counts the
// events still queued as dropped with reason "shutdown", and returns the
// context's error; the batch the Writer holds is counted when it returns.
// Close does not close the Writer. Calling Close again waits the same way.
func (q *Queue) Close(ctx context.Context) error {
	q.closeOnce.Do(func() {
		q.mu.Lock()
		q.closed = true
		q.mu.Unlock()
		close(q.closing)
	})
	select {
	case <-q.stopped:
		return nil
	case <-ctx.Done():
	}
	select {
	case <-q.stopped: // finished just as ctx ended
		return nil
	default:
	}
	q.cancel()
	// The drain goroutine may still be receiving too; each event is counted
	// by whichever side receives it.
	var n uint64
drain:
	for {
		select {
		case <-q.ch:
			n++
		default:
			break drain
		}
	}
	q.droppedShutdown.Add(n)
	q.log.Warn("sink: queue close timed out, dropping queued events",
		"dropped", n, "error", ctx.Err())
	return fmt.Errorf("sink: close queue: %w", ctx.Err())
}

// Stats returns a snapshot of the queue's counters.
func (q *Queue) Stats() QueueStats {
	s := QueueStats{
		Depth:             len(q.ch),
		Capacity:          q.cfg.Capacity,
		Written:           q.written.Load(),
		DroppedQueueFull:  q.droppedQueueFull.Load(),
		DroppedWriteError: q.droppedWriteError.Load(),
		DroppedShutdown:   q.droppedShutdown.Load(),
		WriteErrors:       q.writeErrors.Load(),
		Spilled:           q.spilled.Load(),
	}
	s.Dropped = s.DroppedQueueFull + s.DroppedWriteError + s.DroppedShutdown
	// Loaded last, so that Recorded >= Written + Dropped in every snapshot.
	s.Recorded = q.recorded.Load()
	return s
}

// run is the drain goroutine.
func (q *Queue) run() {
	defer close(q.stopped)
	defer q.cancel()

	batch := make([]Event, 0, q.cfg.BatchSize)
	timer := time.NewTimer(q.cfg.FlushInterval)
	timer.Stop()
	defer timer.Stop()

	add := func(e Event) {
		batch = append(batch, e)
		if len(batch) >= q.cfg.BatchSize {
			batch = q.write(batch)
		}
	}
	for {
		select {
		case e := <-q.ch:
			if len(batch) == 0 {
				timer.Reset(q.cfg.FlushInterval)
			}
			add(e)
			if len(batch) == 0 {
				timer.Stop()
			}
		case <-timer.C:
			batch = q.write(batch)
		case done := <-q.flushReq:
			// Every event recorded before Flush was called was sent before
			// the request, so it is among the first len(q.ch) queued.
		flush:
			for n := len(q.ch); n > 0; n-- {
				select {
				case e := <-q.ch:
					add(e)
				default:
					break flush // Close took the rest
				}
			}
			batch = q.write(batch)
			timer.Stop()
			close(done)
		case <-q.closing:
			// Record no longer sends, so what is queued now is all there is.
		drain:
			for {
				select {
				case e := <-q.ch:
					add(e)
				default:
					break drain
				}
			}
			q.write(batch)
			if d := q.Stats(); d.Dropped > 0 {
				q.log.Warn("sink: queue closed with dropped events",
					"recorded", d.Recorded, "written", d.Written,
					DropQueueFull, d.DroppedQueueFull,
					DropWriteError, d.DroppedWriteError,
					DropShutdown, d.DroppedShutdown)
			}
			return
		}
	}
}

// write hands batch to the Writer, retrying as documented on Queue, counts
// the outcome, and returns batch emptied for reuse.
func (q *Queue) write(batch []Event) []Event {
	n := uint64(len(batch))
	if n == 0 {
		return batch
	}
	defer clear(batch)
	for attempt := 1; ; attempt++ {
		if q.runCtx.Err() != nil {
			q.droppedShutdown.Add(n)
			return batch[:0]
		}
		err := q.safeWrite(batch)
		if err == nil {
			q.written.Add(n)
			return batch[:0]
		}
		if q.runCtx.Err() != nil {
			q.droppedShutdown.Add(n)
			return batch[:0]
		}
		q.writeErrors.Add(1)
		if attempt >= q.opts.attempts {
			q.droppedWriteError.Add(n)
			q.log.Error("sink: write failed, dropping batch",
				"events", n, "attempts", attempt, "error", err)
			return batch[:0]
		}
		wait := backoff(attempt, q.opts.backoffMin, q.opts.backoffMax)
		q.log.Warn("sink: write failed, retrying",
			"events", n, "attempt", attempt, "retry_in", wait, "error", err)
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-q.runCtx.Done():
			t.Stop()
		}
	}
}

// safeWrite calls the Writer, turning a panic into an error.
func (q *Queue) safeWrite(batch []Event) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("sink: writer panicked: %v", r)
		}
	}()
	return q.w.WriteEvents(q.runCtx, batch)
}

// backoff is the wait after failed attempt number attempt (from 1): first,
// doubling with each attempt, capped at limit.
func backoff(attempt int, first, limit time.Duration) time.Duration {
	d := first
	for i := 1; i < attempt && d < limit; i++ {
		d *= 2
	}
	return min(d, limit)
}
