package sink

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// Shipping: the goroutine that sends sealed segments to the destination.

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
		if !s.opts.now().Before(s.nextSpaceCheck) {
			s.checkSpace()
		}
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
		if next.IsZero() || s.nextSpaceCheck.Before(next) {
			next = s.nextSpaceCheck
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

// ship sends one segment, and deletes it once the destination returned
// nil: what it reads back from the file, checks (repairing if needed) and
// decodes, or, for a File, rewrites into the File's lines.
func (s *Spool) ship(seg *segment) error {
	name := filepath.Base(seg.path)
	data, err := readFileInto(seg.path, s.shipData)
	s.shipData = data
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
	var (
		n    int
		send func() error
		done func()
	)
	if lw, ok := s.dst.(lineWriter); ok {
		n, send, done = s.readLines(data, &sc, int(seg.size), lw)
	} else {
		n, send, done = s.readEvents(data, &sc, int(seg.events))
	}
	defer done()
	if sc.bad > 0 || sc.torn {
		sc.torn = sc.torn && sc.bad == 0
		kept, err := s.repair(seg.path, data, sc)
		if err != nil {
			return fmt.Errorf("sink: spool repair %s: %w", name, err)
		}
		s.mu.Lock()
		s.bytes += int64(len(kept)) - seg.size
		s.pending += int64(n) - seg.events
		seg.size, seg.events = int64(len(kept)), int64(n)
		s.mu.Unlock()
	}
	if n == 0 { // every record was damaged: nothing to send
		if err := os.Remove(seg.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("sink: spool remove %s: %w", name, err)
		}
		s.forget(seg)
		return nil
	}
	return s.sendSegment(seg, n, send)
}

// readEvents decodes the events of sc's good records, counting a record
// that does not decode as bad, and returns how many there are, what sends
// them, and what lets them go once sent.
func (s *Spool) readEvents(data []byte, sc *segmentScan, events int) (int, func() error, func()) {
	// The events go into the shipper's slice, reused from segment to
	// segment: a fresh one, a few MiB for a segment, cost a page fault
	// for every eight events written into it (a third of the decoding's
	// time in a profile of BenchmarkQueueToSpool).
	evs := slices.Grow(s.shipEvents[:0], events)
	good := make([]recordSpan, 0, len(sc.good))
	var text shipText
	for i, r := range sc.good {
		var derr error
		if evs, derr = decodeRecord(r.payload(data), text.payload(data, sc.good, i), evs); derr != nil {
			sc.bad++
			continue
		}
		good = append(good, r)
	}
	sc.good = good
	done := func() {
		clear(evs)
		s.shipEvents = evs[:0]
		if cap(s.shipData) > maxShipBuf || cap(evs) > maxShipEvents {
			s.shipData, s.shipEvents = nil, nil // a large segment's: let them go
		}
	}
	return len(evs), func() error { return s.send(evs) }, done
}

// lineWriter is a destination that takes a segment's events as File's
// lines: File.
type lineWriter interface {
	writeLines(ctx context.Context, lines *fileLines) error
}

var _ lineWriter = (*File)(nil)

// readLines rewrites the events of sc's good records into the File's
// lines (appendFullLine; a line it declines is decoded and encoded again),
// counting a record with a line that does not decode as bad, and returns
// how many there are, what sends them and what lets them go once sent.
// size is the segment's: the lines take about twice its bytes.
func (s *Spool) readLines(data []byte, sc *segmentScan, size int, lw lineWriter) (int, func() error, func()) {
	lines := &s.shipLines
	lines.reset()
	lines.buf = slices.Grow(lines.buf, 5*size/2)
	good := make([]recordSpan, 0, len(sc.good))
	for _, r := range sc.good {
		mark := lines.len()
		if !lines.appendRecord(r.payload(data)) {
			lines.truncate(mark)
			sc.bad++
			continue
		}
		good = append(good, r)
	}
	sc.good = good
	done := func() {
		if cap(s.shipData) > maxShipBuf || cap(lines.buf) > 3*maxShipBuf || cap(lines.ends) > maxShipEvents {
			s.shipData, s.shipLines = nil, fileLines{} // a large segment's: let them go
		}
	}
	return lines.len(), func() error {
		return s.guard(func() error { return lw.writeLines(s.runCtx, lines) })
	}, done
}

// appendRecord appends the File's lines of a record's payload, and
// reports false, having appended part of them perhaps, when a line does
// not decode (the record is damaged) or cannot be encoded.
func (l *fileLines) appendRecord(payload []byte) bool {
	if len(payload) == 0 || payload[len(payload)-1] != '\n' {
		return false
	}
	for line := range bytes.Lines(payload) {
		if line[0] != '{' {
			return false
		}
		var ok bool
		if l.buf, _, ok = appendFullLine(l.buf, line, &l.times); !ok {
			var e Event
			if decodeLine(line, "", &e) != nil {
				return false
			}
			var err error
			if l.buf, err = appendEvent(l.buf, &e, false); err != nil {
				return false
			}
		}
		l.ends = append(l.ends, len(l.buf))
	}
	return true
}

// sendSegment sends seg's n events with send and deletes it once the
// destination returned nil.
func (s *Spool) sendSegment(seg *segment, n int, send func() error) error {
	name := filepath.Base(seg.path)
	if err := send(); err != nil {
		return fmt.Errorf("sink: spool ship %s (%d events): %w", name, n, err)
	}
	if err := os.Remove(seg.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		s.log.Error("sink: spool cannot delete a shipped segment; it ships again after a restart",
			"segment", name, "error", err)
	}
	s.forget(seg)
	s.mu.Lock()
	s.shippedEvents += uint64(n)
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

// shipTextChunk is about how many of a segment's bytes one string copy
// holds for the events' strings to be cut from (shipText).
const shipTextChunk = 16 << 10

// shipText holds the string the events of a segment's record are cut
// from: a copy of that record and the records after it, up to
// shipTextChunk bytes (or the one record, when it is larger). A lone
// call's record is one event of about 300 bytes, so one copy serves about
// fifty of them, rather than an allocation for each string of each event
// (8 an event). It was one copy of the whole segment, a few MiB allocated
// afresh for each: on a virtual machine where a page fault costs 12 to
// 18 µs, the fault of every fresh page cost about 1.3 µs per event, and
// the garbage collector's scavenger gave those pages back between
// segments, so that the heap's small objects faulted them in again
// (docs/performance.md, "Issue 45, sixth pass"). Pieces of a size the
// heap's small-object classes serve are reused from one collection to
// the next instead. The strings are let go with the events once the
// segment has shipped.
type shipText struct {
	s    string
	from int // s is data[from : from+len(s)]
}

// payload returns the payload of good[i] as a string cut from t, copying
// the next chunk of data first when t does not hold it.
func (t *shipText) payload(data []byte, good []recordSpan, i int) string {
	r := good[i]
	if r.off < t.from || r.end > t.from+len(t.s) {
		end := r.end
		for _, n := range good[i+1:] {
			if n.end-r.off > shipTextChunk {
				break
			}
			end = n.end
		}
		t.s, t.from = string(data[r.off:end]), r.off
	}
	return t.s[r.off+recordHeaderSize-t.from : r.end-t.from]
}

// maxShipBuf and maxShipEvents bound the buffers the shipper keeps from
// one segment to the next: the file's bytes (twice the default
// segment_bytes) and the decoded events (17 MiB of them; a default segment
// of a validated call's events holds about 14,000).
const (
	maxShipBuf    = 8 << 20
	maxShipEvents = 32 << 10
)

// readFileInto reads the file at path into buf's memory, from its start,
// growing it as needed, and returns the bytes read.
func readFileInto(path string, buf []byte) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return buf[:0], err
	}
	defer f.Close()
	b := bytes.NewBuffer(buf[:0])
	if fi, err := f.Stat(); err == nil {
		b.Grow(int(fi.Size()) + bytes.MinRead) // room to see the end without growing
	}
	_, err = b.ReadFrom(f)
	return b.Bytes(), err
}

// send calls the destination, turning a panic into an error.
func (s *Spool) send(events []Event) error {
	return s.guard(func() error { return s.dst.WriteEvents(s.runCtx, events) })
}

// guard runs a call of the destination, turning a panic into an error.
func (s *Spool) guard(call func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("destination panicked: %v", r)
		}
	}()
	return call()
}
