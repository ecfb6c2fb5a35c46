package sink

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
)

// A journal's segment that the File writes in chunks, on a disk that fills
// after the first chunk and stays full for the next attempt too, reaches
// the file once the space returns with every event once: the attempt that
// wrote nothing keeps the point to resume after, rather than forget it and
// have the next attempt write the first chunk again. Both ways a File
// takes a batch: events, and the lines a journal ships.
func TestJournaledFileResumesAfterRepeatedFailures(t *testing.T) {
	for _, lines := range []bool{false, true} {
		t.Run(map[bool]string{false: "events", true: "lines"}[lines], func(t *testing.T) {
			testResumesAfterRepeatedFailures(t, lines)
		})
	}
}

func testResumesAfterRepeatedFailures(t *testing.T, lines bool) {
	dir := t.TempDir()
	fc := FileConfig{Path: filepath.Join(dir, "events.ndjson")}
	sp, jf, err := OpenJournaledFile(fc, SpoolConfig{Dir: filepath.Join(dir, "journal")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sp.Close(testCtx(t))
	big := evs(0, 3000)
	for i := range big {
		big[i].Detail = strings.Repeat("d", 200) // about 1 KiB a line: three chunks and more
	}
	// Chunk writes: the first succeeds, the next two (the rest of the
	// first attempt, the first of the second) find the disk full.
	writes := 0
	jf.fault = func() error {
		writes++
		if writes == 2 || writes == 3 {
			return &os.PathError{Op: "write", Path: fc.Path, Err: syscall.ENOSPC}
		}
		return nil
	}
	write := func() error { return jf.WriteEvents(context.Background(), big) }
	if lines {
		var l fileLines
		for i := range big {
			l.buf, _ = appendEvent(l.buf, &big[i], false)
			l.ends = append(l.ends, len(l.buf))
		}
		if n := l.chunkEnd(0); n < 100 || n >= len(big)/2 {
			t.Fatalf("the first chunk of lines ends at %d of %d", n, len(big))
		}
		write = func() error { return jf.writeLines(context.Background(), &l) }
	}
	for attempt := 1; attempt <= 2; attempt++ {
		if err := write(); err == nil {
			t.Fatalf("attempt %d on a full disk succeeded", attempt)
		}
	}
	if err := write(); err != nil {
		t.Fatalf("attempt 3, with room again: %v", err)
	}
	if got, want := fileEventIDs(t, fc.Path), ids(big); !slices.Equal(got, want) {
		dup := len(got) - len(want)
		t.Fatalf("the file holds %d events (%d more than sent), want the %d in order, each once", len(got), dup, len(want))
	}
}
