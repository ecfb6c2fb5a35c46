package sink

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/toolgate/toolgate/internal/section"
	"github.com/toolgate/toolgate/sink/internal/fsync"
)

// Spool defaults, applied by SpoolConfig.Validate to zero fields.
const (
	// DefaultSpoolMaxBytes is the default disk budget of a spool: 1 GiB.
	DefaultSpoolMaxBytes = 1 << 30
	// DefaultSpoolSegmentBytes is the default size at which a segment is
	// sealed and becomes shippable: 4 MiB.
	DefaultSpoolSegmentBytes = 4 << 20
	// DefaultSpoolSegmentAge is the default longest time a segment stays
	// open after its first record.
	DefaultSpoolSegmentAge = time.Second
	// DefaultSpoolRetryMin is the default wait after a first failed ship.
	DefaultSpoolRetryMin = 200 * time.Millisecond
	// DefaultSpoolRetryMax is the default longest wait between two ship
	// attempts.
	DefaultSpoolRetryMax = 30 * time.Second
	// DefaultSpoolMinFreeBytes is the default free-space watermark of the
	// spool's file system: 64 MiB.
	DefaultSpoolMinFreeBytes = 64 << 20
)

// DropBudget is the reason label of events and segments a Spool dropped to
// stay within its disk budget.
const DropBudget = "budget"

// ErrSpoolInUse is returned by OpenSpool when another Spool (in this
// process or another) holds the directory, wrapped with the holder (its
// pid, as the lock file records it), the directory and the lock file:
// "sink: spool directory in use: another toolgate process (pid 1234) holds
// DIR (flock on DIR/LOCK)".
var ErrSpoolInUse = errors.New("sink: spool directory in use")

// SpoolConfig configures a Spool. Only Dir must be set: Validate replaces
// each other zero field with its default.
type SpoolConfig struct {
	// Dir is the directory of segment files, created with mode 0700 if
	// missing. It belongs to one Spool at a time. Required.
	Dir string `yaml:"dir"`
	// MaxBytes is the disk budget of the segments. Past it the oldest
	// segments are dropped, counted and logged; the open segment and the
	// one being shipped are never dropped, so the spool may pass the budget
	// by up to those two. Files moved to Dir/corrupt do not count. Default
	// DefaultSpoolMaxBytes (1 GiB).
	MaxBytes int64 `yaml:"max_bytes"`
	// SegmentBytes is the size at which the open segment is sealed and
	// becomes shippable. It may not exceed MaxBytes. The shipper holds one
	// segment's events in memory. Default DefaultSpoolSegmentBytes (4 MiB),
	// or MaxBytes when that is smaller.
	SegmentBytes int64 `yaml:"segment_bytes"`
	// SegmentAge is the longest time a segment stays open after its first
	// record before it is sealed, whatever its size: how long an event
	// waits on disk before it can ship. A duration such as "500ms" in YAML.
	// Default DefaultSpoolSegmentAge (1s).
	SegmentAge time.Duration `yaml:"segment_age"`
	// RetryMin is the wait after the first failed ship; it doubles with
	// each further failure up to RetryMax. Default DefaultSpoolRetryMin
	// (200ms).
	RetryMin time.Duration `yaml:"retry_min"`
	// RetryMax is the longest wait between two ship attempts. It may not be
	// below RetryMin. Default DefaultSpoolRetryMax (30s), or RetryMin when
	// that is larger.
	RetryMax time.Duration `yaml:"retry_max"`
	// MinFreeBytes is the free-space watermark of Dir's file system: below
	// it the spool warns (log, SpoolStatus.LowSpace, the
	// toolgate_sink_spool_low_space gauge) and sheds its slack: the open
	// segment's preallocated, unused end is released and new segments are
	// not preallocated, until the free space is back above it. Checked
	// every second. Default DefaultSpoolMinFreeBytes (64 MiB).
	MinFreeBytes int64 `yaml:"min_free_bytes"`
}

