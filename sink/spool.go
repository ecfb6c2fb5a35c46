package sink

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
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
)

// DropBudget is the reason label of events and segments a Spool dropped to
// stay within its disk budget.
const DropBudget = "budget"

// ErrSpoolInUse is returned, wrapped with the lock file's path, by
// OpenSpool when another Spool (in this process or another) holds the
// directory.
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
}

// Validate applies the defaults to zero fields and rejects a missing Dir,
// negative values, a SegmentBytes above MaxBytes and a RetryMax below
// RetryMin. Errors name the field as "spool.<field>".
func (c *SpoolConfig) Validate() error {
	if c.Dir == "" {
		return errors.New("spool.dir: required")
	}
	if c.MaxBytes < 0 {
		return fmt.Errorf("spool.max_bytes: must not be negative, got %d", c.MaxBytes)
	}
	if c.SegmentBytes < 0 {
		return fmt.Errorf("spool.segment_bytes: must not be negative, got %d", c.SegmentBytes)
	}
	if c.SegmentAge < 0 {
		return fmt.Errorf("spool.segment_age: must not be negative, got %s", c.SegmentAge)
	}
	if c.RetryMin < 0 {
		return fmt.Errorf("spool.retry_min: must not be negative, got %s", c.RetryMin)
	}
	if c.RetryMax < 0 {
		return fmt.Errorf("spool.retry_max: must not be negative, got %s", c.RetryMax)
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
		return fmt.Errorf("spool.segment_bytes: must not exceed spool.max_bytes (%d), got %d", c.MaxBytes, c.SegmentBytes)
	}
	if c.RetryMax < c.RetryMin {
		return fmt.Errorf("spool.retry_max: must not be below spool.retry_min (%s), got %s", c.RetryMin, c.RetryMax)
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
	// Bytes is their size on disk.
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
// ship. Deleting a shipped segment is not synced: a crash may bring it
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

	// wmu serializes appends: WriteEvents holds it across its write, and
	// so does whoever seals or replaces the open segment; Sync never takes
	// it. It
	// guards enc, and (with mu) nextSeq, closed and open. Lock order:
	// wmu, then mu.
	wmu     sync.Mutex
	enc     *eventEncoder
	nextSeq uint64

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
	syncMu      sync.Mutex
	syncedSeq   uint64
	syncedBytes int64
	lastSync    time.Time // when the last successful Sync began

	shippedEvents   uint64
	shippedSegments uint64
	lastSuccess     time.Time
	shipErrors      uint64
	lastErr         string
	lastErrTime     time.Time
	droppedEvents   uint64
	droppedSegments uint64
	corrupt         uint64
	torn            uint64

	wake      chan struct{} // a segment was sealed or opened
	closeOnce sync.Once
	closing   chan struct{} // closed when Close begins
	stopped   chan struct{} // closed when the shipper returns
	runCtx    context.Context
	cancel    context.CancelFunc
}

// segment is one segment file.
type segment struct {
	seq     uint64
	path    string
	f       *os.File  // the open segment only
	size    int64     // bytes in the file
	events  int64     // events in its records
	first   time.Time // Time of its first event; zero if unknown
	created time.Time // when the open segment got its first record
}

// spoolOptions holds what tests change: the clock and the largest event.
type spoolOptions struct {
	now           func() time.Time
	maxEventBytes int
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
		enc:     newEventEncoder(),
		nextSeq: 1,
		wake:    make(chan struct{}, 1),
		closing: make(chan struct{}),
		stopped: make(chan struct{}),
		runCtx:  ctx,
		cancel:  cancel,
	}
	if err := s.recoverDir(); err != nil {
		cancel()
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
	go s.run()
	return s, nil
}

// recoverDir removes leftover temporary files, checks and repairs every
// segment in sequence order, seals the .open ones, and sets the next
// sequence number past every segment seen, including those in
// Dir/corrupt, so that no name is reused.
func (s *Spool) recoverDir() error {
	dir := s.cfg.Dir
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	if cents, err := os.ReadDir(filepath.Join(dir, corruptDir)); err == nil {
		for _, e := range cents {
			if strings.HasSuffix(e.Name(), tmpExt) {
				os.Remove(filepath.Join(dir, corruptDir, e.Name()))
			} else if seq, ok := parseSeq(e.Name()); ok {
				s.nextSeq = max(s.nextSeq, seq+1)
			}
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	type found struct {
		seq  uint64
		name string
		ext  string
	}
	var files []found
	for _, e := range entries {
		name := e.Name()
		if strings.HasSuffix(name, tmpExt) {
			if err := os.Remove(filepath.Join(dir, name)); err != nil {
				return err
			}
			continue
		}
		seq, ext, ok := parseSegmentName(name)
		if !ok || !e.Type().IsRegular() {
			continue
		}
		files = append(files, found{seq: seq, name: name, ext: ext})
		s.nextSeq = max(s.nextSeq, seq+1)
	}
	sort.Slice(files, func(i, j int) bool {
		if files[i].seq != files[j].seq {
			return files[i].seq < files[j].seq
		}
		return files[i].ext > files[j].ext // .seg before .open
	})
	for i, fl := range files {
		if i > 0 && files[i-1].seq == fl.seq {
			// Sealing renames, so a sequence number never has both files;
			// if one appears anyway, keep it on disk for a person to read.
			s.log.Error("sink: spool segment has both a .seg and an .open file; leaving the .open one unshipped",
				"segment", fl.name)
			continue
		}
		path := filepath.Join(dir, fl.name)
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		sc := scanSegment(data)
		if data, err = s.repair(path, data, sc); err != nil {
			return err
		}
		if len(data) == 0 {
			if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
			continue
		}
		if fl.ext == openExt {
			sealed := filepath.Join(dir, segmentName(fl.seq, segmentExt))
			if err := os.Rename(path, sealed); err != nil {
				return err
			}
			path = sealed
		}
		seg := &segment{seq: fl.seq, path: path, size: int64(len(data))}
		for _, r := range scanSegment(data).good {
			seg.events += int64(countEvents(r.payload(data)))
			if seg.first.IsZero() {
				seg.first = firstEventTime(r.payload(data))
			}
		}
		s.sealed = append(s.sealed, seg)
		s.bytes += seg.size
		s.pending += seg.events
	}
	return syncDir(dir)
}

// repair brings the file at path, holding data, to the state scan calls
// for, and returns what the file holds then. A segment with bad records is
// first copied as it is to Dir/corrupt (under a name not taken yet), then
// rewritten with its good records only (removed if none is left): both by
// write, fsync and rename, so that a crash in between leaves the damaged
// file in place to be repaired again. A torn tail is truncated in place.
func (s *Spool) repair(path string, data []byte, sc segmentScan) ([]byte, error) {
	name := filepath.Base(path)
	switch {
	case sc.bad > 0:
		cdir := filepath.Join(s.cfg.Dir, corruptDir)
		if err := os.MkdirAll(cdir, spoolDirMode); err != nil {
			return nil, err
		}
		cname, err := freeName(cdir, name)
		if err != nil {
			return nil, err
		}
		if err := writeFileSync(filepath.Join(cdir, cname), data); err != nil {
			return nil, err
		}
		var kept []byte
		for _, r := range sc.good {
			kept = append(kept, data[r.off:r.end]...)
		}
		if len(kept) == 0 {
			if err := os.Remove(path); err != nil {
				return nil, err
			}
			if err := syncDir(s.cfg.Dir); err != nil {
				return nil, err
			}
		} else if err := writeFileSync(path, kept); err != nil {
			return nil, err
		}
		s.mu.Lock()
		s.corrupt++
		s.mu.Unlock()
		s.log.Error("sink: spool segment has damaged records; copied aside, shipping its good records",
			"segment", name, "copied_to", filepath.Join(corruptDir, cname),
			"bad_records", sc.bad, "good_records", len(sc.good), "bytes_not_shipped", len(data)-len(kept))
		return kept, nil
	case sc.torn:
		if err := truncateSync(path, int64(sc.end)); err != nil {
			return nil, err
		}
		s.mu.Lock()
		s.torn++
		s.mu.Unlock()
		s.log.Warn("sink: spool segment ends in a torn record, left by a crash mid-write; truncated",
			"segment", name, "bytes_removed", len(data)-sc.end)
		return data[:sc.end], nil
	}
	return data, nil
}

// truncateSync truncates the file at path to size and syncs it.
func truncateSync(path string, size int64) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	err = f.Truncate(size)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// WriteEvents appends events to the open segment, as one or more records
// written with one write(2): a nil error means they are in the file (in
// the page cache), survive the death of the process, and will ship; Sync
// makes them survive a machine crash. It never waits on the destination,
// nor on an fsync, only on the write (and on other WriteEvents calls).
// When the spool then holds more than MaxBytes the oldest segments are
// dropped.
//
// An error means the batch is not known to be stored, and the caller may
// retry it: a write cut short is rolled back (or, if that fails too,
// truncated as a torn record before the segment ships), and the segment is
// sealed so the next batch starts a fresh file. An event that cannot be
// encoded fails the whole batch and nothing is written, as with File.
func (s *Spool) WriteEvents(ctx context.Context, events []Event) error {
	if len(events) == 0 {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.closed {
		return ErrClosed
	}
	defer s.enc.reset()
	if err := s.frame(events); err != nil {
		return err
	}
	if s.open == nil {
		if err := s.createOpen(); err != nil {
			return fmt.Errorf("sink: spool: %w", err)
		}
	}
	o := s.open
	n, err := o.f.Write(s.enc.buf.Bytes())
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.abandonOpen(n)
		return fmt.Errorf("sink: spool write %s: %w", filepath.Base(o.path), err)
	}
	first := o.events == 0
	if first {
		o.first = events[0].Time
	}
	o.size += int64(n)
	o.events += int64(len(events))
	s.bytes += int64(n)
	s.pending += int64(len(events))
	wake := first // the shipper starts the segment's age timer
	if o.size >= s.cfg.SegmentBytes {
		s.seal()
		wake = true
	}
	s.enforceBudget()
	if wake {
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}
	return nil
}

// maxEventBytes is the most one event may take in a record, so that a
// record, cut after the event that takes it past recordSplitBytes, stays
// within maxRecordBytes.
const maxEventBytes = maxRecordBytes - recordSplitBytes

// frame encodes events into s.enc's buffer as records: a record ends after
// the event that takes its payload to recordSplitBytes.
func (s *Spool) frame(events []Event) error {
	buf := &s.enc.buf
	rec := -1
	for i := range events {
		if rec < 0 {
			rec = beginRecord(buf)
		}
		before := buf.Len()
		if err := s.enc.encode(&events[i]); err != nil {
			return fmt.Errorf("sink: spool: encode event %d of %d: %w", i+1, len(events), err)
		}
		if size := buf.Len() - before; size > s.opts.maxEventBytes {
			return fmt.Errorf("sink: spool: event %d of %d encodes to %d bytes, more than %d", i+1, len(events), size, s.opts.maxEventBytes)
		}
		if buf.Len()-rec-recordHeaderSize >= recordSplitBytes {
			endRecord(buf, rec)
			rec = -1
		}
	}
	if rec >= 0 {
		endRecord(buf, rec)
	}
	return nil
}

// createOpen creates the next .open segment. The next Sync syncs the
// directory, so that the file outlives a machine crash along with the
// records synced into it. The caller holds wmu.
func (s *Spool) createOpen() error {
	for {
		s.mu.Lock() // Sync reads nextSeq holding mu only
		seq := s.nextSeq
		s.nextSeq++
		s.mu.Unlock()
		path := filepath.Join(s.cfg.Dir, segmentName(seq, openExt))
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|os.O_APPEND, spoolFileMode)
		if errors.Is(err, fs.ErrExist) {
			continue // put there by hand; it ships after the next start
		}
		if err != nil {
			return err
		}
		s.mu.Lock()
		s.open = &segment{seq: seq, path: path, f: f, created: s.opts.now()}
		s.dirDirty = true
		s.mu.Unlock()
		return nil
	}
}

// abandonOpen handles a failed write to the open segment, of
// which n bytes were written: it truncates them away and seals the
// segment (or removes it if it holds nothing), so that the next batch
// starts a fresh file rather than trust this one. A tail it cannot
// truncate reads as torn when the segment ships or the spool reopens. The
// caller holds wmu and mu.
func (s *Spool) abandonOpen(n int) {
	o := s.open
	if n > 0 {
		if err := o.f.Truncate(o.size); err != nil {
			s.log.Error("sink: spool cannot roll back a failed write; the torn record is removed when the segment ships",
				"segment", filepath.Base(o.path), "error", err)
		}
	}
	if o.events > 0 {
		s.seal()
		return
	}
	o.f.Close()
	os.Remove(o.path)
	s.open = nil
}

// seal renames the open segment from .open to .seg, making it shippable,
// and leaves its file to the next Sync to fsync and close. If the rename
// fails it ships under its .open name. The caller holds wmu and mu.
func (s *Spool) seal() {
	o := s.open
	s.open = nil
	// The next Sync fsyncs and closes the file; a spool that is never
	// synced again keeps it open until the process ends.
	s.unsynced = append(s.unsynced, o.f)
	o.f = nil
	path := filepath.Join(s.cfg.Dir, segmentName(o.seq, segmentExt))
	if err := os.Rename(o.path, path); err != nil {
		s.log.Error("sink: spool cannot seal segment; shipping it under its .open name",
			"segment", filepath.Base(o.path), "error", err)
	} else {
		// The next Sync syncs the directory; after a machine crash before
		// that the file may be .open again, which OpenSpool seals.
		o.path = path
		s.dirDirty = true
	}
	s.sealed = append(s.sealed, o)
}

// enforceBudget drops the oldest sealed segments, except the one being
// shipped, while the spool holds more than MaxBytes, logging each drop.
// The caller holds mu.
func (s *Spool) enforceBudget() {
	for s.bytes > s.cfg.MaxBytes {
		i := 0
		if len(s.sealed) > 0 && s.sealed[0] == s.inflight {
			i = 1
		}
		if i >= len(s.sealed) {
			return
		}
		seg := s.sealed[i]
		if err := os.Remove(seg.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			s.log.Error("sink: spool over its disk budget and cannot drop a segment",
				"segment", filepath.Base(seg.path), "error", err)
			return
		}
		s.sealed = slices.Delete(s.sealed, i, i+1)
		s.bytes -= seg.size
		s.pending -= seg.events
		s.droppedEvents += uint64(seg.events)
		s.droppedSegments++
		s.log.Warn("sink: spool over its disk budget, dropped the oldest segment",
			"segment", filepath.Base(seg.path), "events", seg.events, "bytes", seg.size,
			"max_bytes", s.cfg.MaxBytes, "oldest_event", seg.first,
			"dropped_events_total", s.droppedEvents, "dropped_segments_total", s.droppedSegments)
	}
}

// run is the shipper goroutine: it seals the open segment when it is old
// enough, ships sealed segments, and waits (backing off after failures)
// for more; when Close begins it makes one last pass and returns.
func (s *Spool) run() {
	defer close(s.stopped)
	defer s.lock.Close()
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	var (
		failures int
		retryAt  time.Time // zero when not backing off
	)
	for {
		s.sealAged()
		if retryAt.IsZero() || !s.opts.now().Before(retryAt) {
			if err := s.shipAll(); err != nil {
				if s.runCtx.Err() != nil {
					return
				}
				failures++
				wait := backoff(failures, s.cfg.RetryMin, s.cfg.RetryMax)
				retryAt = s.opts.now().Add(wait)
				s.log.Warn("sink: spool cannot ship, retrying",
					"attempt", failures, "retry_in", wait, "error", err)
			} else {
				if failures > 0 {
					s.log.Info("sink: spool shipping again", "failed_attempts", failures)
				}
				failures, retryAt = 0, time.Time{}
			}
		}
		next := retryAt
		if d := s.openDeadline(); !d.IsZero() && (next.IsZero() || d.Before(next)) {
			next = d
		}
		if !next.IsZero() {
			timer.Reset(max(0, next.Sub(s.opts.now())))
		}
		select {
		case <-s.wake:
		case <-timer.C:
		case <-s.closing:
			err := s.shipAll()
			if st := s.Status(); st.Segments > 0 {
				s.log.Warn("sink: spool closed with events not shipped; they ship after the next start",
					"segments", st.Segments, "events", st.PendingEvents, "bytes", st.Bytes, "error", err)
			}
			return
		}
		timer.Stop()
	}
}

// sealAged seals the open segment once SegmentAge has passed since its
// first record.
func (s *Spool) sealAged() {
	if s.openDeadline().IsZero() {
		return // nothing open: no need to wait for a write in progress
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.open != nil && !s.opts.now().Before(s.open.created.Add(s.cfg.SegmentAge)) {
		s.seal()
	}
}

// openDeadline is when the open segment is to be sealed, or zero.
func (s *Spool) openDeadline() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.open == nil {
		return time.Time{}
	}
	return s.open.created.Add(s.cfg.SegmentAge)
}

// shipAll ships sealed segments in order until none is left or one fails.
func (s *Spool) shipAll() error {
	for {
		if err := s.runCtx.Err(); err != nil {
			return err
		}
		s.mu.Lock()
		if len(s.sealed) == 0 {
			s.mu.Unlock()
			return nil
		}
		seg := s.sealed[0]
		s.inflight = seg
		s.mu.Unlock()

		err := s.ship(seg)

		s.mu.Lock()
		s.inflight = nil
		if err != nil {
			s.shipErrors++
			s.lastErr = err.Error()
			s.lastErrTime = s.opts.now()
			s.enforceBudget() // it may have waited on the segment just tried
		}
		s.mu.Unlock()
		if err != nil {
			return err
		}
	}
}

// ship reads, checks (repairing if needed) and sends one segment, and
// deletes it once the destination returned nil.
func (s *Spool) ship(seg *segment) error {
	name := filepath.Base(seg.path)
	data, err := os.ReadFile(seg.path)
	if errors.Is(err, fs.ErrNotExist) {
		s.log.Error("sink: spool segment removed by someone else before it shipped",
			"segment", name, "events", seg.events)
		s.forget(seg)
		return nil
	}
	if err != nil {
		return fmt.Errorf("sink: spool read %s: %w", name, err)
	}
	sc := scanSegment(data)
	events := make([]Event, 0, seg.events)
	good := make([]recordSpan, 0, len(sc.good))
	for _, r := range sc.good {
		var derr error
		if events, derr = decodeRecord(r.payload(data), events); derr != nil {
			sc.bad++
			continue
		}
		good = append(good, r)
	}
	sc.good = good
	if sc.bad > 0 || sc.torn {
		sc.torn = sc.torn && sc.bad == 0
		kept, err := s.repair(seg.path, data, sc)
		if err != nil {
			return fmt.Errorf("sink: spool repair %s: %w", name, err)
		}
		s.mu.Lock()
		s.bytes += int64(len(kept)) - seg.size
		s.pending += int64(len(events)) - seg.events
		seg.size, seg.events = int64(len(kept)), int64(len(events))
		s.mu.Unlock()
	}
	if len(events) == 0 { // every record was damaged: nothing to send
		if err := os.Remove(seg.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("sink: spool remove %s: %w", name, err)
		}
		s.forget(seg)
		return nil
	}
	if err := s.send(events); err != nil {
		return fmt.Errorf("sink: spool ship %s (%d events): %w", name, len(events), err)
	}
	if err := os.Remove(seg.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		s.log.Error("sink: spool cannot delete a shipped segment; it ships again after a restart",
			"segment", name, "error", err)
	}
	s.forget(seg)
	s.mu.Lock()
	s.shippedEvents += uint64(len(events))
	s.shippedSegments++
	s.lastSuccess = s.opts.now()
	s.mu.Unlock()
	return nil
}

// forget removes seg from the sealed list and the totals.
func (s *Spool) forget(seg *segment) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if i := slices.Index(s.sealed, seg); i >= 0 {
		s.sealed = slices.Delete(s.sealed, i, i+1)
		s.bytes -= seg.size
		s.pending -= seg.events
	}
}

// send calls the destination, turning a panic into an error.
func (s *Spool) send(events []Event) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("destination panicked: %v", r)
		}
	}()
	return s.dst.WriteEvents(s.runCtx, events)
}

