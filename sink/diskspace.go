package sink

import (
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// Full disks: the spool's free-space watermark, and the Probes a Queue
// uses to find out that space came back (see Queue.Durable).

// spaceCheckEvery is how often the spool's shipper reads the free space of
// its file system.
const spaceCheckEvery = time.Second

// probeRoom is how much room a Probe asks for: enough for a group of
// events.
const probeRoom = 64 << 10

// checkSpace reads the free space of the spool's file system and moves the
// watermark: going below MinFreeBytes it warns and sheds the spool's
// slack (the open segment, if preallocated and mapped, is sealed, which
// cuts its unused end; later segments are appended to with write(2), not
// preallocated); going back above it says so. Called by OpenSpool and the
// shipper, every spaceCheckEvery.
func (s *Spool) checkSpace() {
	s.nextSpaceCheck = s.opts.now().Add(spaceCheckEvery)
	s.measureSpace()
}

// measureSpace is checkSpace without the schedule.
func (s *Spool) measureSpace() {
	free, err := freeBytes(s.cfg.Dir)
	if err != nil {
		return
	}
	minFree := s.minFree.Load()
	low := free < uint64(minFree)
	s.mu.Lock()
	was := s.lowSpace
	s.diskFree, s.lowSpace = free, low
	s.mu.Unlock()
	switch {
	case low && !was:
		shed := s.shedSlack()
		s.log.Warn("sink: spool's disk is nearly full; shedding the spool's slack, and calls are refused when events cannot be written (events.on_write_failure)",
			"dir", s.cfg.Dir, "free_bytes", free, "min_free_bytes", minFree, "slack_released_bytes", shed)
	case !low && was:
		s.log.Info("sink: spool's disk has room again", "dir", s.cfg.Dir, "free_bytes", free, "min_free_bytes", minFree)
	}
}

// shedSlack seals the open segment when it is preallocated and mapped, so
// that its unused end is released, and returns how many bytes that was.
func (s *Spool) shedSlack() int64 {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	o := s.open
	if o == nil || o.m == nil {
		return 0
	}
	slack := int64(len(o.m)) - o.size
	if o.events == 0 {
		s.unmap(o)
		o.f.Close()
		os.Remove(o.path)
		s.open = nil
	} else {
		s.seal()
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}
	return slack
}

// Probe reports whether a write would now find room: the open segment is
// preallocated with room left, or the file system has probeRoom bytes
// free. A Queue calls it while its writes fail (Queue.Durable).
func (s *Spool) Probe() error {
	if s.opts.fault != nil {
		if err := s.opts.fault(); err != nil {
			return err
		}
	}
	s.mu.Lock()
	o := s.open
	if o != nil && o.m != nil && int64(len(o.m))-o.size >= probeRoom {
		s.mu.Unlock()
		return nil
	}
	s.mu.Unlock()
	return probeDir(s.cfg.Dir)
}

// Probe reports whether the file system holding the file has room for a
// group of events. A Queue calls it while its writes fail
// (Queue.Durable).
func (fl *File) Probe() error {
	if fl.fault != nil {
		if err := fl.fault(); err != nil {
			return err
		}
	}
	return probeDir(filepath.Dir(fl.cfg.Path))
}

// probeDir reports whether dir's file system has probeRoom bytes free;
// where that cannot be read it says yes, and the next write decides.
func probeDir(dir string) error {
	free, err := freeBytes(dir)
	if err != nil || free >= probeRoom {
		return nil
	}
	return fmt.Errorf("sink: %s has %d bytes free", dir, free)
}

var (
	_ Prober = (*Spool)(nil)
	_ Prober = (*File)(nil)
)