// Validate applies the defaults to zero fields and rejects a missing Dir,
// negative values, a SegmentBytes above MaxBytes and a RetryMax below
// RetryMin. Errors are *section.Error values at "spool.<field>".
func (c *SpoolConfig) Validate() error {
	if c.Dir == "" {
		return section.Errorf("spool.dir", "required")
	}
	if c.MaxBytes < 0 {
		return section.Errorf("spool.max_bytes", "must not be negative, got %d", c.MaxBytes)
	}
	if c.SegmentBytes < 0 {
		return section.Errorf("spool.segment_bytes", "must not be negative, got %d", c.SegmentBytes)
	}
	if c.SegmentAge < 0 {
		return section.Errorf("spool.segment_age", "must not be negative, got %s", c.SegmentAge)
	}
	if c.RetryMin < 0 {
		return section.Errorf("spool.retry_min", "must not be negative, got %s", c.RetryMin)
	}
	if c.RetryMax < 0 {
		return section.Errorf("spool.retry_max", "must not be negative, got %s", c.RetryMax)
	}
	if c.MinFreeBytes < 0 {
		return section.Errorf("spool.min_free_bytes", "must not be negative, got %d", c.MinFreeBytes)
	}
	if c.MinFreeBytes == 0 {
		c.MinFreeBytes = DefaultSpoolMinFreeBytes
	}
	if c.MaxBytes == 0 {
		c.MaxBytes = DefaultSpoolMaxBytes
	}
	if c.SegmentBytes == 0 {
		c.SegmentBytes = min(DefaultSpoolSegmentBytes, c.MaxBytes)
	}
	if c.SegmentAge == 0 {
		c.SegmentAge = DefaultSpoolSegmentAge
	}
	if c.RetryMin == 0 {
		c.RetryMin = DefaultSpoolRetryMin
	}
	if c.RetryMax == 0 {
		c.RetryMax = max(DefaultSpoolRetryMax, c.RetryMin)
	}
	if c.SegmentBytes > c.MaxBytes {
		return section.Errorf("spool.segment_bytes", "must not exceed spool.max_bytes (%d), got %d", c.MaxBytes, c.SegmentBytes)
	}
	if c.RetryMax < c.RetryMin {
		return section.Errorf("spool.retry_max", "must not be below spool.retry_min (%s), got %s", c.RetryMin, c.RetryMax)
	}
	return nil
}

// SpoolStatus is a snapshot of a Spool: what waits on disk, how far behind
// shipping is, and what was lost. Every event WriteEvents accepted is, at
// any time, pending, shipped, dropped for the budget, or (rarely) in a
// damaged record of a segment moved to Dir/corrupt.
type SpoolStatus struct {
	// Segments is the number of segment files waiting to ship, the open
	// one included.
	Segments int `json:"segments"`
	// Bytes is the size of their records. The open segment's file takes
	// SegmentBytes on disk from its creation (it is preallocated), unless
	// the file system cannot map it.
	Bytes int64 `json:"bytes"`
	// PendingEvents is the number of events they hold.
	PendingEvents int64 `json:"pending_events"`
	// OldestPending is the time of the first event of the oldest pending
	// segment: how far behind the destination is. Zero when nothing is
	// pending.
	OldestPending time.Time `json:"oldest_pending"`
	// ShippedEvents counts events the destination acknowledged; an event
	// shipped again after a restart counts again.
	ShippedEvents uint64 `json:"shipped_events"`
	// ShippedSegments counts segments shipped and deleted.
	ShippedSegments uint64 `json:"shipped_segments"`
	// LastShipSuccess is when the destination last acknowledged a segment;
	// zero if it never did since OpenSpool.
	LastShipSuccess time.Time `json:"last_ship_success"`
	// ShipErrors counts failed ship attempts: the destination's errors,
	// and local errors reading a segment.
	ShipErrors uint64 `json:"ship_errors"`
	// LastShipError is the error of the last failed attempt, kept after
	// later successes (compare LastShipErrorTime with LastShipSuccess);
	// "" if none failed.
	LastShipError string `json:"last_ship_error"`
	// LastShipErrorTime is when the last attempt failed.
	LastShipErrorTime time.Time `json:"last_ship_error_time"`
	// DroppedEvents counts events in segments dropped to stay within
	// MaxBytes.
	DroppedEvents uint64 `json:"dropped_events"`
	// DroppedSegments counts segments dropped to stay within MaxBytes.
	DroppedSegments uint64 `json:"dropped_segments"`
	// CorruptSegments counts segments found with damaged records: each was
	// copied as found to Dir/corrupt and its good records kept to ship.
	CorruptSegments uint64 `json:"corrupt_segments"`
	// TornRecords counts records cut short by a crash mid-write and
	// truncated away; their batches were never acknowledged.
	TornRecords uint64 `json:"torn_records"`
	// SyncedSegment and SyncedBytes are the sync point of the last Sync:
	// every segment numbered below SyncedSegment (the number in its file
	// name) was fsynced whole, and segment SyncedSegment up to SyncedBytes.
	// A machine crash loses at most what was written past that point.
	// Both 0 before the first Sync.
	SyncedSegment uint64 `json:"synced_segment"`
	SyncedBytes   int64  `json:"synced_bytes"`
	// LastSync is when the last successful Sync began: every event written
	// before it is durable. Zero before the first.
	LastSync time.Time `json:"last_sync"`
	// DiskFreeBytes is the free space of Dir's file system at the last
	// check (every second); 0 where it cannot be read.
	DiskFreeBytes uint64 `json:"disk_free_bytes"`
	// LowSpace is true while DiskFreeBytes is below MinFreeBytes: the
	// spool has shed its slack, and a full disk is near.
	LowSpace bool `json:"low_space"`
}

