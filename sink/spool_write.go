package sink

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"sync"
)

// Writing: framing batches into the open segment, sealing, the disk
// budget, and Sync.

// WriteEvents appends events to the open segment, as one or more records
// stored with one copy into the segment's memory mapping (or, where the
// file system cannot preallocate and map a segment, one write(2)): a nil
// error means they are in the file (in the page cache), survive the death
// of the process, and will ship; Sync makes them survive a machine crash.
// It never waits on the destination, nor on an fsync. Events are encoded
// before the spool's lock is taken, so concurrent calls wait for each
// other only for the copy. When the spool then holds more than MaxBytes
// the oldest segments are dropped.
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
	enc := encoders.Get().(*eventEncoder)
	defer func() {
		enc.reset()
		encoders.Put(enc)
	}()
	if err := s.frame(enc, events); err != nil {
		return err
	}
	data := enc.buf
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.closed {
		return ErrClosed
	}
	if o := s.open; o != nil && o.m != nil && int64(len(o.m))-o.size < int64(len(data)) {
		s.mu.Lock()
		s.seal() // no room left in the mapping
		s.mu.Unlock()
	}
	if s.opts.fault != nil {
		if err := s.opts.fault(); err != nil {
			return fmt.Errorf("sink: spool write: %w", err)
		}
	}
	if s.open == nil {
		if err := s.createOpen(len(data)); err != nil {
			return fmt.Errorf("sink: spool: %w", err)
		}
	}
	o := s.open
	var (
		n   int
		err error
	)
	if o.m != nil {
		s.populateAhead(o, len(data))
		if err = copyMapped(o.m[o.size:], data); err == nil {
			n = len(data)
		}
	} else {
		n, err = o.f.Write(data)
	}
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

// populateWindow is how much of a mapped segment populateAhead faults in
// at once: 8 pages, about 100 lone calls' events. Per event it measured
// 0.5 to 0.7 µs of CPU against 1.3 to 2 µs for faulting pages in as copies
// touch them (32 MiB of 300-byte copies into a preallocated ext4 file,
// fsync every 100 ms; 8 KiB windows saved half as much, 64 and 256 KiB no
// more), and the call that crosses into a new window waits about 20 µs
// for it.
const populateWindow = 32 << 10

// populateAhead faults in the pages of o's mapping that a copy of n bytes
// at o.size reaches and have not been, with the rest of a populateWindow
// past them, so that copies do not fault page by page; after an fsync
// (which write-protects the pages it wrote back) it populates again from
// the page the copy starts in. Where the kernel
// cannot (before Linux 5.14) the spool stops trying, and copies fault the
// pages in one by one. The caller holds wmu.
func (s *Spool) populateAhead(o *segment, n int) {
	if s.noPopulate {
		return
	}
	if gen := s.syncs.Load(); gen != o.populatedAt {
		// An fsync wrote the pages back and write-protected them: the
		// next copy would fault on each again.
		o.populated, o.populatedAt = 0, gen
	}
	end := o.size + int64(n)
	if end <= o.populated {
		return
	}
	from := max(o.populated, o.size) &^ int64(os.Getpagesize()-1)
	to := min(int64(len(o.m)), end+populateWindow)
	if err := populateSegment(o.m[from:to]); err != nil {
		s.noPopulate = true
		s.log.Debug("sink: spool cannot populate mapped segments ahead of copies", "error", err)
		return
	}
	o.populated = to
}

// encoders holds event encoders for WriteEvents, which encodes outside
// the spool's lock.
var encoders = sync.Pool{New: func() any { return newRecordEncoder() }}

// newRecordEncoder returns an encoder of events as a spool's records hold
// them: fields at their zero value left out, which keeps a lone call's
// event to about 300 bytes (720 in full) and so to fewer pages of the
// segment to fault in.
func newRecordEncoder() *eventEncoder {
	return &eventEncoder{omitZero: true}
}

// copyMapped copies src to the start of dst, a segment's mapping, and
// returns an error where the copy faults (the file was truncated under
// the mapping, or the disk failed to read a page back) rather than let
// the fault end the process.
func copyMapped(dst, src []byte) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("fault in the segment's memory mapping: %v", r)
		}
	}()
	copy(dst, src)
	return nil
}

// eventBytesGuess is about what an event takes in a record (305 bytes for
// a validated call's, zero fields left out).
const eventBytesGuess = 320

// maxEventBytes is the most one event may take in a record, so that a
// record, cut after the event that takes it past recordSplitBytes, stays
// within maxRecordBytes.
const maxEventBytes = maxRecordBytes - recordSplitBytes

// frame encodes events into enc's buffer as records: a record ends after
// the event that takes its payload to recordSplitBytes.
func (s *Spool) frame(enc *eventEncoder, events []Event) error {
	// Grown once for the batch: a pooled encoder's buffer goes with the
	// pool at each garbage collection, and growing it anew by doubling
	// for a batch of a thousand events copied it ten times over into
	// freshly faulted memory (most of a batched write's CPU, by perf).
	enc.buf = slices.Grow(enc.buf, len(events)*eventBytesGuess)
	rec := -1
	for i := range events {
		if rec < 0 {
			enc.buf, rec = beginRecord(enc.buf)
		}
		before := len(enc.buf)
		if err := enc.encode(&events[i]); err != nil {
			return fmt.Errorf("sink: spool: encode event %d of %d: %w", i+1, len(events), err)
		}
		if size := len(enc.buf) - before; size > s.opts.maxEventBytes {
			return fmt.Errorf("sink: spool: event %d of %d encodes to %d bytes, more than %d", i+1, len(events), size, s.opts.maxEventBytes)
		}
		if len(enc.buf)-rec-recordHeaderSize >= recordSplitBytes {
			endRecord(enc.buf, rec)
			rec = -1
		}
	}
	if rec >= 0 {
		endRecord(enc.buf, rec)
	}
	return nil
}

