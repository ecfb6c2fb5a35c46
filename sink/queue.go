package sink

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/toolgate/toolgate/internal/monoclock"
	"github.com/toolgate/toolgate/internal/section"
)

// Queue defaults, applied by QueueConfig.Validate to zero fields.
const (
	// DefaultQueueCapacity is the default number of events a Queue holds.
	DefaultQueueCapacity = 65536
	// DefaultBatchSize is the default largest batch handed to a Writer.
	DefaultBatchSize = 1000
	// DefaultMaxWait is the default longest time Record waits for its
	// event to be written.
	DefaultMaxWait = 50 * time.Millisecond
	// DefaultSyncInterval is the default time between two syncs of a
	// Writer that is a Syncer.
	DefaultSyncInterval = 100 * time.Millisecond
	// DefaultAsyncFlushInterval is the default time an Async queue gathers
	// events before writing them.
	DefaultAsyncFlushInterval = 100 * time.Millisecond
)

// slowWrite is how long a write a call makes itself (see Queue) may take
// before calls go back to handing their events to the writer goroutine,
// whose wait they bound with MaxWait.
const slowWrite = time.Millisecond

// Write retry policy: a failed batch is tried writeAttempts times in all,
// waiting retryBackoffMin before the second attempt and doubling the wait
// each time up to retryBackoffMax. Then the batch is dropped.
const (
	writeAttempts   = 3
	retryBackoffMin = 100 * time.Millisecond
	retryBackoffMax = 5 * time.Second
)

// dropLogEvery is the shortest time between two "queue full" warnings, and
// between two warnings about failed syncs.
const dropLogEvery = 10 * time.Second

// Drop reasons, used as the reason label of toolgate_sink_events_dropped_total.
const (
	// DropQueueFull counts events Record refused because the queue was
	// still full after waiting MaxWait for room.
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
	// Capacity is how many events the queue holds in memory, those being
	// written included, before Record waits for room (at most MaxWait) and
	// then drops. Default DefaultQueueCapacity (65536).
	Capacity int `yaml:"capacity"`
	// BatchSize is the largest number of events handed to the Writer in one
	// call; a group larger than that is written in several calls. It may
	// not exceed Capacity. Default DefaultBatchSize (1000), or Capacity
	// when Capacity is set below that.
	BatchSize int `yaml:"batch_size"`
	// FlushInterval is, with Async, how long the writer gathers events
	// before writing them (sooner when BatchSize are waiting): fewer,
	// larger writes, and that much more to lose in a crash. Without Async
	// it is not used (events are written as soon as the writer is free, see
	// Queue) but accepted, so that older configuration files still load. A
	// duration such as "100ms" in YAML. Default
	// DefaultAsyncFlushInterval (100ms) with Async, else 0.
	FlushInterval time.Duration `yaml:"flush_interval"`
	// MaxWait is the longest time Record waits for the write of its event
	// (and, when the queue is full, for room): the bound of the
	// backpressure a slow disk puts on calls. A Record that waited that
	// long returns with its event still in memory, counted in
	// WaitTimeouts. A duration such as "50ms" in YAML. Default
	// DefaultMaxWait (50ms).
	MaxWait time.Duration `yaml:"max_wait"`
	// Async makes Record return at once, without waiting for the write:
	// an event is then written within FlushInterval (and one write) of its
	// call's answer, and a process crash in between loses it. Default
	// false.
	Async bool `yaml:"async"`
	// SyncInterval is the time between two calls to the Writer's Sync
	// (fsync), when the Writer has one and events were written since the
	// last: the bound, with the fsync's own time, of what a machine crash
	// loses. A duration such as "100ms" in YAML. Default
	// DefaultSyncInterval (100ms).
	SyncInterval time.Duration `yaml:"sync_interval"`
}