// Spool is a durable FIFO of event batches on disk, between a Queue and a
// destination Writer such as ClickHouse: the Queue's Writer is the Spool,
// and the Spool ships to the destination from its own goroutine. Nothing
// WriteEvents acknowledged is lost when the destination is slow, down or
// refusing, or when the process is killed; it is lost only when the disk
// budget forces the oldest segments out, which is counted and logged.
//
// # Writing
//
// WriteEvents encodes a batch (the same NDJSON as File), frames it in
// checksummed records and appends them to the open segment with one
// write(2): a nil error means the batch is in the file, in the page cache,
// where the death of the process cannot take it. Sync (which a Queue calls
// every SyncInterval) fsyncs what was written, and the directory after a
// segment was created or sealed; no fsync ever holds up WriteEvents. It
// never waits on the destination. The open segment is sealed (renamed from
// .open to .seg) when it reaches SegmentBytes or SegmentAge after its first
// record; only sealed segments ship.
//
// # Shipping
//
// One goroutine ships sealed segments strictly in sequence order, one
// WriteEvents call to the destination per segment (so the destination gets
// up to about SegmentBytes of events at once), and deletes a segment only
// after the destination returned nil. A failure of any kind (the
// destination down, a schema or permission error, a panic) is retried
// with exponential backoff from RetryMin to RetryMax while the data stays
// on disk; the error is kept for Status. Later segments wait behind the
// failing one.
//
// # Delivery is at least once
//
// A crash after the destination stored a segment but before the file was
// deleted ships that segment again on the next start, and a destination
// that stores a batch and still reports an error gets it again. Events
// carry a unique EventID, and the destination deduplicates on it
// (ClickHouse: a ReplacingMergeTree keyed by event_id).
//
// # Crash safety
//
// A returned nil from WriteEvents follows the write(2) of the batch: a
// killed process loses nothing it acknowledged. A machine crash loses what
// was written after the last Sync's sync point (SpoolStatus.SyncedSegment
// and SyncedBytes), which a Queue keeps within SyncInterval plus one
// fsync. OpenSpool recovers what a killed process or a crashed machine
// left: an .open segment
// is sealed; a torn last record (a write the crash cut short, never
// acknowledged) is truncated away and counted; a segment with a complete
// record whose checksum fails is copied as found to Dir/corrupt (never
// deleted, never shipped), counted, and rewritten with only its good
// records, which ship in their place. Each repair step replaces a file by
// an atomic rename, so a crash during recovery is recovered the same way
// on the next start. The same checks run again when a segment is read to
// ship: every segment ships from its file, read back from the page cache
// and decoded (decodeEvent), so the spool holds no copy of its events in
// memory. Deleting a shipped segment is not synced: a crash may bring it
// back, and it ships again. See spool_segment.go for the file format.
//
// A Spool is safe for concurrent use. Log messages carry counts, segment
// names and errors, never event contents.
type Spool struct {
	cfg  SpoolConfig
	dst  Writer
	log  *slog.Logger
	opts spoolOptions
	lock *os.File // flock of Dir/LOCK; closed when the shipper stops
	// fsync runs Sync's fsyncs without a thread waiting in them; closed
	// by Close after its last Sync.
	fsync *fsync.Syncer

	// wmu serializes appends: WriteEvents holds it across its write, and
	// so does whoever seals or replaces the open segment; Sync never takes
	// it. It guards noMap, noPopulate and the open segment's populated,
	// and (with mu) nextSeq, closed and open. Lock order: wmu, then mu.
	wmu        sync.Mutex
	nextSeq    uint64
	noMap      bool // the file system cannot map segments: append with write(2)
	noPopulate bool // the kernel cannot populate mappings ahead of copies

	// mu guards the bookkeeping below, up to wake, and is only ever held
	// briefly: never across an fsync or a call to the destination, so
	// that Status and the shipper do not wait on the disk.
	mu       sync.Mutex
	closed   bool       // written holding wmu and mu
	open     *segment   // written holding wmu and mu; nil until a write needs one
	sealed   []*segment // in sequence order; sealed[0] ships next
	inflight *segment   // sealed[0] while the shipper works on it, or nil
	bytes    int64      // of open and sealed
	pending  int64      // events in open and sealed
	unsynced []*os.File // sealed segments' files, for Sync to fsync and close
	dirDirty bool       // a segment was created or renamed since the last Sync

	// syncMu serializes Sync. The sync point says what the last Sync made
	// durable: every segment before syncedSeq, and syncedBytes of segment
	// syncedSeq; guarded by mu.
	syncMu    sync.Mutex
	syncedSeq uint64
	// syncs counts the fsyncs of open segments: each writes their dirty
	// pages back and so makes the kernel write-protect them again.
	syncs       atomic.Uint64
	syncedBytes int64
	lastSync    time.Time // when the last successful Sync began

	shippedEvents   uint64
	shipData        []byte    // the shipper's: the last segment's file, to read the next into
	shipEvents      []Event   // the shipper's: emptied, to decode the next segment into
	shipLines       fileLines // the shipper's: emptied, to rewrite the next segment into for a File
	shippedSegments uint64
	lastSuccess     time.Time
	shipErrors      uint64
	lastErr         string
	lastErrTime     time.Time
	droppedEvents   uint64
	droppedSegments uint64
	corrupt         uint64
	torn            uint64
	diskFree        uint64       // at the last space check
	lowSpace        bool         // diskFree < MinFreeBytes: new segments are not preallocated
	nextSpaceCheck  time.Time    // the shipper's
	minFree         atomic.Int64 // cfg.MinFreeBytes (tests move it)

	wake      chan struct{} // a segment was sealed or opened
	closeOnce sync.Once
	closing   chan struct{} // closed when Close begins
	stopped   chan struct{} // closed when the shipper returns
	runCtx    context.Context
	cancel    context.CancelFunc
}