// Sync makes every record written so far durable: it fsyncs the segments
// sealed since the last Sync (and closes their files), then the open
// segment, and moves the sync point (SpoolStatus.SyncedSegment and
// SyncedBytes) past what they held when Sync began. It does not hold up
// WriteEvents, which may append meanwhile; what they append is covered by
// the next Sync. A Queue in front of the Spool calls it every
// QueueConfig.SyncInterval. A failed fsync is returned (the first, wrapped
// with the segment's name) and leaves the sync point where it was.
func (s *Spool) Sync() error {
	s.syncMu.Lock()
	defer s.syncMu.Unlock()
	start := s.opts.now()
	s.mu.Lock()
	files, dirDirty := s.unsynced, s.dirDirty
	s.unsynced, s.dirDirty = nil, false
	var (
		open      *os.File
		seq, size = s.nextSeq, int64(0)
	)
	if o := s.open; o != nil {
		open, seq, size = o.f, o.seq, o.size
	}
	s.mu.Unlock()
	var errs []error
	for _, f := range files {
		if err := f.Sync(); err != nil {
			errs = append(errs, fmt.Errorf("sink: spool sync %s: %w", filepath.Base(f.Name()), err))
		}
		f.Close()
	}
	if open != nil && size > 0 {
		if err := open.Sync(); err != nil && !errors.Is(err, os.ErrClosed) {
			errs = append(errs, fmt.Errorf("sink: spool sync %s: %w", filepath.Base(open.Name()), err))
		}
	}
	if dirDirty {
		if err := syncDir(s.cfg.Dir); err != nil {
			errs = append(errs, fmt.Errorf("sink: spool sync directory: %w", err))
		}
	}
	if len(errs) > 0 {
		if dirDirty {
			s.mu.Lock()
			s.dirDirty = true
			s.mu.Unlock()
		}
		return errs[0]
	}
	s.mu.Lock()
	s.syncedSeq, s.syncedBytes, s.lastSync = seq, size, start
	s.mu.Unlock()
	return nil
}

// AppendsLocally marks Spool as an Appender.
func (s *Spool) AppendsLocally() {}

var (
	_ Syncer   = (*Spool)(nil)
	_ Appender = (*Spool)(nil)
)

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