// Validate applies the defaults to zero fields and rejects negative values
// and a BatchSize larger than Capacity. Errors are *section.Error values
// at "queue.<field>".
func (c *QueueConfig) Validate() error {
	if c.Capacity < 0 {
		return section.Errorf("queue.capacity", "must not be negative, got %d", c.Capacity)
	}
	if c.BatchSize < 0 {
		return section.Errorf("queue.batch_size", "must not be negative, got %d", c.BatchSize)
	}
	if c.FlushInterval < 0 {
		return section.Errorf("queue.flush_interval", "must not be negative, got %s", c.FlushInterval)
	}
	if c.MaxWait < 0 {
		return section.Errorf("queue.max_wait", "must not be negative, got %s", c.MaxWait)
	}
	if c.SyncInterval < 0 {
		return section.Errorf("queue.sync_interval", "must not be negative, got %s", c.SyncInterval)
	}
	if c.Capacity == 0 {
		c.Capacity = DefaultQueueCapacity
	}
	if c.BatchSize == 0 {
		c.BatchSize = min(DefaultBatchSize, c.Capacity)
	}
	if c.MaxWait == 0 {
		c.MaxWait = DefaultMaxWait
	}
	if c.SyncInterval == 0 {
		c.SyncInterval = DefaultSyncInterval
	}
	if c.Async && c.FlushInterval == 0 {
		c.FlushInterval = DefaultAsyncFlushInterval
	}
	if c.BatchSize > c.Capacity {
		return section.Errorf("queue.batch_size", "must not exceed queue.capacity (%d), got %d", c.Capacity, c.BatchSize)
	}
	return nil
}

// QueueStats is a snapshot of a Queue's counters. The counters are read one
// by one, so a snapshot taken while events flow may be slightly skewed; once
// Close has returned nil, Recorded == Written + Dropped.
type QueueStats struct {
	// Depth is the number of events in memory: waiting for the next
	// group, or in the group being written.
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
	// DroppedQueueFull counts events Record refused because the queue was
	// full.
	DroppedQueueFull uint64 `json:"dropped_queue_full"`
	// DroppedWriteError counts events in batches that failed every attempt.
	DroppedWriteError uint64 `json:"dropped_write_error"`
	// DroppedShutdown counts events recorded after Close began or abandoned
	// when Close's context ended.
	DroppedShutdown uint64 `json:"dropped_shutdown"`
	// WriteErrors counts failed WriteEvents calls, retries included; a
	// panicking Writer counts as a failed call.
	WriteErrors uint64 `json:"write_errors"`
	// Groups counts group writes: each takes every event recorded while
	// the previous one was under way. Written / Groups is the mean group
	// size.
	Groups uint64 `json:"groups"`
	// InlineGroups counts the groups a call wrote itself, finding the
	// writer idle (see Queue); they are counted in Groups too.
	InlineGroups uint64 `json:"inline_groups"`
	// WaitTimeouts counts Record calls that returned after MaxWait with
	// their event accepted but not yet written.
	WaitTimeouts uint64 `json:"wait_timeouts"`
	// Syncs counts successful calls to the Writer's Sync.
	Syncs uint64 `json:"syncs"`
	// SyncErrors counts failed calls to the Writer's Sync.
	SyncErrors uint64 `json:"sync_errors"`
	// WriteFailing is true while the last write failed and no write or
	// probe succeeded since (see Queue.Durable): events recorded now are
	// not kept.
	WriteFailing bool `json:"write_failing"`
}

