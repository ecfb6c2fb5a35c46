package sink

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// checkFullLine rewrites line with appendFullLine and, when it takes the
// line, checks that decoding the line and encoding the event in full
// (what a File wrote before the rewrite) gives the same bytes and the same
// event_id; it reports whether appendFullLine took it.
func checkFullLine(t testing.TB, line []byte) bool {
	t.Helper()
	prefix := []byte("kept\n")
	got, id, ok := appendFullLine(bytes.Clone(prefix), line, nil)
	// With a memo of the line's second, which takes a time in it without
	// parsing it, the same.
	if i := bytes.Index(line, []byte(`"time":"`)); i >= 0 && len(line) >= i+8+memoSecond {
		var memo timeMemo
		if memo.canonical(append(line[i+8:i+8+memoSecond:i+8+memoSecond], 'Z')) {
			again, id2, ok2 := appendFullLine(bytes.Clone(prefix), line, &memo)
			if ok2 != ok || !bytes.Equal(again, got) || !bytes.Equal(id2, id) {
				t.Fatalf("%q: with a memo of its second, appendFullLine gives %q, %v; without, %q, %v", line, again, ok2, got, ok)
			}
		}
	}
	if !bytes.HasPrefix(got, prefix) {
		t.Fatalf("%q: appendFullLine changed what dst held: %q", line, got)
	}
	if !ok {
		if len(got) != len(prefix) {
			t.Fatalf("%q: appendFullLine declined the line but left %q in dst", line, got[len(prefix):])
		}
		return false
	}
	got = got[len(prefix):]
	var e Event
	if !decodeEvent(line, "", &e) {
		e = Event{}
		if err := json.Unmarshal(line, &e); err != nil {
			t.Fatalf("appendFullLine took %q, which encoding/json refuses: %v", line, err)
		}
	}
	want, err := appendEvent(nil, &e, false)
	if err != nil {
		t.Fatalf("appendFullLine took %q, whose event appendEvent cannot write: %v", line, err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%q:\nappendFullLine      %s\ndecode, then encode %s", line, got, want)
	}
	if string(id) != e.EventID {
		t.Fatalf("%q: appendFullLine gives the id %q, the event has %q", line, id, e.EventID)
	}
	return true
}

// plainEvent reports whether appendEvent writes ev's strings as they
// stand (nothing escaped, no U+FFFD, U+2028 or U+2029), which is when
// appendFullLine must take its record's line.
func plainEvent(line []byte) bool {
	return !bytes.ContainsAny(line[:len(line)-1], "\\\n\u2028\u2029\ufffd")
}

// plainStrings are strings AppendString writes as they stand.
var plainStrings = []string{"", "search_pubmed", "<script>&amp;</script>", "ünïcødé ✓ 𝄞", "'single' quotes", strings.Repeat("x", 300)}

// TestAppendFullLineMatches rewrites what a spool's records hold for events
// with every field set at random: each line with plain strings is taken,
// and every line taken gives what decoding and encoding in full gives.
func TestAppendFullLineMatches(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	taken := 0
	for i := range 5000 {
		strs := eventStrings
		if i%2 == 0 {
			strs = plainStrings
		}
		ev := randomEventOf(r, strs)
		for _, omit := range []bool{true, false} {
			line, err := appendEvent(nil, &ev, omit)
			if err != nil {
				t.Fatal(err)
			}
			took := checkFullLine(t, line)
			if !took && plainEvent(line) {
				t.Fatalf("event %d (omitZero %v): appendFullLine declines %s", i, omit, line)
			}
			if took {
				taken++
			}
			checkFullLine(t, bytes.TrimSuffix(line, []byte("\n")))
		}
	}
	if taken < 5000 {
		t.Fatalf("appendFullLine took %d of 10000 lines; the half of plain strings should give it 5000", taken)
	}
}

// TestAppendFullLineEveryField sets every field of an Event (found by
// reflection) to a plain value: a field added to Event and appendEvent is
// rewritten without a change to appendFullLine, or fails here.
func TestAppendFullLineEveryField(t *testing.T) {
	for _, set := range []bool{true, false} {
		var ev Event
		v := reflect.ValueOf(&ev).Elem()
		for i := range v.NumField() {
			if !set && v.Type().Field(i).Name != "EventID" && v.Type().Field(i).Name != "Time" {
				continue
			}
			switch f := v.Field(i); f.Interface().(type) {
			case string:
				f.SetString(v.Type().Field(i).Name + " value ✓")
			case bool:
				f.SetBool(true)
			case int, int64:
				f.SetInt(int64(1000 + i))
			case []string:
				f.Set(reflect.ValueOf([]string{"a", "b"}))
			case time.Time:
				f.Set(reflect.ValueOf(time.Date(2026, 12, 3, 3, 4, 5, 600, time.FixedZone("", 3600))))
			default:
				t.Fatalf("Event has a field of a new type, %s: teach appendEvent, appendFullLine and this test about it", f.Type())
			}
		}
		line, err := appendEvent(nil, &ev, true)
		if err != nil {
			t.Fatal(err)
		}
		if !checkFullLine(t, line) {
			t.Fatalf("appendFullLine declines %s", line)
		}
	}
}

// declinedFullLines are lines appendFullLine leaves to decoding: ones the
// decoder would read into an event that appendEvent writes otherwise, and
// ones that are not an event at all.
var declinedFullLines = []string{
	`{"time":"2026-12-03T03:04:05Z","event_id":"a"}`, // out of order
	`{"event_id":"a"}`, // no time
	`{"event_id":"a","time":"2026-12-03T03:04:05Z","tool":"x","tool":"y"}`, // twice
	`{"event_id":"a","time":"2026-12-03T03:04:05.500Z"}`,                   // a time AppendText writes as .5
	`{"event_id":"a","time":"2026-12-03T03:04:05+00:00"}`,                  // and as Z
	`{"event_id":"a","time":"2026-12-03T03:04:05Z","total_us":-0}`,
	`{"event_id":"a","time":"2026-12-03T03:04:05Z","total_us":01}`,
	`{"event_id":"a","time":"2026-12-03T03:04:05Z","total_us":1.0}`,
	`{"event_id":"a","time":"2026-12-03T03:04:05Z","tool":"\u0041"}`,
	`{"event_id":"a","time":"2026-12-03T03:04:05Z","tool":"a\/b"}`,
	"{\"event_id\":\"a\",\"time\":\"2026-12-03T03:04:05Z\",\"tool\":\"bad \xff\"}",
	"{\"event_id\":\"a\",\"time\":\"2026-12-03T03:04:05Z\",\"tool\":\"\u2028\"}",
	`{"event_id":"a","time":"2026-12-03T03:04:05Z","tool":null}`,
	`{"event_id":"a","time":"2026-12-03T03:04:05Z","extra":1}`,
	`{"event_id":"a","time":"2026-12-03T03:04:05Z","violation_paths":["a",]}`,
	`{"event_id":"a","time":"2026-12-03T03:04:05Z" }`,
	`{"event_id":"a","time":"2026-12-03T03:04:05Z"}x`,
	`{"event_id":"a","time":"2026-12-03T03:04:05Z"}` + "\n\n",
	`{"event_id":"a","time":"2026-12-03T03:04:05Z",}`,
	`{"event_id":"a","time":"2026-12-03T03:04:05Z"`,
	`{}`,
	``,
}

func TestAppendFullLineDeclines(t *testing.T) {
	for _, line := range declinedFullLines {
		if checkFullLine(t, []byte(line)) {
			t.Errorf("appendFullLine took %q; it should leave it to decoding", line)
		}
	}
	// Lines it takes that the spool does not write: fields at their zero
	// value written, an empty arg_shape (left out in full).
	for _, line := range []string{
		`{"event_id":"a","time":"2026-12-03T03:04:05Z","tool":"","ok":false,"violation_paths":null,"total_us":0,"answer_findings":[]}`,
		`{"event_id":"a","time":"2026-12-03T03:04:05.5+01:30","arg_shape":""}`,
		`{"event_id":"a","time":"2026-12-03T03:04:05Z","upstream_status":-7,"detail":"ünïcødé ✓ 𝄞 <b>&amp;"}`,
	} {
		if !checkFullLine(t, []byte(line+"\n")) {
			t.Errorf("appendFullLine declines %q", line)
		}
	}
}

// TestFileLinesAppendRecord: a record's lines become the file's, the
// ones appendFullLine declines decoded and encoded again, and a record
// with a line that does not decode is refused.
func TestFileLinesAppendRecord(t *testing.T) {
	a := validatedEvent(1)
	b := validatedEvent(2)
	b.Detail = "a \"quoted\" detail" // escaped: decoded and encoded again
	var rec []byte
	for _, e := range []*Event{&a, &b} {
		rec, _ = appendEvent(rec, e, true)
	}
	var l fileLines
	if !l.appendRecord(rec) {
		t.Fatal("appendRecord refused a spool's record")
	}
	var want []byte
	for _, e := range []*Event{&a, &b} {
		want, _ = appendEvent(want, e, false)
	}
	if !bytes.Equal(l.buf, want) || l.len() != 2 || l.eventID(0) != a.EventID || l.eventID(1) != b.EventID {
		t.Fatalf("appendRecord gave %d lines, ids %q %q:\n%s\nwant\n%s", l.len(), l.eventID(0), l.eventID(1), l.buf, want)
	}
	for _, bad := range []string{"", `{"event_id":"c"}`, "{\"event_id\":\n", "[]\n", "\n"} {
		mark := l.len()
		if l.appendRecord([]byte(bad)) {
			t.Errorf("appendRecord took the damaged record %q", bad)
		}
		l.truncate(mark)
		if !bytes.Equal(l.buf, want) || l.len() != 2 {
			t.Fatalf("after a damaged record and truncate: %q, %d lines", l.buf, l.len())
		}
	}
	if got := l.chunkEnd(0); got != 2 {
		t.Errorf("chunkEnd(0) = %d, want 2: both lines are within a chunk", got)
	}
}

func FuzzAppendFullLine(f *testing.F) {
	r := rand.New(rand.NewPCG(9, 10))
	for range 20 {
		ev := randomEvent(r)
		line, _ := appendEvent(nil, &ev, r.IntN(2) == 0)
		f.Add(line)
	}
	for _, l := range append(declinedFullLines, declinedLines...) {
		f.Add([]byte(l))
	}
	ev := validatedEvent(3)
	line, _ := appendEvent(nil, &ev, true)
	f.Add(line)
	f.Add([]byte(strings.Replace(string(line), `"ok":true`, `"ok":false`, 1)))
	f.Fuzz(func(t *testing.T, line []byte) {
		checkFullLine(t, line)
	})
}

// BenchmarkFileLine is one event of a journal's record made into the
// File's line: decoded and encoded in full (before), and rewritten.
func BenchmarkFileLine(b *testing.B) {
	ev := validatedEvent(1)
	line, _ := appendEvent(nil, &ev, true)
	text := string(line)
	var buf []byte
	b.Run("decode+encode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var e Event
			if !decodeEvent(line, text, &e) {
				b.Fatal("declined")
			}
			buf, _ = appendEvent(buf[:0], &e, false)
		}
	})
	b.Run("appendFullLine", func(b *testing.B) {
		var memo timeMemo // as a segment's lines are rewritten
		b.ReportAllocs()
		for b.Loop() {
			var ok bool
			if buf, _, ok = appendFullLine(buf[:0], line, &memo); !ok {
				b.Fatal("declined")
			}
		}
	})
}