// segment is one segment file.
type segment struct {
	seq  uint64
	path string
	f    *os.File // the open segment only
	m    []byte   // the open segment's memory mapping, if it is a .map segment
	// populated is how far into m pages were faulted in ahead of the
	// copies, as of the spool's syncs numbered populatedAt (see
	// populateAhead).
	populated   int64
	populatedAt uint64
	size        int64     // bytes in the file
	events      int64     // events in its records
	first       time.Time // Time of its first event; zero if unknown
	created     time.Time // when the open segment got its first record
}

// spoolOptions holds what tests change: the clock and the largest event.
type spoolOptions struct {
	now           func() time.Time
	maxEventBytes int
	noMap         bool // append with write(2), as where the file system cannot map segments
	// fault, when set, is called before each write and its error returned
	// as the write's: tests inject a full disk (ENOSPC) with it.
	fault func() error
}

var _ Writer = (*Spool)(nil)

// OpenSpool opens the spool in cfg.Dir, creating the directory if needed,
// recovers what a previous process left there (see Spool), and starts the
// shipper, which sends recovered segments first, in order. cfg is
// validated (defaults applied) on a copy. A nil log discards messages.
// Call Close to stop the shipper and release the directory.
//
// Recovery reads every segment once to check its records, so OpenSpool
// takes time in proportion to the backlog (at disk speed). It fails when
// the directory is used by another Spool (ErrSpoolInUse) or cannot be
// read or repaired.
func OpenSpool(cfg SpoolConfig, dst Writer, log *slog.Logger) (*Spool, error) {
	return openSpool(cfg, dst, log, spoolOptions{now: time.Now, maxEventBytes: maxEventBytes})
}

