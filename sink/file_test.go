package sink

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/events.ndjson in File's exact output format")

func TestFileConfigValidate(t *testing.T) {
	tests := []struct {
		name    string
		in      FileConfig
		want    FileConfig
		wantErr string
	}{
		{name: "zero gets defaults", in: FileConfig{},
			want: FileConfig{Path: "toolgate-events.ndjson", MaxBytes: 100 << 20, MaxBackups: 5}},
		{name: "explicit values kept", in: FileConfig{Path: "/var/log/tg.ndjson", MaxBytes: 1, MaxBackups: 1},
			want: FileConfig{Path: "/var/log/tg.ndjson", MaxBytes: 1, MaxBackups: 1}},
		{name: "negative max bytes", in: FileConfig{MaxBytes: -1}, wantErr: "file.max_bytes: must not be negative, got -1"},
		{name: "negative backups", in: FileConfig{MaxBackups: -2}, wantErr: "file.max_backups: must not be negative, got -2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.in
			err := got.Validate()
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("Validate() error = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Validate() error = %v", err)
			}
			if got != tt.want {
				t.Errorf("Validate() = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func openTestFile(t *testing.T, cfg FileConfig) *File {
	t.Helper()
	f, err := OpenFile(cfg)
	if err != nil {
		t.Fatalf("OpenFile: %v", err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func writeAll(t *testing.T, f *File, events ...Event) {
	t.Helper()
	if err := f.WriteEvents(t.Context(), events); err != nil {
		t.Fatalf("WriteEvents: %v", err)
	}
}

func readFile(t *testing.T, path string) []Event {
	t.Helper()
	r, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	events, err := ReadEvents(r)
	if err != nil {
		t.Fatalf("ReadEvents(%s): %v", path, err)
	}
	return events
}

func ids(events []Event) []string {
	out := make([]string, len(events))
	for i, e := range events {
		out[i] = e.EventID
	}
	return out
}

func idRange(from, to int) []string {
	var out []string
	for i := from; i < to; i++ {
		out = append(out, ev(i).EventID)
	}
	return out
}

func TestOpenFilePermissions(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "new", "dir")
	path := filepath.Join(dir, "events.ndjson")
	f := openTestFile(t, FileConfig{Path: path})
	writeAll(t, f, ev(0))

	for _, tt := range []struct {
		path string
		want fs.FileMode
	}{
		{path: path, want: 0o600},
		{path: dir, want: 0o700 | fs.ModeDir},
	} {
		st, err := os.Stat(tt.path)
		if err != nil {
			t.Fatal(err)
		}
		if got := st.Mode(); got != tt.want {
			t.Errorf("mode of %s = %v, want %v", tt.path, got, tt.want)
		}
	}
}

func TestFileAppendsOnReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "events.ndjson")
	f := openTestFile(t, FileConfig{Path: path})
	writeAll(t, f, ev(0), ev(1))
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	f = openTestFile(t, FileConfig{Path: path})
	writeAll(t, f, ev(2))
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if got, want := ids(readFile(t, path)), idRange(0, 3); !reflect.DeepEqual(got, want) {
		t.Errorf("events = %v, want %v", got, want)
	}
}

// TestFileCutsTornLine reopens files that a killed process left ending
// in half a line (a write cut short, never acknowledged): the half line is
// cut off, whole lines stay, and the next batch starts a line of its own.
func TestFileCutsTornLine(t *testing.T) {
	tests := []struct {
		name  string
		whole int // whole events before the torn line
	}{
		{name: "after whole lines", whole: 2},
		{name: "only a torn line", whole: 0},
		{name: "a long torn line", whole: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "events.ndjson")
			f := openTestFile(t, FileConfig{Path: path})
			for i := range tt.whole {
				writeAll(t, f, ev(i))
			}
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
			half := `{"event_id":"torn","detail":"` + strings.Repeat("x", 10000*len(tt.name)%9000)
			raw, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				t.Fatal(err)
			}
			raw.WriteString(half)
			raw.Close()

			f = openTestFile(t, FileConfig{Path: path})
			writeAll(t, f, ev(tt.whole))
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
			if got, want := ids(readFile(t, path)), idRange(0, tt.whole+1); !reflect.DeepEqual(got, want) {
				t.Errorf("events = %v, want %v", got, want)
			}
		})
	}
}