// Queue is a bounded queue in front of a Writer that commits events in
// groups. Record adds an event to the pending group and, unless Async is
// set, waits until the group has been handed to the Writer and the Writer
// returned, or MaxWait passed. A background goroutine writes groups: as
// soon as one write returns, everything recorded meanwhile is the next
// group, handed to the Writer in calls of up to BatchSize events in
// arrival order. So a Writer that appends to a file with one write(2) per
// call (File, Spool) has every event in the page cache before Record
// returns, and a killed process loses none of them; when the Writer is a
// Syncer, a second goroutine calls Sync every SyncInterval after writes,
// which bounds what a machine crash loses.
//
// When the Writer is an Appender (File, Spool) and no group is being
// written, Record writes its group itself rather than hand it to the
// writer goroutine and wait to be woken: one write(2) on the caller's
// goroutine, the cheapest way for a lone call to have its event on disk
// before its answer. Calls arriving meanwhile join the next group, which
// the writer goroutine writes. Such a write is not bounded by MaxWait (a
// system call cannot be cut short): if one takes longer than a
// millisecond, calls go back to handing their events over and waiting at
// most MaxWait, until the writer goroutine's writes are fast again. A
// call's own write that fails is retried by the writer goroutine, the call
// waiting for it within MaxWait.
//
// Record never waits longer than MaxWait for the writer goroutine. When
// the queue holds Capacity events (the disk cannot keep up), Record
// waits, within the same bound, for the group being written to finish; if
// there is still no room the event is dropped and counted as queue_full. A
// Record that timed out with its event accepted is counted in
// WaitTimeouts.
//
// With Async, Record returns at once and the writer goroutine gathers
// events for FlushInterval (or until BatchSize are waiting) before
// writing them.
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
	w      Writer
	syncer Syncer // w, when it is one
	cfg    QueueConfig
	log    *slog.Logger
	opts   queueOptions

	// mu guards the fields up to writing. It is held only briefly, never
	// across a write.
	mu        sync.Mutex
	closed    bool
	pending   []Event       // the next group
	spare     []Event       // the last group's slice, for reuse
	held      int           // events in pending and in the group being written
	cur       chan struct{} // closed when the pending group is written; nil until someone waits
	writing   chan struct{} // the same for the group being written; nil until someone waits
	inFlight  bool          // a group is being written
	handoff   []Event       // a group whose write by its caller failed, for the writer goroutine to retry
	handoffAt int           // how much of handoff was written

	inline    bool          // w is an Appender and Record waits: calls may write their group
	handover  atomic.Bool   // calls hand their groups to the writer goroutine (see writeInline)
	wake      chan struct{} // something is pending
	full      chan struct{} // Async: BatchSize events are pending
	closeOnce sync.Once
	closing   chan struct{} // closed when Close begins
	stopped   chan struct{} // closed when the writer goroutine returns
	synced    chan struct{} // closed when the sync goroutine returns
	runCtx    context.Context
	cancel    context.CancelFunc
	dirty     atomic.Bool // written since the last Sync

	recorded          atomic.Uint64
	written           atomic.Uint64
	droppedQueueFull  atomic.Uint64
	droppedWriteError atomic.Uint64
	droppedShutdown   atomic.Uint64
	writeErrors       atomic.Uint64
	groups            atomic.Uint64
	inlineGroups      atomic.Uint64
	waitTimeouts      atomic.Uint64
	syncs             atomic.Uint64
	syncErrors        atomic.Uint64

	// failing is set by a failed write and cleared by a successful one,
	// or by a Probe of the Writer that finds room again (Durable).
	failing   atomic.Bool
	lastErr   atomic.Pointer[error]
	lastProbe atomic.Int64 // unix nanoseconds of Durable's last Probe

	lastDropLog  atomic.Int64  // unix nanoseconds of the last "queue full" warning
	dropsLogged  atomic.Uint64 // droppedQueueFull at the last warning
	lastSyncWarn atomic.Int64  // unix nanoseconds of the last sync warning
}

// timers holds stopped timers for Record's bounded wait.
var timers = sync.Pool{New: func() any {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return t
}}

// writingLocked returns the channel closed once the group being written
// is done, making it if need be, or nil when no group is being written.
// The caller holds mu.
func (q *Queue) writingLocked() chan struct{} {
	if q.writing == nil && q.inFlight {
		q.writing = make(chan struct{})
	}
	return q.writing
}

