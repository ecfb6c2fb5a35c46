package sink

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// diskFull is a test hook that fails writes with ENOSPC while set.
type diskFull struct{ on atomic.Bool }

func (d *diskFull) fault() error {
	if d.on.Load() {
		return &os.PathError{Op: "write", Path: "events", Err: syscall.ENOSPC}
	}
	return nil
}

// TestQueueDurableOnFullDisk fills the disk under a File (an injected
// ENOSPC): Record says its events are not kept, Durable reports
// ErrEventsUnavailable and the loss is counted; when space returns,
// Durable's probe finds it without a write, and the events written after
// are in the file once each.
func TestQueueDurableOnFullDisk(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "events.ndjson")
	fl, err := OpenFile(FileConfig{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	defer fl.Close()
	var full diskFull
	fl.fault = full.fault
	q, err := newQueue(fl, QueueConfig{MaxWait: 20 * time.Millisecond}, nil,
		queueOptions{attempts: 2, backoffMin: 5 * time.Millisecond, backoffMax: 5 * time.Millisecond, now: time.Now})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close(context.Background())

	if !q.Record(ev(1)) || q.Durable() != nil {
		t.Fatal("the first event was not kept on a disk with room")
	}
	full.on.Store(true)
	if q.Record(ev(2)) {
		t.Error("Record kept an event on a full disk")
	}
	err = q.Durable()
	if !errors.Is(err, ErrEventsUnavailable) || !strings.Contains(err.Error(), "no space left") {
		t.Errorf("Durable on a full disk = %v, want ErrEventsUnavailable with ENOSPC", err)
	}
	if !q.Stats().WriteFailing {
		t.Error("Stats().WriteFailing is false on a full disk")
	}
	// The event's retries fail too: it is dropped and counted.
	waitFor(t, "the lost event counted", func() bool { return q.Stats().DroppedWriteError == 1 })

	// Space returns; no write happens, yet Durable finds it (its probe
	// runs at most every probeEvery).
	full.on.Store(false)
	deadline := time.Now().Add(5 * time.Second)
	for q.Durable() != nil {
		if time.Now().After(deadline) {
			t.Fatal("Durable still fails 5 s after space returned")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !q.Record(ev(3)) {
		t.Error("Record did not keep an event once space returned")
	}
	if err := q.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := fileEventIDs(t, path)
	if want := []string{ev(1).EventID, ev(3).EventID}; strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("file holds %v, want %v (each once, nothing of the lost one)", got, want)
	}
	if s := q.Stats(); s.Recorded != s.Written+s.Dropped || s.DroppedWriteError != 1 {
		t.Errorf("stats %+v: want recorded = written + dropped, 1 write_error", s)
	}
}

// TestSpoolShedsSlackBelowWatermark: below events.spool.min_free_bytes the
// spool seals its preallocated segment (cutting its unused end), creates
// no preallocated segment after, says so in its status, and a Probe with
// the disk "full" fails until it has room.
func TestSpoolShedsSlackBelowWatermark(t *testing.T) {
	dir := t.TempDir()
	dst := &testDest{}
	var full diskFull
	cfg := fastSpool(dir)
	cfg.SegmentAge = time.Hour
	s := openTestSpoolOpts(t, cfg, dst, nil, spoolOptions{now: time.Now, maxEventBytes: maxEventBytes, fault: full.fault})
	writeSpool(t, s, spoolBatch(0, 3))
	s.mu.Lock()
	mapped := s.open != nil && s.open.m != nil
	s.mu.Unlock()
	if !mapped {
		t.Skip("this file system cannot preallocate and map segments: no slack to shed")
	}
	if st := s.Status(); st.LowSpace || st.DiskFreeBytes == 0 {
		t.Fatalf("status %+v: want room and the free space read", st)
	}
	// The watermark above any disk's free space.
	s.minFree.Store(1 << 62)
	s.measureSpace()
	if !s.Status().LowSpace {
		t.Fatal("LowSpace false below the watermark")
	}
	s.mu.Lock()
	open := s.open
	s.mu.Unlock()
	if open != nil {
		t.Fatalf("the preallocated segment %s is still open below the watermark", open.path)
	}
	writeSpool(t, s, spoolBatch(3, 2))
	s.mu.Lock()
	open = s.open
	s.mu.Unlock()
	if open == nil || open.m != nil || !strings.HasSuffix(open.path, openExt) {
		t.Fatalf("below the watermark the new segment is %+v, want an .open one, not preallocated", open)
	}
	full.on.Store(true)
	if err := s.Probe(); err == nil {
		t.Error("Probe found room on a full disk")
	}
	full.on.Store(false)
	if err := s.Probe(); err != nil {
		t.Errorf("Probe with room = %v", err)
	}
	s.minFree.Store(1)
	s.measureSpace()
	if s.Status().LowSpace {
		t.Error("LowSpace still true above the watermark")
	}
	closeSpool(t, s)
	if n := dst.count(); n != 5 {
		t.Errorf("shipped %d events, want 5 (none lost or doubled by shedding)", n)
	}
}