func openSpool(cfg SpoolConfig, dst Writer, log *slog.Logger, opts spoolOptions) (*Spool, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if dst == nil {
		return nil, errors.New("sink: open spool: nil destination Writer")
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(cfg.Dir, spoolDirMode); err != nil {
		return nil, fmt.Errorf("sink: open spool: %w", err)
	}
	lock, err := lockSpoolDir(filepath.Join(cfg.Dir, lockName))
	if err != nil {
		return nil, fmt.Errorf("sink: open spool: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Spool{
		cfg:     cfg,
		dst:     dst,
		log:     log,
		opts:    opts,
		lock:    lock,
		nextSeq: 1,
		wake:    make(chan struct{}, 1),
		closing: make(chan struct{}),
		stopped: make(chan struct{}),
		runCtx:  ctx,
		cancel:  cancel,
		noMap:   opts.noMap,
		fsync:   fsync.New(),
	}
	s.minFree.Store(cfg.MinFreeBytes)
	log.Debug("sink: spool fsyncs", "dir", cfg.Dir, "mode", s.fsync.Mode())
	if err := s.recoverDir(); err != nil {
		cancel()
		s.fsync.Close()
		lock.Close()
		return nil, fmt.Errorf("sink: open spool %s: %w", cfg.Dir, err)
	}
	s.mu.Lock()
	s.enforceBudget()
	st := s.statusLocked()
	s.mu.Unlock()
	if st.Segments > 0 || st.TornRecords > 0 || st.CorruptSegments > 0 {
		s.log.Info("sink: spool opened with a backlog",
			"dir", cfg.Dir, "segments", st.Segments, "events", st.PendingEvents, "bytes", st.Bytes,
			"torn_records", st.TornRecords, "corrupt_segments", st.CorruptSegments)
	}
	s.checkSpace()
	go s.run()
	return s, nil
}

// Status returns a snapshot of the spool.
func (s *Spool) Status() SpoolStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.statusLocked()
}

func (s *Spool) statusLocked() SpoolStatus {
	st := SpoolStatus{
		Segments:          len(s.sealed),
		Bytes:             s.bytes,
		PendingEvents:     s.pending,
		ShippedEvents:     s.shippedEvents,
		ShippedSegments:   s.shippedSegments,
		LastShipSuccess:   s.lastSuccess,
		ShipErrors:        s.shipErrors,
		LastShipError:     s.lastErr,
		LastShipErrorTime: s.lastErrTime,
		DroppedEvents:     s.droppedEvents,
		DroppedSegments:   s.droppedSegments,
		CorruptSegments:   s.corrupt,
		TornRecords:       s.torn,
		SyncedSegment:     s.syncedSeq,
		SyncedBytes:       s.syncedBytes,
		LastSync:          s.lastSync,
		DiskFreeBytes:     s.diskFree,
		LowSpace:          s.lowSpace,
	}
	for _, seg := range s.sealed {
		if !seg.first.IsZero() {
			st.OldestPending = seg.first
			break
		}
	}
	if s.open != nil {
		st.Segments++
		if st.OldestPending.IsZero() {
			st.OldestPending = s.open.first
		}
	}
	return st
}

// Close seals the open segment and syncs it, then makes one last attempt to ship every
// segment, in order, stopping at the first failure, and stops the
// shipper. What is not shipped stays on disk for the next OpenSpool, and
// Close still returns nil: nothing is lost. WriteEvents then returns
// ErrClosed. Close the Queue that writes to the Spool first.
//
// If ctx ends first, Close cancels the context given to the destination
// and returns the context's error; the shipper stops once the destination
// returns, and releases the directory then. Calling Close again waits the
// same way.
func (s *Spool) Close(ctx context.Context) error {
	s.closeOnce.Do(func() {
		s.wmu.Lock()
		s.mu.Lock()
		s.closed = true
		if s.open != nil {
			s.seal()
		}
		s.mu.Unlock()
		s.wmu.Unlock()
		if err := s.Sync(); err != nil {
			s.log.Warn("sink: spool sync at close failed", "error", err)
		}
		if err := s.fsync.Close(); err != nil {
			s.log.Warn("sink: spool close", "error", err)
		}
		close(s.closing)
	})
	select {
	case <-s.stopped:
		return nil
	case <-ctx.Done():
	}
	select {
	case <-s.stopped: // finished just as ctx ended
		return nil
	default:
	}
	s.cancel()
	return fmt.Errorf("sink: close spool: %w", ctx.Err())
}