// curLocked returns the channel closed once the pending group is written,
// making it if need be. The caller holds mu.
func (q *Queue) curLocked() chan struct{} {
	if q.cur == nil {
		q.cur = make(chan struct{})
	}
	return q.cur
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

// NewQueue returns a Queue that writes into w and starts its background
// goroutines; call Close to stop them. cfg is validated (defaults applied)
// on a copy: a cfg that Validate rejects returns Validate's error (a
// *section.Error), a nil w ErrNilWriter, and no goroutine is started. A nil
// log discards messages.
func NewQueue(w Writer, cfg QueueConfig, log *slog.Logger) (*Queue, error) {
	return newQueue(w, cfg, log, defaultQueueOptions())
}

func newQueue(w Writer, cfg QueueConfig, log *slog.Logger, opts queueOptions) (*Queue, error) {
	if w == nil {
		return nil, ErrNilWriter
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	q := &Queue{
		w:       w,
		cfg:     cfg,
		log:     log,
		opts:    opts,
		wake:    make(chan struct{}, 1),
		full:    make(chan struct{}, 1),
		closing: make(chan struct{}),
		stopped: make(chan struct{}),
		synced:  make(chan struct{}),
		runCtx:  ctx,
		cancel:  cancel,
	}
	q.syncer, _ = w.(Syncer)
	_, appender := w.(Appender)
	q.inline = appender && !cfg.Async
	go q.run()
	go q.syncLoop()
	return q, nil
}

// Record adds e to the pending group and reports whether it was kept.
// Unless Async is set it then waits until the group is written, or at
// most MaxWait. When the queue is full it first waits, within the same
// bound, for room; an event that finds none, or that arrives once Close
// has begun, is dropped and counted, and Record returns false. While drops
// continue a warning with the count is logged at most once every 10
// seconds. Record also returns false when its event was not written
// within MaxWait while the Writer's writes fail (see Durable): it is
// retried, and dropped as write_error if every attempt fails. A Record
// that waited MaxWait while writes succeed (a slow disk) returns true, and
// so does one whose group's wait ended (written, or, with a MaxWait longer
// than the retries, dropped after its last attempt).
func (q *Queue) Record(e Event) bool {
	q.recorded.Add(1)
	var deadline time.Time
	dropped := q.droppedWriteError.Load()
	q.mu.Lock()
	if q.held >= q.cfg.Capacity && !q.closed && !q.cfg.Async {
		g := q.writingLocked()
		if g == nil {
			g = q.curLocked()
		}
		q.mu.Unlock()
		deadline = time.Now().Add(q.cfg.MaxWait)
		q.wait(g, deadline)
		q.mu.Lock()
	}
	if q.closed {
		q.mu.Unlock()
		q.droppedShutdown.Add(1)
		return false
	}
	if q.held >= q.cfg.Capacity {
		q.mu.Unlock()
		q.dropFull()
		return false
	}
	q.pending = append(q.pending, e)
	q.held++
	if q.inline && !q.inFlight && !q.handover.Load() {
		// The writer is idle: write the group here rather than wake it
		// and wait to be woken.
		batch := q.takeLocked()
		q.mu.Unlock()
		return q.writeInline(batch, deadline, dropped)
	}
	var g chan struct{}
	if !q.cfg.Async {
		g = q.curLocked()
	} else if len(q.pending) >= q.cfg.BatchSize {
		select {
		case q.full <- struct{}{}:
		default:
		}
	}
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
	if q.cfg.Async {
		return true
	}
	if deadline.IsZero() {
		deadline = time.Now().Add(q.cfg.MaxWait)
	}
	return q.kept(g, deadline, dropped)
}

// kept waits for g until deadline and returns Record's answer: false when
// the wait ended or timed out while writes fail and a group was dropped
// after its last attempt since Record began (dropped is the count then),
// or the wait timed out while writes fail. g's channel closes both when
// its group is written and when it is dropped, so Record cannot tell
// which group was: it says its event may be lost.
func (q *Queue) kept(g chan struct{}, deadline time.Time, dropped uint64) bool {
	if !q.wait(g, deadline) {
		q.waitTimeouts.Add(1)
		return !q.failing.Load()
	}
	return !q.failing.Load() || q.droppedWriteError.Load() == dropped
}

// takeLocked makes the pending group the one being written and returns
// it. The caller holds mu, and no group is being written.
func (q *Queue) takeLocked() []Event {
	batch := q.pending
	q.pending, q.writing, q.cur, q.inFlight = q.spare[:0], q.cur, nil, true
	return batch
}

// writeInline writes batch, taken by Record from an idle writer, on the
// caller's goroutine: one attempt. It returns Record's answer. A failed write is handed to the writer
// goroutine to retry, and the caller waits for it until deadline (or
// MaxWait from now).
//
// Calls go back to handing their groups to the writer goroutine when such
// a write took longer than slowWrite (the disk is slow: only the writer
// goroutine's waits are bounded), or when calls recorded meanwhile (they
// come in faster than one write: a group written by the writer goroutine
// carries many events in one write, where each call writing its own would
// cost a write each). The writer goroutine lets calls write again after a
// fast write of a lone event.
func (q *Queue) writeInline(batch []Event, deadline time.Time, dropped uint64) bool {
	start := monoclock.Now()
	off, err := q.writeOnce(batch)
	if monoclock.Since(start) > slowWrite {
		q.handover.Store(true)
	}
	if err == nil {
		q.inlineGroups.Add(1)
		if q.finish(batch) {
			q.handover.Store(true)
			select {
			case q.wake <- struct{}{}:
			default:
			}
		}
		return true
	}
	q.writeErrors.Add(1)
	q.log.Warn("sink: write failed, retrying",
		"events", len(batch)-off, "attempt", 1,
		"retry_in", backoff(1, q.opts.backoffMin, q.opts.backoffMax), "error", err)
	q.mu.Lock()
	q.handoff, q.handoffAt = batch, off
	g := q.writingLocked()
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
	if deadline.IsZero() {
		deadline = time.Now().Add(q.cfg.MaxWait)
	}
	return q.kept(g, deadline, dropped)
}

// writeOnce hands batch to the Writer in calls of up to BatchSize events,
// once each, and returns how many events were written before the first
// failure and its error.
func (q *Queue) writeOnce(batch []Event) (int, error) {
	for off := 0; off < len(batch); off += q.cfg.BatchSize {
		chunk := batch[off:min(off+q.cfg.BatchSize, len(batch))]
		if err := q.safeWrite(chunk); err != nil {
			return off, err
		}
		q.wrote()
		q.written.Add(uint64(len(chunk)))
	}
	return len(batch), nil
}

// finish ends the write of batch, the group being written: it releases
// the group's waiters and keeps the slice for the next group. It reports
// whether events are pending.
func (q *Queue) finish(batch []Event) bool {
	clear(batch)
	q.dirty.Store(true)
	q.groups.Add(1)
	q.mu.Lock()
	q.held -= len(batch)
	g := q.writing
	q.writing, q.inFlight = nil, false
	if cap(batch) <= 4*q.cfg.BatchSize {
		q.spare = batch[:0]
	} else {
		q.spare = nil // let a burst's large slice go
	}
	more := len(q.pending) > 0
	q.mu.Unlock()
	if g != nil {
		close(g)
	}
	return more
}

// wait waits for g to be written, until deadline, and reports whether it
// was.
func (q *Queue) wait(g chan struct{}, deadline time.Time) bool {
	select {
	case <-g:
		return true
	default:
	}
	d := time.Until(deadline)
	if d <= 0 {
		return false
	}
	t := timers.Get().(*time.Timer)
	t.Reset(d)
	defer func() {
		t.Stop() // no stale tick is left in t.C after Stop (Go 1.23)
		timers.Put(t)
	}()
	select {
	case <-g:
		return true
	case <-t.C:
		return false
	}
}

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
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return ErrClosed
	}
	g := q.writingLocked()
	if len(q.pending) > 0 {
		g = q.curLocked() // written after the group under way
	}
	q.mu.Unlock()
	if g == nil {
		return nil
	}
	select {
	case q.full <- struct{}{}: // an Async writer stops gathering
	default:
	}
	select {
	case <-g:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("sink: flush queue: %w", ctx.Err())
	}
}

