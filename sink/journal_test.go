package sink

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// fileEventIDs returns the event_id of every event in the NDJSON file at
// path, in order.
func fileEventIDs(t *testing.T, path string) []string {
	t.Helper()
	return ids(readFile(t, path))
}

// evs returns ev(from) to ev(to-1).
func evs(from, to int) []Event {
	out := make([]Event, 0, to-from)
	for i := from; i < to; i++ {
		out = append(out, ev(i))
	}
	return out
}

// What a crash between the journal's append of a segment to the file and
// its deletion of the segment leaves: the segment still in the journal,
// and all, part or none of its events at the end of the file (part: the
// process died inside the write(2), and the half line was cut off at the
// next open). After the restart every event is in the file once, in
// order.
func TestJournaledFileResumes(t *testing.T) {
	for _, tc := range []struct {
		name   string
		inFile int  // how many of the segment's 10 events the file holds
		torn   bool // and half of the next one
	}{
		{"none", 0, false},
		{"none, torn", 0, true},
		{"part", 4, false},
		{"part, torn", 4, true},
		{"all", 10, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			fc := FileConfig{Path: filepath.Join(dir, "events.ndjson")}
			sc := SpoolConfig{Dir: filepath.Join(dir, "journal"), SegmentAge: 5 * time.Millisecond,
				RetryMin: time.Millisecond, RetryMax: 10 * time.Millisecond}

			// Events 0-9 shipped before the crash; events 100-109 in
			// the segment the crash left in the journal.
			f, err := OpenFile(fc)
			if err != nil {
				t.Fatal(err)
			}
			if err := f.WriteEvents(context.Background(), evs(0, 10)); err != nil {
				t.Fatal(err)
			}
			if tc.inFile > 0 {
				if err := f.WriteEvents(context.Background(), evs(100, 100+tc.inFile)); err != nil {
					t.Fatal(err)
				}
			}
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
			if tc.torn {
				af, err := os.OpenFile(fc.Path, os.O_WRONLY|os.O_APPEND, 0)
				if err != nil {
					t.Fatal(err)
				}
				fmt.Fprintf(af, `{"event_id":"e%06d","ti`, 100+tc.inFile)
				af.Close()
			}
			away := writerFunc(func(context.Context, []Event) error { return errors.New("away") })
			sp, err := OpenSpool(sc, away, nil)
			if err != nil {
				t.Fatal(err)
			}
			writeSpool(t, sp, evs(100, 110))
			if err := sp.Close(testCtx(t)); err != nil {
				t.Fatal(err)
			}
			<-sp.stopped

			sp, jf, err := OpenJournaledFile(fc, sc, nil)
			if err != nil {
				t.Fatal(err)
			}
			writeSpool(t, sp, evs(200, 203)) // a new call's events, after the restart
			if err := sp.Close(testCtx(t)); err != nil {
				t.Fatal(err)
			}
			<-sp.stopped
			if err := jf.Close(); err != nil {
				t.Fatal(err)
			}
			want := ids(slices.Concat(evs(0, 10), evs(100, 110), evs(200, 203)))
			if got := fileEventIDs(t, fc.Path); !slices.Equal(got, want) {
				t.Fatalf("the file holds\n%v\nwant\n%v", got, want)
			}
			if st := sp.Status(); st.PendingEvents != 0 || st.Segments != 0 {
				t.Errorf("the journal still holds %d events in %d segments", st.PendingEvents, st.Segments)
			}
			if jf.skipped != uint64(tc.inFile) {
				t.Errorf("skipped %d events already in the file, want %d", jf.skipped, tc.inFile)
			}
		})
	}
}