func TestFileClosed(t *testing.T) {
	f := openTestFile(t, FileConfig{Path: filepath.Join(t.TempDir(), "events.ndjson")})
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.WriteEvents(t.Context(), []Event{ev(0)}); !errors.Is(err, ErrClosed) {
		t.Errorf("WriteEvents after Close = %v, want ErrClosed", err)
	}
	if err := f.Close(); err != nil {
		t.Errorf("second Close = %v, want nil", err)
	}
}

func TestFileCanceledContext(t *testing.T) {
	path := filepath.Join(t.TempDir(), "events.ndjson")
	f := openTestFile(t, FileConfig{Path: path})
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := f.WriteEvents(ctx, []Event{ev(0)}); !errors.Is(err, context.Canceled) {
		t.Errorf("WriteEvents with a canceled context = %v, want Canceled", err)
	}
	if got := readFile(t, path); len(got) != 0 {
		t.Errorf("file holds %d events, want none", len(got))
	}
}

func TestFileUnencodableEvent(t *testing.T) {
	path := filepath.Join(t.TempDir(), "events.ndjson")
	f := openTestFile(t, FileConfig{Path: path})
	bad := ev(1)
	bad.Time = bad.Time.AddDate(20000, 0, 0) // JSON time has four-digit years
	if err := f.WriteEvents(t.Context(), []Event{ev(0), bad}); err == nil {
		t.Fatal("WriteEvents with an unencodable event succeeded")
	}
	writeAll(t, f, ev(2))
	if got, want := ids(readFile(t, path)), idRange(2, 3); !reflect.DeepEqual(got, want) {
		t.Errorf("events = %v, want %v (the failed batch is not stored at all)", got, want)
	}
}

// lineSize is the size of one encoded ev(i) line.
func lineSize(t *testing.T) int64 {
	t.Helper()
	path := filepath.Join(t.TempDir(), "size.ndjson")
	f := openTestFile(t, FileConfig{Path: path})
	writeAll(t, f, ev(0))
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}

func TestFileRotation(t *testing.T) {
	line := lineSize(t)
	tests := []struct {
		name       string
		maxBackups int
		events     int
		wantFiles  int // path plus backups
		wantFirst  int // oldest event still kept
	}{
		// Three lines fit per file: 20 events make 7 files, all kept.
		{name: "all kept", maxBackups: 10, events: 20, wantFiles: 7, wantFirst: 0},
		// Only path, path.1 and path.2 remain: the newest 2 + 3 + 3 events.
		{name: "oldest deleted", maxBackups: 2, events: 20, wantFiles: 3, wantFirst: 12},
		{name: "one backup", maxBackups: 1, events: 7, wantFiles: 2, wantFirst: 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "events.ndjson")
			maxBytes := 3*line + line/2
			f := openTestFile(t, FileConfig{Path: path, MaxBytes: maxBytes, MaxBackups: tt.maxBackups})
			for i := range tt.events {
				writeAll(t, f, ev(i))
			}
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}

			files, _ := filepath.Glob(path + "*")
			if len(files) != tt.wantFiles {
				t.Fatalf("files = %v, want %d", files, tt.wantFiles)
			}
			// Read oldest first: path.N .. path.1, then path.
			var got []string
			for i := tt.wantFiles - 1; i >= 0; i-- {
				name := path
				if i > 0 {
					name = fmt.Sprintf("%s.%d", path, i)
				}
				st, err := os.Stat(name)
				if err != nil {
					t.Fatalf("missing %s: %v", name, err)
				}
				if st.Size() > maxBytes {
					t.Errorf("%s has %d bytes, more than MaxBytes %d", name, st.Size(), maxBytes)
				}
				got = append(got, ids(readFile(t, name))...)
			}
			if want := idRange(tt.wantFirst, tt.events); !reflect.DeepEqual(got, want) {
				t.Errorf("events across files = %v, want %v", got, want)
			}
		})
	}
}