// Close stops accepting events (Record then drops with reason "shutdown"),
// hands everything queued to the Writer, syncs it when it is a Syncer, and
// returns when that is done. If ctx ends first, Close cancels the context
// given to the Writer, counts the events still queued as dropped with
// reason "shutdown", and returns the context's error; the batch the Writer
// holds is counted when it returns. Close does not close the Writer.
// Calling Close again waits the same way.
func (q *Queue) Close(ctx context.Context) error {
	q.closeOnce.Do(func() {
		q.mu.Lock()
		q.closed = true
		q.mu.Unlock()
		close(q.closing)
	})
	select {
	case <-q.synced:
		return nil
	case <-ctx.Done():
	}
	select {
	case <-q.synced: // finished just as ctx ended
		return nil
	default:
	}
	q.cancel()
	// The writer goroutine may still be taking groups too; each event is
	// counted by whichever side takes it.
	q.mu.Lock()
	n := len(q.pending)
	clear(q.pending)
	q.pending = q.pending[:0]
	q.held -= n
	g := q.cur
	q.cur = nil
	q.mu.Unlock()
	if g != nil {
		close(g) // its waiters need not wait for MaxWait
	}
	q.droppedShutdown.Add(uint64(n))
	q.log.Warn("sink: queue close timed out, dropping queued events",
		"dropped", n, "error", ctx.Err())
	return fmt.Errorf("sink: close queue: %w", ctx.Err())
}