// A Queue writing through a journaled file: each call's event is in the
// journal when Record returns, and in the file once the segment ships.
func TestJournaledFileThroughQueue(t *testing.T) {
	dir := t.TempDir()
	fc := FileConfig{Path: filepath.Join(dir, "events.ndjson")}
	sc := SpoolConfig{Dir: filepath.Join(dir, "journal"), SegmentAge: 20 * time.Millisecond}
	sp, jf, err := OpenJournaledFile(fc, sc, nil)
	if err != nil {
		t.Fatal(err)
	}
	q, err := NewQueue(sp, QueueConfig{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 50 {
		q.Record(ev(i))
		if st := sp.Status(); st.PendingEvents+int64(st.ShippedEvents) != int64(i+1) {
			t.Fatalf("after Record %d the journal holds %d and shipped %d", i, st.PendingEvents, st.ShippedEvents)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(fileEventIDs(t, fc.Path)) < 50 {
		if time.Now().After(deadline) {
			t.Fatalf("after 10 s the file holds %d of 50 events", len(fileEventIDs(t, fc.Path)))
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := q.Close(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	if err := sp.Close(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	if err := jf.Close(); err != nil {
		t.Fatal(err)
	}
	if got, want := fileEventIDs(t, fc.Path), ids(evs(0, 50)); !slices.Equal(got, want) {
		t.Fatalf("the file holds %v, want %v", got, want)
	}
}

// lastEventID finds the last line's event_id whatever its length against
// the 4 KiB reads, and says "" for an empty file or a last line without
// one.
func TestLastEventID(t *testing.T) {
	line := func(id string, pad int) string {
		return fmt.Sprintf(`{"event_id":%q,"detail":%q}`, id, strings.Repeat("x", pad)) + "\n"
	}
	type tcase struct{ name, content, want string }
	cases := []tcase{
		{"empty", "", ""},
		{"one line", `{"event_id":"a"}` + "\n", "a"},
		{"two lines", `{"event_id":"a"}` + "\n" + `{"event_id":"b"}` + "\n", "b"},
		{"no event_id", `{"event_id":"a"}` + "\n" + `{"tool":"x"}` + "\n", ""},
		{"not JSON", `{"event_id":"a"}` + "\n" + "garbage\n", ""},
		{"one long line", line("c", 9000), "c"},
		{"last line 10000", line("a", 10) + line("b", 10000), "b"},
	}
	// Last lines of 4,079 to 4,111 bytes: the first 4 KiB read ends
	// inside, at, and just past the line's start.
	for pad := 4050; pad <= 4082; pad++ {
		cases = append(cases, tcase{fmt.Sprintf("last line %d", len(line("b", pad))), line("a", 10) + line("b", pad), "b"})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "f")
			if err := os.WriteFile(p, []byte(tc.content), 0o600); err != nil {
				t.Fatal(err)
			}
			f, err := os.Open(p)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			got, err := lastEventID(f, int64(len(tc.content)))
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Fatalf("lastEventID = %q, want %q", got, tc.want)
			}
		})
	}
}

// A journal's segment reaches the file as one batch of thousands of
// events, which the File writes in chunks: all of them, in order, and
// nothing left to resume after.
func TestJournaledFileWritesSegmentsInChunks(t *testing.T) {
	dir := t.TempDir()
	fc := FileConfig{Path: filepath.Join(dir, "events.ndjson")}
	sp, jf, err := OpenJournaledFile(fc, SpoolConfig{Dir: filepath.Join(dir, "journal")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sp.Close(testCtx(t))
	big := evs(0, 5000)
	for i := range big {
		big[i].Detail = strings.Repeat("d", 200) // about 1 KiB a line: five chunks and more
	}
	if err := jf.WriteEvents(context.Background(), big); err != nil {
		t.Fatal(err)
	}
	if got, want := fileEventIDs(t, fc.Path), ids(big); !slices.Equal(got, want) {
		t.Fatalf("the file holds %d events, want the %d in order", len(got), len(want))
	}
	if jf.resumeAfter != "" {
		t.Errorf("resumeAfter = %q after a batch written whole", jf.resumeAfter)
	}
}