// createOpen creates the next open segment, with room for at least need
// bytes: a .map segment, preallocated to SegmentBytes (or need, if more)
// and mapped, or where the file system cannot do that an .open one,
// appended to with write(2). The next Sync syncs the directory, so that
// the file outlives a machine crash along with the records synced into
// it. The caller holds wmu.
func (s *Spool) createOpen(need int) error {
	for {
		s.mu.Lock() // Sync reads nextSeq holding mu only
		seq := s.nextSeq
		s.nextSeq++
		s.mu.Unlock()
		s.mu.Lock()
		low := s.lowSpace
		s.mu.Unlock()
		ext := mappedExt
		if s.noMap || low {
			ext = openExt // nothing preallocated while space is low
		}
		path := filepath.Join(s.cfg.Dir, segmentName(seq, ext))
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL|os.O_APPEND, spoolFileMode)
		if errors.Is(err, fs.ErrExist) {
			continue // put there by hand; it ships after the next start
		}
		if err != nil {
			return err
		}
		var m []byte
		if ext == mappedExt {
			if m, err = mapSegment(f, mappedSize(max(s.cfg.SegmentBytes, int64(need)))); err != nil {
				m = nil
				if path, err = s.unmappable(f, path, seq, err); err != nil {
					f.Close()
					os.Remove(path)
					return err
				}
			}
		}
		s.mu.Lock()
		s.open = &segment{seq: seq, path: path, f: f, m: m, created: s.opts.now()}
		s.dirDirty = true
		s.mu.Unlock()
		return nil
	}
}

// mappedSize rounds a segment's size up to whole pages.
func mappedSize(n int64) int {
	page := int64(os.Getpagesize())
	return int((n + page - 1) / page * page)
}

// unmappable turns the new segment f at path, which could not be
// preallocated or mapped (mapErr), into an .open segment appended to with
// write(2), and returns its path. When the file system cannot do it at
// all, every later segment is appended to with write(2) too; otherwise
// (the disk is full, say) the next segment tries again.
func (s *Spool) unmappable(f *os.File, path string, seq uint64, mapErr error) (string, error) {
	if err := f.Truncate(0); err != nil {
		return path, err
	}
	open := filepath.Join(s.cfg.Dir, segmentName(seq, openExt))
	if err := os.Rename(path, open); err != nil {
		return path, err
	}
	if mapUnsupported(mapErr) {
		s.noMap = true
		s.log.Info("sink: spool directory's file system cannot preallocate and map segments; appending with write(2)",
			"dir", s.cfg.Dir, "error", mapErr)
	} else {
		s.log.Warn("sink: spool cannot preallocate and map a segment; appending to this one with write(2)",
			"segment", filepath.Base(open), "error", mapErr)
	}
	return open, nil
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
	s.unmap(o)
	o.f.Close()
	os.Remove(o.path)
	s.open = nil
}

// unmap releases the open segment's mapping, if it has one, and cuts the
// file to the records written into it, so that it reads like a segment
// appended to with write(2). A file it cannot cut keeps a zero tail, which
// scanning a segment skips. The caller holds wmu and mu.
func (s *Spool) unmap(o *segment) {
	if o.m == nil {
		return
	}
	if err := unmapSegment(o.m); err != nil {
		s.log.Error("sink: spool cannot unmap a segment", "segment", filepath.Base(o.path), "error", err)
	}
	o.m = nil
	if err := o.f.Truncate(o.size); err != nil {
		s.log.Error("sink: spool cannot cut a segment to its records; its zero tail is skipped when it ships",
			"segment", filepath.Base(o.path), "error", err)
	}
}

// seal renames the open segment from .map or .open to .seg, making it
// shippable, and leaves its file to the next Sync to fsync and close. If
// the rename fails it ships under its open name. The caller holds wmu
// and mu.
func (s *Spool) seal() {
	o := s.open
	s.open = nil
	s.unmap(o)
	// The next Sync fsyncs and closes the file; a spool that is never
	// synced again keeps it open until the process ends.
	s.unsynced = append(s.unsynced, o.f)
	o.f = nil
	path := filepath.Join(s.cfg.Dir, segmentName(o.seq, segmentExt))
	if err := os.Rename(o.path, path); err != nil {
		s.log.Error("sink: spool cannot seal segment; shipping it under its open name",
			"segment", filepath.Base(o.path), "error", err)
	} else {
		// The next Sync syncs the directory; after a machine crash before
		// that the file may be open again, which OpenSpool seals.
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
		if err := s.fsync.Sync(f); err != nil {
			errs = append(errs, fmt.Errorf("sink: spool sync %s: %w", filepath.Base(f.Name()), err))
		}
		f.Close()
	}
	if open != nil && size > 0 {
		if err := s.fsync.Sync(open); err != nil && !errors.Is(err, os.ErrClosed) {
			errs = append(errs, fmt.Errorf("sink: spool sync %s: %w", filepath.Base(open.Name()), err))
		}
		s.syncs.Add(1)
	}
	if dirDirty {
		if err := syncDirWith(s.fsync, s.cfg.Dir); err != nil {
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
