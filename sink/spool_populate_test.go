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
// and not at all once the spool knows the kernel cannot.
func TestSpoolPopulatesAhead(t *testing.T) {
	page := int64(os.Getpagesize())
	for _, populate := range []bool{false, true} {
		dst := &testDest{err: errors.New("down")}
		s := openTestSpool(t, SpoolConfig{Dir: t.TempDir(), SegmentAge: time.Hour, SegmentBytes: 4 << 20}, dst, nil)
		s.noPopulate = !populate
		moves, last := 0, int64(0)
		for i := range 1000 {
			writeSpool(t, s, spoolBatch(i, 1))
			s.wmu.Lock()
			size, populated := s.open.size, s.open.populated
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
			if populated != last {
				moves++
				last = populated
			}
		}
		if populate {
			s.wmu.Lock()
			size := s.open.size
			s.wmu.Unlock()
			if want := int(size/populateWindow) + 1; moves > want {
				t.Errorf("populated %d times for %d bytes, want at most %d (a window at a time)", moves, size, want)
			}
		}
	}
}