// Stats returns a snapshot of the queue's counters.
func (q *Queue) Stats() QueueStats {
	q.mu.Lock()
	depth := q.held
	q.mu.Unlock()
	s := QueueStats{
		Depth:             depth,
		Capacity:          q.cfg.Capacity,
		Written:           q.written.Load(),
		DroppedQueueFull:  q.droppedQueueFull.Load(),
		DroppedWriteError: q.droppedWriteError.Load(),
		DroppedShutdown:   q.droppedShutdown.Load(),
		WriteErrors:       q.writeErrors.Load(),
		Groups:            q.groups.Load(),
		InlineGroups:      q.inlineGroups.Load(),
		WaitTimeouts:      q.waitTimeouts.Load(),
		Syncs:             q.syncs.Load(),
		SyncErrors:        q.syncErrors.Load(),
		WriteFailing:      q.failing.Load(),
	}
	s.Dropped = s.DroppedQueueFull + s.DroppedWriteError + s.DroppedShutdown
	// Loaded last, so that Recorded >= Written + Dropped in every snapshot.
	s.Recorded = q.recorded.Load()
	return s
}

// run is the writer goroutine: it writes groups while anything is
// pending, and on Close writes what is left and returns.
func (q *Queue) run() {
	defer close(q.stopped)
	for {
		select {
		case <-q.wake:
			if q.cfg.Async {
				q.gather()
			}
			q.drain()
		case <-q.closing:
			// Record no longer adds, so what is pending now, and a group a
			// call is writing, is all there is.
			q.drainAll()
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

// gather waits, for an Async queue, until FlushInterval has passed,
// BatchSize events are pending, or Close began.
func (q *Queue) gather() {
	t := time.NewTimer(q.cfg.FlushInterval)
	defer t.Stop()
	select {
	case <-t.C:
	case <-q.full:
	case <-q.closing:
	}
}

// drainAll writes until nothing is pending and no call is writing a
// group: Close's last pass.
func (q *Queue) drainAll() {
	for {
		q.drain()
		q.mu.Lock()
		busy, g := q.inFlight, q.writingLocked()
		idle := !busy && len(q.pending) == 0
		q.mu.Unlock()
		if idle {
			return
		}
		if busy {
			// A call is writing its group; wait for it, or for its
			// failed group to be handed over.
			select {
			case <-g:
			case <-q.wake:
			}
		}
	}
}

// drain writes groups until nothing is pending (with Async, the groups
// pending now), or until it finds a call writing a group of its own: that
// call wakes it when done if more is pending.
func (q *Queue) drain() {
	for {
		// Let callers that are ready to run (those the last group's
		// write released, say) record first, so that they join this
		// group rather than each wait for a write of its own.
		runtime.Gosched()
		q.mu.Lock()
		var (
			batch   []Event
			off     int
			attempt = 1
		)
		switch {
		case q.handoff != nil:
			batch, off, attempt = q.handoff, q.handoffAt, 2
			q.handoff = nil
		case q.inFlight || len(q.pending) == 0:
			q.mu.Unlock()
			return
		default:
			batch = q.takeLocked()
		}
		q.mu.Unlock()

		start := monoclock.Now()
		for ; off < len(batch); off += q.cfg.BatchSize {
			q.write(batch[off:min(off+q.cfg.BatchSize, len(batch))], attempt)
			attempt = 1
		}
		fast, lone := monoclock.Since(start) <= slowWrite, len(batch) == 1
		more := q.finish(batch)
		if fast && lone && !more {
			q.handover.Store(false)
		}
		if !more || q.cfg.Async && !q.gatheredEnough() {
			return
		}
	}
}

// gatheredEnough reports whether an Async queue has a full batch pending
// (or is closing), so that the writer goes on rather than gather again.
func (q *Queue) gatheredEnough() bool {
	select {
	case <-q.closing:
		return true
	default:
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.pending) >= q.cfg.BatchSize
}

// syncLoop calls the Writer's Sync every SyncInterval when events were
// written since the last call, and once more after the writer goroutine
// stopped. Without a Syncer it only waits for the writer to stop.
func (q *Queue) syncLoop() {
	defer close(q.synced)
	if q.syncer == nil {
		<-q.stopped
		return
	}
	t := time.NewTicker(q.cfg.SyncInterval)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			if q.dirty.Swap(false) {
				q.sync()
			}
		case <-q.stopped:
			q.dirty.Store(false)
			q.sync()
			return
		}
	}
}

// sync calls the Writer's Sync and counts the outcome; failures are logged
// at most once every dropLogEvery.
func (q *Queue) sync() {
	if err := q.syncer.Sync(); err != nil {
		q.syncErrors.Add(1)
		now := q.opts.now().UnixNano()
		if last := q.lastSyncWarn.Load(); (last == 0 || now-last >= int64(dropLogEvery)) && q.lastSyncWarn.CompareAndSwap(last, now) {
			q.log.Warn("sink: sync failed; written events survive a process crash but may not survive a machine crash",
				"sync_errors_total", q.syncErrors.Load(), "error", err)
		}
		return
	}
	q.syncs.Add(1)
}

// write hands batch to the Writer, retrying as documented on Queue, and
// counts the outcome. attempt is the number of the first try: 2 when the
// batch's caller already tried once.
func (q *Queue) write(batch []Event, attempt int) {
	n := uint64(len(batch))
	if n == 0 {
		return
	}
	if attempt > 1 {
		// The caller's failed try counts; wait as after it.
		if !q.sleep(backoff(attempt-1, q.opts.backoffMin, q.opts.backoffMax)) {
			q.droppedShutdown.Add(n)
			return
		}
	}
	for ; ; attempt++ {
		if q.runCtx.Err() != nil {
			q.droppedShutdown.Add(n)
			return
		}
		err := q.safeWrite(batch)
		if err == nil {
			q.wrote()
			q.written.Add(n)
			return
		}
		if q.runCtx.Err() != nil {
			q.droppedShutdown.Add(n)
			return
		}
		q.writeErrors.Add(1)
		if attempt >= q.opts.attempts {
			q.droppedWriteError.Add(n)
			q.log.Error("sink: write failed, dropping batch",
				"events", n, "attempts", attempt, "error", err)
			return
		}
		wait := backoff(attempt, q.opts.backoffMin, q.opts.backoffMax)
		q.log.Warn("sink: write failed, retrying",
			"events", n, "attempt", attempt, "retry_in", wait, "error", err)
		q.sleep(wait)
	}
}

// sleep waits for d, or until Close gives up; it reports whether d
// passed.
func (q *Queue) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-q.runCtx.Done():
		return false
	}
}

// safeWrite calls the Writer, turning a panic into an error. A failure
// marks the Queue failing (see Durable) until a write succeeds.
func (q *Queue) safeWrite(batch []Event) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("sink: writer panicked: %v", r)
		}
		if err != nil && q.runCtx.Err() == nil {
			e := err
			q.lastErr.Store(&e)
			if !q.failing.Swap(true) {
				q.log.Error("sink: events cannot be written; under events.on_write_failure: refuse, calls are refused until they can",
					"error", err)
			}
		}
	}()
	return q.w.WriteEvents(q.runCtx, batch)
}

// wrote clears the failing mark after a successful write.
func (q *Queue) wrote() {
	if q.failing.Load() && q.failing.Swap(false) {
		q.log.Info("sink: events are written again")
	}
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
