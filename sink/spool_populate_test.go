//go:build linux

package sink

import (
	"errors"
	"os"
	"testing"
	"time"
)

// TestSpoolPopulatesAhead checks that a mapped segment is populated a
// window ahead of the copies, one window at a time (not once per copy),
// again from the copy's page after each fsync (which write-protects the
// pages it writes back), and not at all once the spool knows the kernel
// cannot.
func TestSpoolPopulatesAhead(t *testing.T) {
	page := int64(os.Getpagesize())
	for _, populate := range []bool{false, true} {
		dst := &testDest{err: errors.New("down")}
		s := openTestSpool(t, SpoolConfig{Dir: t.TempDir(), SegmentAge: time.Hour, SegmentBytes: 4 << 20}, dst, nil)
		s.noPopulate = !populate
		moves, last, syncs := 0, int64(0), 0
		for i := range 1000 {
			if i%300 == 299 {
				if err := s.Sync(); err != nil {
					t.Fatal(err)
				}
				syncs++
			}
			writeSpool(t, s, spoolBatch(i, 1))
			s.wmu.Lock()
			size, populated, at := s.open.size, s.open.populated, s.open.populatedAt
			s.wmu.Unlock()
			if !populate {
				if populated != 0 {
					t.Fatalf("the kernel cannot populate, yet populated to %d", populated)
				}
				continue
			}
			if populated < size || populated > size+populateWindow+page {
				t.Fatalf("%d bytes written, populated to %d: want them and at most a window more", size, populated)
			}
			if at != s.syncs.Load() {
				t.Fatalf("populated as of sync %d, the spool has made %d", at, s.syncs.Load())
			}
			if populated != last {
				moves++
				last = populated
			}
		}
		if populate {
			s.wmu.Lock()
			size := s.open.size
			s.wmu.Unlock()
			if want := int(size/populateWindow) + 1 + syncs; moves > want {
				t.Errorf("populated %d times for %d bytes, want at most %d (a window at a time)", moves, size, want)
			}
		}
	}
}