func TestFileRotationBigBatch(t *testing.T) {
	line := lineSize(t)
	path := filepath.Join(t.TempDir(), "events.ndjson")
	f := openTestFile(t, FileConfig{Path: path, MaxBytes: 2 * line})
	writeAll(t, f, ev(0))
	// Five lines do not fit anywhere: the file rotates first, then takes the
	// whole batch beyond MaxBytes, and rotates again before the next one.
	writeAll(t, f, ev(1), ev(2), ev(3), ev(4), ev(5))
	writeAll(t, f, ev(6))
	for name, want := range map[string][]string{
		path + ".2": idRange(0, 1),
		path + ".1": idRange(1, 6),
		path:        idRange(6, 7),
	} {
		if got := ids(readFile(t, name)); !reflect.DeepEqual(got, want) {
			t.Errorf("%s holds %v, want %v", name, got, want)
		}
	}
}

func TestFileRotationRemovesStaleBackups(t *testing.T) {
	line := lineSize(t)
	path := filepath.Join(t.TempDir(), "events.ndjson")
	// Left by an earlier run with more backups.
	for i := 1; i <= 5; i++ {
		if err := os.WriteFile(fmt.Sprintf("%s.%d", path, i), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	f := openTestFile(t, FileConfig{Path: path, MaxBytes: line, MaxBackups: 2})
	writeAll(t, f, ev(0))
	writeAll(t, f, ev(1))
	files, _ := filepath.Glob(path + "*")
	want := []string{path, path + ".1", path + ".2"}
	if !reflect.DeepEqual(files, want) {
		t.Errorf("files = %v, want %v", files, want)
	}
	if got := ids(readFile(t, path+".1")); !reflect.DeepEqual(got, idRange(0, 1)) {
		t.Errorf("%s.1 holds %v", path, got)
	}
}

func TestFileWithQueue(t *testing.T) {
	path := filepath.Join(t.TempDir(), "events.ndjson")
	f := openTestFile(t, FileConfig{Path: path, MaxBytes: 64 << 10, MaxBackups: 100})
	q := startQueue(t, f, QueueConfig{BatchSize: 50}, nil)
	const n = 2000
	for i := range n {
		if !q.Record(ev(i)) {
			t.Fatalf("Record(%d) = false", i)
		}
	}
	closeQueue(t, q)
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(path + ".*")
	var got []string
	for i := len(files); i >= 1; i-- {
		got = append(got, ids(readFile(t, fmt.Sprintf("%s.%d", path, i)))...)
	}
	got = append(got, ids(readFile(t, path))...)
	if want := idRange(0, n); !reflect.DeepEqual(got, want) {
		t.Errorf("%d events across %d files, want %d in order", len(got), len(files)+1, n)
	}
}

// TestFileGolden checks File's exact output format against
// testdata/events.ndjson; -update rewrites the fixture from its own events.
func TestFileGolden(t *testing.T) {
	golden := filepath.Join("testdata", "events.ndjson")
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	events, err := ReadEvents(bytes.NewReader(want))
	if err != nil {
		t.Fatal(err)
	}
	if len(events) != 3 {
		t.Fatalf("%s holds %d events, want 3", golden, len(events))
	}
	path := filepath.Join(t.TempDir(), "events.ndjson")
	f := openTestFile(t, FileConfig{Path: path})
	writeAll(t, f, events...)
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if !bytes.Equal(got, want) {
		t.Errorf("File wrote\n%s\nwant (%s)\n%s", got, golden, want)
	}
	if back := readFile(t, path); !reflect.DeepEqual(back, events) {
		t.Errorf("round trip changed the events:\n got %+v\nwant %+v", back, events)
	}
}
