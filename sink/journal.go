package sink

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
)

// OpenJournaledFile opens the NDJSON file of fc behind a Spool configured
// by sc, which serves as its journal: a call's event is copied into the
// spool's memory-mapped segment before the call is answered (as with
// ClickHouse), and the spool appends each segment to the file as one
// batch once it is sealed (sc.SegmentAge after its first event, or when it
// is full), fsyncs the file and only then deletes the segment. The
// events reach the file up to SegmentAge later than without the journal,
// and a lone call's event costs a copy into memory rather than a write(2)
// (docs/performance.md).
//
// A crash between a batch's append and its segment's deletion ships the
// segment again after the restart: the file then skips the events it
// already holds, found by the event_id of its last line, so that every
// event is in the file once. Write to the returned Spool (it is the
// Queue's Writer) and close the Spool before the File.
func OpenJournaledFile(fc FileConfig, sc SpoolConfig, log *slog.Logger) (*Spool, *File, error) {
	f, err := OpenFile(fc)
	if err != nil {
		return nil, nil, err
	}
	last, err := lastEventID(f.f, f.size)
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("sink: open %s: last event: %w", fc.Path, err)
	}
	f.journaled, f.resumeAfter = true, last
	sp, err := OpenSpool(sc, f, log)
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return sp, f, nil
}

// maxLastLine bounds how far back lastEventID looks for the start of the
// last line: far beyond any event File writes.
const maxLastLine = 4 << 20

// lastEventID returns the event_id of the last line of f, whose size is
// size and which ends with a line break (OpenFile cut a torn line off),
// or "" if f is empty or its last line has no event_id.
func lastEventID(f *os.File, size int64) (string, error) {
	if size == 0 {
		return "", nil
	}
	end := size - 1 // the last line's break
	from := max(0, end-maxLastLine)
	i, err := lastLineBreak(f, from, end)
	if err != nil {
		return "", err
	}
	if i < 0 && from > 0 {
		return "", nil // a last line longer than any event
	}
	line := make([]byte, end-(i+1))
	if _, err := f.ReadAt(line, i+1); err != nil {
		return "", err
	}
	var e struct {
		EventID string `json:"event_id"`
	}
	if json.Unmarshal(line, &e) != nil {
		return "", nil
	}
	return e.EventID, nil
}