// TestJournalWritesFileLines: what a journal ships to its File is, byte
// for byte, what it shipped when it decoded each record and the File
// encoded the events again, for events whose lines are rewritten and
// events whose lines are decoded and encoded again (escapes, U+2028), in
// one segment. (An event with bytes that are not UTF-8 reaches the file
// with U+FFFD where the File alone writes \ufffd: the journal's record
// has the escape, which decodes to the character.)
func TestJournalWritesFileLines(t *testing.T) {
	dir := t.TempDir()
	fc := FileConfig{Path: filepath.Join(dir, "events.ndjson")}
	sp, _, err := OpenJournaledFile(fc, SpoolConfig{Dir: filepath.Join(dir, "journal"), SegmentAge: time.Hour}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(11, 12))
	var events []Event
	for i := range 200 {
		strs := plainStrings
		if i%5 == 0 {
			strs = eventStrings
		}
		e := randomEventOf(r, strs)
		e.EventID = fmt.Sprintf("e%04d", i)
		events = append(events, e)
	}
	for i := 0; i < len(events); i += 7 {
		if err := sp.WriteEvents(context.Background(), events[i:min(i+7, len(events))]); err != nil {
			t.Fatal(err)
		}
	}
	if err := sp.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(fc.Path)
	if err != nil {
		t.Fatal(err)
	}
	var want []byte
	for i := range events {
		rec, _ := appendEvent(nil, &events[i], true)
		back, err := decodeRecord(rec, "", nil)
		if err != nil {
			t.Fatal(err)
		}
		want, _ = appendEvent(want, &back[0], false)
	}
	if !bytes.Equal(got, want) {
		gl, wl := bytes.Split(got, []byte("\n")), bytes.Split(want, []byte("\n"))
		for i := range min(len(gl), len(wl)) {
			if !bytes.Equal(gl[i], wl[i]) {
				t.Fatalf("line %d of %d (got %d):\n%s\nwant\n%s", i+1, len(wl), len(gl), gl[i], wl[i])
			}
		}
		t.Fatalf("the file has %d lines, want %d", len(gl), len(wl))
	}
}
