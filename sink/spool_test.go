package sink

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.yaml.in/yaml/v3"

	"github.com/toolgate/toolgate/internal/testutil"
)

// spoolEpoch is the time of spoolEv(0).
var spoolEpoch = time.Date(2025, 11, 21, 9, 0, 0, 0, time.UTC)

// spoolEv is event i with the id of ev(i) and an encoding whose size does
// not depend on i (whole seconds, fixed-width id), so that record and
// segment sizes are known in advance.
func spoolEv(i int) Event {
	return Event{
		EventID: fmt.Sprintf("e%06d", i),
		Time:    spoolEpoch.Add(time.Duration(i) * time.Second),
		Tool:    "pubmed_search",
		Host:    "eutils.ncbi.nlm.nih.gov",
		Session: "secret-session-id",
	}
}

// spoolBatch returns spoolEv(from) .. spoolEv(from+n-1).
func spoolBatch(from, n int) []Event {
	out := make([]Event, n)
	for i := range out {
		out[i] = spoolEv(from + i)
	}
	return out
}

// recordSize is the size on disk of events framed as one record.
func recordSize(t testing.TB, events []Event) int64 {
	t.Helper()
	return int64(len(frameRecord(t, events)))
}

// frameRecord returns events as one record, as WriteEvents frames them.
func frameRecord(t testing.TB, events []Event) []byte {
	t.Helper()
	enc := newRecordEncoder()
	var off int
	enc.buf, off = beginRecord(enc.buf)
	for i := range events {
		if err := enc.encode(&events[i]); err != nil {
			t.Fatal(err)
		}
	}
	endRecord(enc.buf, off)
	return bytes.Clone(enc.buf)
}

// testDest is a destination for spool tests: it keeps what it is given in
// memory and can be switched to fail, to block, or to fail after storing
// (as an insert that times out after it landed).
type testDest struct {
	mu           sync.Mutex
	events       []Event
	calls        int
	err          error         // when set, calls fail with it
	storeAnyway  bool          // with err: store the batch, then fail
	block        chan struct{} // when set, calls wait for it to close or ctx to end
	entered      chan struct{} // when set, gets a value as each call starts
	panicPending bool          // the next call panics
}

func (d *testDest) WriteEvents(ctx context.Context, events []Event) error {
	d.mu.Lock()
	block, entered := d.block, d.entered
	d.mu.Unlock()
	if entered != nil {
		entered <- struct{}{}
	}
	if block != nil {
		select {
		case <-block:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.calls++
	if d.panicPending {
		d.panicPending = false
		panic("destination bug")
	}
	if d.err != nil && !d.storeAnyway {
		return d.err
	}
	d.events = append(d.events, events...)
	return d.err
}

func (d *testDest) setErr(err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.err = err
}

func (d *testDest) snapshot() []Event {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.events)
}

func (d *testDest) count() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.events)
}

// fastSpool is a configuration with short ages and waits.
func fastSpool(dir string) SpoolConfig {
	return SpoolConfig{Dir: dir, SegmentAge: 2 * time.Millisecond, RetryMin: time.Millisecond, RetryMax: 10 * time.Millisecond}
}

// openTestSpool opens a spool that the test's cleanup closes and waits for.
func openTestSpool(t *testing.T, cfg SpoolConfig, dst Writer, buf *testutil.SyncBuffer) *Spool {
	t.Helper()
	return openTestSpoolOpts(t, cfg, dst, buf, spoolOptions{now: time.Now, maxEventBytes: maxEventBytes})
}

func openTestSpoolOpts(t *testing.T, cfg SpoolConfig, dst Writer, buf *testutil.SyncBuffer, opts spoolOptions) *Spool {
	t.Helper()
	var log = testLogger(&testutil.SyncBuffer{})
	if buf != nil {
		log = testLogger(buf)
	}
	s, err := openSpool(cfg, dst, log, opts)
	if err != nil {
		t.Fatalf("OpenSpool: %v", err)
	}
	t.Cleanup(func() {
		s.Close(context.Background())
		<-s.stopped
	})
	return s
}

func closeSpool(t *testing.T, s *Spool) {
	t.Helper()
	if err := s.Close(testCtx(t)); err != nil {
		t.Fatalf("Close: %v", err)
	}
	<-s.stopped
}

func writeSpool(t testing.TB, s *Spool, events []Event) {
	t.Helper()
	if err := s.WriteEvents(context.Background(), events); err != nil {
		t.Fatalf("WriteEvents: %v", err)
	}
}

// segmentFiles lists the segment files in dir, sorted.
func segmentFiles(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if _, _, ok := parseSegmentName(e.Name()); ok {
			out = append(out, e.Name())
		}
	}
	return out
}

func TestSpoolConfigValidate(t *testing.T) {
	tests := []struct {
		name    string
		in      SpoolConfig
		want    SpoolConfig
		wantErr string
	}{
		{name: "zero but dir gets defaults", in: SpoolConfig{Dir: "/var/spool/tg"},
			want: SpoolConfig{Dir: "/var/spool/tg", MaxBytes: 1 << 30, SegmentBytes: 4 << 20,
				SegmentAge: time.Second, RetryMin: 200 * time.Millisecond, RetryMax: 30 * time.Second, MinFreeBytes: 64 << 20}},
		{name: "small budget caps default segment", in: SpoolConfig{Dir: "d", MaxBytes: 1000},
			want: SpoolConfig{Dir: "d", MaxBytes: 1000, SegmentBytes: 1000,
				SegmentAge: time.Second, RetryMin: 200 * time.Millisecond, RetryMax: 30 * time.Second, MinFreeBytes: 64 << 20}},
		{name: "long retry_min raises default retry_max", in: SpoolConfig{Dir: "d", RetryMin: time.Minute},
			want: SpoolConfig{Dir: "d", MaxBytes: 1 << 30, SegmentBytes: 4 << 20,
				SegmentAge: time.Second, RetryMin: time.Minute, RetryMax: time.Minute, MinFreeBytes: 64 << 20}},
		{name: "explicit values kept", in: SpoolConfig{Dir: "d", MaxBytes: 10, SegmentBytes: 1, SegmentAge: 1, RetryMin: 2, RetryMax: 3, MinFreeBytes: 4},
			want: SpoolConfig{Dir: "d", MaxBytes: 10, SegmentBytes: 1, SegmentAge: 1, RetryMin: 2, RetryMax: 3, MinFreeBytes: 4}},
		{name: "negative min free bytes", in: SpoolConfig{Dir: "d", MinFreeBytes: -1}, wantErr: "spool.min_free_bytes: must not be negative, got -1"},
		{name: "missing dir", in: SpoolConfig{}, wantErr: "spool.dir: required"},
		{name: "negative max bytes", in: SpoolConfig{Dir: "d", MaxBytes: -1}, wantErr: "spool.max_bytes: must not be negative, got -1"},
		{name: "negative segment bytes", in: SpoolConfig{Dir: "d", SegmentBytes: -1}, wantErr: "spool.segment_bytes: must not be negative, got -1"},
		{name: "negative segment age", in: SpoolConfig{Dir: "d", SegmentAge: -time.Second}, wantErr: "spool.segment_age: must not be negative, got -1s"},
		{name: "negative retry min", in: SpoolConfig{Dir: "d", RetryMin: -time.Second}, wantErr: "spool.retry_min: must not be negative, got -1s"},
		{name: "negative retry max", in: SpoolConfig{Dir: "d", RetryMax: -time.Second}, wantErr: "spool.retry_max: must not be negative, got -1s"},
		{name: "segment above budget", in: SpoolConfig{Dir: "d", MaxBytes: 100, SegmentBytes: 101},
			wantErr: "spool.segment_bytes: must not exceed spool.max_bytes (100), got 101"},
		{name: "segment above default budget", in: SpoolConfig{Dir: "d", SegmentBytes: 2 << 30},
			wantErr: "spool.segment_bytes: must not exceed spool.max_bytes (1073741824), got 2147483648"},
		{name: "retry max below min", in: SpoolConfig{Dir: "d", RetryMin: time.Second, RetryMax: time.Millisecond},
			wantErr: "spool.retry_max: must not be below spool.retry_min (1s), got 1ms"},
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

func TestSpoolConfigYAML(t *testing.T) {
	var got SpoolConfig
	in := "dir: /var/spool/toolgate\nmax_bytes: 536870912\nsegment_bytes: 1048576\nsegment_age: 500ms\nretry_min: 100ms\nretry_max: 1m\n"
	if err := yaml.Unmarshal([]byte(in), &got); err != nil {
		t.Fatalf("yaml.Unmarshal: %v", err)
	}
	want := SpoolConfig{Dir: "/var/spool/toolgate", MaxBytes: 512 << 20, SegmentBytes: 1 << 20,
		SegmentAge: 500 * time.Millisecond, RetryMin: 100 * time.Millisecond, RetryMax: time.Minute}
	if got != want {
		t.Errorf("decoded %+v, want %+v", got, want)
	}
}

func TestOpenSpoolErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := OpenSpool(SpoolConfig{}, &testDest{}, nil); err == nil || err.Error() != "spool.dir: required" {
		t.Errorf("OpenSpool without dir = %v, want spool.dir: required", err)
	}
	if _, err := OpenSpool(SpoolConfig{Dir: dir}, nil, nil); err == nil {
		t.Error("OpenSpool with a nil destination succeeded")
	}
	s := openTestSpool(t, SpoolConfig{Dir: dir}, &testDest{}, nil)
	if _, err := OpenSpool(SpoolConfig{Dir: dir}, &testDest{}, nil); !errors.Is(err, ErrSpoolInUse) {
		t.Errorf("second OpenSpool on one dir = %v, want ErrSpoolInUse", err)
	}
	closeSpool(t, s)
	s2, err := OpenSpool(SpoolConfig{Dir: dir}, &testDest{}, nil)
	if err != nil {
		t.Fatalf("OpenSpool after Close: %v", err)
	}
	closeSpool(t, s2)
}

func TestSpoolPermissions(t *testing.T) {
	forEachSegmentKind(t, testSpoolPermissions)
}

// forEachSegmentKind runs test with the open segment memory-mapped (.map)
// and appended to with write(2) (.open), as where the file system cannot
// map it.
func forEachSegmentKind(t *testing.T, test func(t *testing.T, ext string, opts spoolOptions)) {
	for _, ext := range []string{mappedExt, openExt} {
		t.Run(ext[1:], func(t *testing.T) {
			test(t, ext, spoolOptions{now: time.Now, maxEventBytes: maxEventBytes, noMap: ext == openExt})
		})
	}
}

func testSpoolPermissions(t *testing.T, ext string, opts spoolOptions) {
	dir := filepath.Join(t.TempDir(), "new", "spool")
	s := openTestSpoolOpts(t, SpoolConfig{Dir: dir, SegmentAge: time.Hour}, &testDest{err: errors.New("down")}, nil, opts)
	writeSpool(t, s, spoolBatch(0, 3))
	open := segmentFiles(t, dir)
	if len(open) != 1 || !strings.HasSuffix(open[0], ext) {
		t.Fatalf("segment files = %v, want one %s", open, ext)
	}
	for _, tt := range []struct {
		path string
		want fs.FileMode
	}{
		{path: dir, want: 0o700 | fs.ModeDir},
		{path: filepath.Join(dir, open[0]), want: 0o600},
		{path: filepath.Join(dir, "LOCK"), want: 0o600},
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

func TestSpoolShipsInOrder(t *testing.T) {
	tests := []struct {
		name      string
		cfg       SpoolConfig // Dir is set by the test
		batches   int
		batchSize int
	}{
		{name: "segment per batch", cfg: SpoolConfig{SegmentBytes: 1}, batches: 50, batchSize: 20},
		{name: "several batches per segment", cfg: SpoolConfig{SegmentBytes: 16 << 10}, batches: 50, batchSize: 20},
		{name: "sealed by age", cfg: SpoolConfig{SegmentAge: 2 * time.Millisecond}, batches: 20, batchSize: 100},
		{name: "batches split into records", cfg: SpoolConfig{SegmentBytes: 1}, batches: 2, batchSize: 2500},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := tt.cfg
			cfg.Dir = t.TempDir()
			cfg.RetryMin = time.Millisecond
			dst := &testDest{}
			s := openTestSpool(t, cfg, dst, nil)
			total := tt.batches * tt.batchSize
			for b := range tt.batches {
				writeSpool(t, s, spoolBatch(b*tt.batchSize, tt.batchSize))
			}
			waitFor(t, "every event shipped", func() bool { return dst.count() >= total })
			if got, want := ids(dst.snapshot()), idRange(0, total); !reflect.DeepEqual(got, want) {
				t.Fatalf("shipped %d events, want %d exactly once in order", len(got), len(want))
			}
			waitFor(t, "nothing pending", func() bool { return s.Status().Segments == 0 })
			st := s.Status()
			if st.PendingEvents != 0 || st.Bytes != 0 || st.ShippedEvents != uint64(total) || st.ShipErrors != 0 {
				t.Errorf("Status() = %+v, want nothing pending and %d shipped", st, total)
			}
			if files := segmentFiles(t, cfg.Dir); len(files) != 0 {
				t.Errorf("segment files left after shipping: %v", files)
			}
			closeSpool(t, s)
			if got := dst.count(); got != total {
				t.Errorf("after Close the destination has %d events, want %d", got, total)
			}
		})
	}
}

func TestSpoolDestinationDown(t *testing.T) {
	tests := []struct {
		name  string
		block bool  // the destination hangs instead of failing
		err   error // what it fails with
	}{
		{name: "refusing", err: errors.New("dial tcp 10.0.0.7:9000: connect: connection refused")},
		{name: "schema or permission error", err: errors.New("code: 497, message: default: Not enough privileges")},
		{name: "hanging", block: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := fastSpool(t.TempDir())
			cfg.SegmentBytes = 4 << 10
			dst := &testDest{err: tt.err}
			if tt.block {
				dst.block = make(chan struct{})
			}
			s := openTestSpool(t, cfg, dst, nil)
			const batches, size = 40, 25
			for b := range batches {
				start := time.Now()
				writeSpool(t, s, spoolBatch(b*size, size))
				if d := time.Since(start); d > 5*time.Second {
					t.Fatalf("WriteEvents took %s while the destination is down", d)
				}
				time.Sleep(time.Millisecond)
			}
			if !tt.block {
				waitFor(t, "a failed ship", func() bool { return s.Status().ShipErrors > 0 })
			}
			st := s.Status()
			if st.PendingEvents != batches*size || st.Segments < 2 || st.ShippedEvents != 0 {
				t.Errorf("while down: Status() = %+v, want %d events pending in several segments", st, batches*size)
			}
			if tt.err != nil && !strings.Contains(st.LastShipError, tt.err.Error()) {
				t.Errorf("LastShipError = %q, want it to hold %q", st.LastShipError, tt.err)
			}
			if want := spoolEpoch; !st.OldestPending.Equal(want) {
				t.Errorf("OldestPending = %v, want %v", st.OldestPending, want)
			}

			dst.setErr(nil)
			if tt.block {
				close(dst.block)
			}
			waitFor(t, "every event shipped", func() bool { return s.Status().PendingEvents == 0 })
			if got, want := ids(dst.snapshot()), idRange(0, batches*size); !reflect.DeepEqual(got, want) {
				t.Fatalf("shipped %d events, want %d exactly once in order", len(got), len(want))
			}
			if st := s.Status(); !st.OldestPending.IsZero() || st.LastShipSuccess.IsZero() {
				t.Errorf("after recovery: OldestPending = %v, LastShipSuccess = %v", st.OldestPending, st.LastShipSuccess)
			}
		})
	}
}

func TestSpoolRestart(t *testing.T) {
	dir := t.TempDir()
	cfg := fastSpool(dir)
	cfg.SegmentBytes = 2 << 10
	down := errors.New("down")

	// Run 1 and run 2 write with the destination down; Close keeps the data.
	next := 0
	for run := range 2 {
		dst := &testDest{err: down}
		s := openTestSpool(t, cfg, dst, nil)
		if run == 1 {
			if st := s.Status(); st.PendingEvents != int64(next) {
				t.Fatalf("run 2 opened with %d events pending, want %d", st.PendingEvents, next)
			}
		}
		for range 30 {
			writeSpool(t, s, spoolBatch(next, 7))
			next += 7
		}
		start := time.Now()
		closeSpool(t, s)
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("Close with the destination down took %s", d)
		}
		if dst.count() != 0 {
			t.Fatalf("the failing destination stored %d events", dst.count())
		}
		if len(segmentFiles(t, dir)) == 0 {
			t.Fatal("no segment files left on disk after Close")
		}
	}

	// Run 3: the destination is up; everything ships, once, in order.
	dst := &testDest{}
	s := openTestSpool(t, cfg, dst, nil)
	// The shipper starts as the spool opens, and may have shipped some
	// already: recovered events are pending or shipped.
	if st := s.Status(); st.PendingEvents+int64(st.ShippedEvents) != int64(next) || st.TornRecords != 0 || st.CorruptSegments != 0 {
		t.Errorf("run 3 opened with Status() = %+v, want %d events pending or shipped, nothing torn or corrupt", st, next)
	}
	writeSpool(t, s, spoolBatch(next, 5))
	next += 5
	closeSpool(t, s)
	if got, want := ids(dst.snapshot()), idRange(0, next); !reflect.DeepEqual(got, want) {
		t.Fatalf("shipped %v, want %d events in order", got, next)
	}
	if st := s.Status(); st.ShippedEvents != uint64(next) || st.PendingEvents != 0 {
		t.Errorf("Status() = %+v, want %d shipped", st, next)
	}
	if files := segmentFiles(t, dir); len(files) != 0 {
		t.Errorf("segment files left: %v", files)
	}
}

func TestSpoolCloseTimeout(t *testing.T) {
	dir := t.TempDir()
	dst := &testDest{block: make(chan struct{}), entered: make(chan struct{}, 100)}
	s := openTestSpool(t, fastSpool(dir), dst, nil)
	writeSpool(t, s, spoolBatch(0, 10))
	<-dst.entered // the shipper hangs on the destination
	writeSpool(t, s, spoolBatch(10, 10))
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if err := s.Close(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Close = %v, want DeadlineExceeded", err)
	}
	<-s.stopped // the destination honored the canceled context
	if err := s.WriteEvents(t.Context(), spoolBatch(20, 1)); !errors.Is(err, ErrClosed) {
		t.Errorf("WriteEvents after Close = %v, want ErrClosed", err)
	}
	if err := s.Close(t.Context()); err != nil {
		t.Errorf("second Close = %v, want nil", err)
	}

	up := &testDest{}
	s = openTestSpool(t, fastSpool(dir), up, nil)
	closeSpool(t, s)
	if got, want := ids(up.snapshot()), idRange(0, 20); !reflect.DeepEqual(got, want) {
		t.Errorf("after reopening shipped %v, want %v", got, want)
	}
}

func TestSpoolCloseShipsOpenSegment(t *testing.T) {
	dst := &testDest{}
	// Neither size nor age would seal the segment: only Close does.
	s := openTestSpool(t, SpoolConfig{Dir: t.TempDir(), SegmentAge: time.Hour}, dst, nil)
	writeSpool(t, s, spoolBatch(0, 3))
	writeSpool(t, s, spoolBatch(3, 3))
	if st := s.Status(); st.Segments != 1 || st.PendingEvents != 6 {
		t.Errorf("before Close: Status() = %+v, want one segment of 6 events", st)
	}
	closeSpool(t, s)
	if got, want := ids(dst.snapshot()), idRange(0, 6); !reflect.DeepEqual(got, want) {
		t.Errorf("Close shipped %v, want %v", got, want)
	}
}

func TestSpoolDestinationPanics(t *testing.T) {
	var logs testutil.SyncBuffer
	dst := &testDest{panicPending: true}
	s := openTestSpool(t, fastSpool(t.TempDir()), dst, &logs)
	writeSpool(t, s, spoolBatch(0, 5))
	waitFor(t, "shipped after the panic", func() bool { return dst.count() == 5 })
	st := s.Status()
	if st.ShipErrors != 1 || !strings.Contains(st.LastShipError, "destination panicked: destination bug") {
		t.Errorf("Status() = %+v, want one ship error naming the panic", st)
	}
	closeSpool(t, s)
	if !strings.Contains(logs.String(), "spool shipping again") {
		t.Errorf("no recovery message in the log:\n%s", logs.String())
	}
}

func TestSpoolUnencodableEvent(t *testing.T) {
	dst := &testDest{}
	s := openTestSpool(t, fastSpool(t.TempDir()), dst, nil)
	bad := spoolEv(1)
	bad.Time = bad.Time.AddDate(20000, 0, 0) // JSON time has four-digit years
	if err := s.WriteEvents(t.Context(), []Event{spoolEv(0), bad}); err == nil {
		t.Fatal("WriteEvents with an unencodable event succeeded")
	}
	writeSpool(t, s, spoolBatch(2, 1))
	closeSpool(t, s)
	if got, want := ids(dst.snapshot()), idRange(2, 3); !reflect.DeepEqual(got, want) {
		t.Errorf("shipped %v, want %v (the failed batch is not stored at all)", got, want)
	}
}

func TestSpoolClosedAndCanceled(t *testing.T) {
	s := openTestSpool(t, fastSpool(t.TempDir()), &testDest{}, nil)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := s.WriteEvents(ctx, spoolBatch(0, 1)); !errors.Is(err, context.Canceled) {
		t.Errorf("WriteEvents with a canceled context = %v, want Canceled", err)
	}
	if err := s.WriteEvents(t.Context(), nil); err != nil {
		t.Errorf("WriteEvents(nil) = %v", err)
	}
	closeSpool(t, s)
	if err := s.WriteEvents(t.Context(), spoolBatch(0, 1)); !errors.Is(err, ErrClosed) {
		t.Errorf("WriteEvents after Close = %v, want ErrClosed", err)
	}
	if st := s.Status(); st.Segments != 0 || st.ShippedEvents != 0 {
		t.Errorf("Status() = %+v, want nothing", st)
	}
}

func TestScanSegment(t *testing.T) {
	r1 := frameRecord(t, spoolBatch(0, 2))
	r2 := frameRecord(t, spoolBatch(2, 3))
	r3 := frameRecord(t, spoolBatch(5, 1))
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	flip := func(rec []byte, at int) []byte {
		out := bytes.Clone(rec)
		out[at] ^= 0x20
		return out
	}
	withLen := func(rec []byte, n uint32) []byte {
		out := bytes.Clone(rec)
		out[0], out[1], out[2], out[3] = byte(n), byte(n>>8), byte(n>>16), byte(n>>24)
		return out
	}
	tests := []struct {
		name     string
		data     []byte
		wantGood int
		wantBad  int
		wantTorn bool
		wantEnd  int
	}{
		{name: "empty", data: nil, wantEnd: 0},
		{name: "three records", data: cat(r1, r2, r3), wantGood: 3, wantEnd: len(r1) + len(r2) + len(r3)},
		{name: "torn payload", data: cat(r1, r2, r3[:len(r3)-3]), wantGood: 2, wantTorn: true, wantEnd: len(r1) + len(r2)},
		{name: "torn header", data: cat(r1, r2[:5]), wantGood: 1, wantTorn: true, wantEnd: len(r1)},
		{name: "zero tail", data: cat(r1, make([]byte, 4096)), wantGood: 1, wantTorn: true, wantEnd: len(r1)},
		{name: "short zero tail", data: cat(r1, make([]byte, 3)), wantGood: 1, wantTorn: true, wantEnd: len(r1)},
		{name: "flipped payload byte", data: cat(r1, flip(r2, 20), r3), wantGood: 2, wantBad: 1, wantEnd: len(r1) + len(r2) + len(r3)},
		{name: "flipped checksum byte", data: cat(r1, flip(r2, 5), r3), wantGood: 2, wantBad: 1, wantEnd: len(r1) + len(r2) + len(r3)},
		{name: "zero length", data: cat(r1, withLen(r2, 0), r3), wantGood: 1, wantBad: 1, wantEnd: len(r1)},
		{name: "length beyond limit", data: cat(r1, withLen(r2, maxRecordBytes+1), r3), wantGood: 1, wantBad: 1, wantEnd: len(r1)},
		{name: "length one short", data: cat(r1, withLen(r2, uint32(len(r2)-9)), r3), wantGood: 1, wantBad: 1, wantEnd: len(r1) + len(r2) - 1},
		{name: "length past the end after damage", data: cat(flip(r1, 20), withLen(r2, 1<<20)), wantBad: 1, wantEnd: len(r1)},
		{name: "garbage", data: []byte("this is not a segment"), wantBad: 1, wantEnd: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sc := scanSegment(tt.data)
			if len(sc.good) != tt.wantGood || sc.bad != tt.wantBad || sc.torn != tt.wantTorn || sc.end != tt.wantEnd {
				t.Errorf("scanSegment = %d good, %d bad, torn %t, end %d; want %d, %d, %t, %d",
					len(sc.good), sc.bad, sc.torn, sc.end, tt.wantGood, tt.wantBad, tt.wantTorn, tt.wantEnd)
			}
		})
	}
}

// TestSpoolRecordIsFileFormat: a record's payload is exactly what File
// writes for the same events (testdata/events.ndjson is File's golden
// output), and it decodes back to them.
// TestSpoolRecordReadsAsFile checks that a record's payload is NDJSON
// that File's reader reads back into the events File wrote, though it
// leaves out the fields at their zero value.
func TestSpoolRecordReadsAsFile(t *testing.T) {
	golden, err := os.ReadFile(filepath.Join("testdata", "events.ndjson"))
	if err != nil {
		t.Fatal(err)
	}
	events, err := ReadEvents(bytes.NewReader(golden))
	if err != nil {
		t.Fatal(err)
	}
	rec := frameRecord(t, events)
	sc := scanSegment(rec)
	if len(sc.good) != 1 {
		t.Fatalf("scanSegment found %d good records, want 1", len(sc.good))
	}
	payload := sc.good[0].payload(rec)
	if len(payload) >= len(golden) {
		t.Errorf("record payload of %d bytes, want it smaller than File's %d", len(payload), len(golden))
	}
	for _, decode := range []func([]byte) ([]Event, error){
		func(p []byte) ([]Event, error) { return decodeRecord(p, "", nil) },
		func(p []byte) ([]Event, error) { return ReadEvents(bytes.NewReader(p)) },
	} {
		back, err := decode(payload)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(back, events) {
			t.Errorf("the record reads back as\n%+v\nwant\n%+v", back, events)
		}
		var file bytes.Buffer
		enc := newEventEncoder()
		for i := range back {
			if err := enc.encode(&back[i]); err != nil {
				t.Fatal(err)
			}
		}
		file.Write(enc.buf)
		if !bytes.Equal(file.Bytes(), golden) {
			t.Errorf("the record's events written as File writes them\n%s\nwant\n%s", file.Bytes(), golden)
		}
	}
	if got := countEvents(payload); got != len(events) {
		t.Errorf("countEvents = %d, want %d", got, len(events))
	}
}

func TestSpoolFrame(t *testing.T) {
	line := int(recordSize(t, spoolBatch(0, 1))) - recordHeaderSize
	perRecord := (recordSplitBytes + line - 1) / line // events in a full record
	tests := []struct {
		name        string
		events      int
		wantRecords int
	}{
		{name: "one event", events: 1, wantRecords: 1},
		{name: "a queue batch", events: 1000, wantRecords: 1},
		// A record closes once its payload passes recordSplitBytes.
		{name: "beyond the split size", events: 3 * perRecord, wantRecords: 3},
		{name: "just past the split size", events: perRecord + 1, wantRecords: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &Spool{opts: spoolOptions{maxEventBytes: maxEventBytes}}
			enc := newRecordEncoder()
			if err := s.frame(enc, spoolBatch(0, tt.events)); err != nil {
				t.Fatal(err)
			}
			data := enc.buf
			sc := scanSegment(data)
			if len(sc.good) != tt.wantRecords || sc.bad != 0 || sc.torn || sc.end != len(data) {
				t.Fatalf("scanSegment = %d good, %d bad, torn %t; want %d good records and nothing else",
					len(sc.good), sc.bad, sc.torn, tt.wantRecords)
			}
			var events []Event
			for _, r := range sc.good {
				if n := len(r.payload(data)); tt.wantRecords > 1 && n > recordSplitBytes+1000 {
					t.Errorf("record of %d bytes, want about %d at most", n, recordSplitBytes)
				}
				var err error
				if events, err = decodeRecord(r.payload(data), "", events); err != nil {
					t.Fatal(err)
				}
			}
			if got, want := ids(events), idRange(0, tt.events); !reflect.DeepEqual(got, want) {
				t.Errorf("decoded %d events, want %d in order", len(got), len(want))
			}
		})
	}
}

func TestSpoolEventTooLarge(t *testing.T) {
	s := &Spool{opts: spoolOptions{maxEventBytes: 1000}}
	big := spoolEv(0)
	big.Detail = strings.Repeat("x", 1000)
	err := s.frame(newRecordEncoder(), []Event{spoolEv(1), big})
	if err == nil || !strings.Contains(err.Error(), "event 2 of 2 encodes to") {
		t.Errorf("frame with a huge event = %v, want an error naming event 2", err)
	}
}

// segFile describes a segment file for TestSpoolRecovery: its records,
// each a batch of events.
type segFile struct {
	seq     uint64
	ext     string
	records [][]Event
}

func (sf segFile) bytes(t *testing.T) []byte {
	var out []byte
	for _, r := range sf.records {
		out = append(out, frameRecord(t, r)...)
	}
	return out
}

func TestSpoolRecovery(t *testing.T) {
	// Three segments of three records of ten events: events 0..89.
	layout := func(lastExt string) []segFile {
		var files []segFile
		for s := range 3 {
			sf := segFile{seq: uint64(s + 1), ext: segmentExt}
			for r := range 3 {
				sf.records = append(sf.records, spoolBatch((s*3+r)*10, 10))
			}
			files = append(files, sf)
		}
		files[2].ext = lastExt
		return files
	}
	recLen := int(recordSize(t, spoolBatch(0, 10)))
	all := idRange(0, 90)
	without := func(from, to int) []string {
		return slices.Concat(idRange(0, from), idRange(to, 90))
	}
	tests := []struct {
		name        string
		lastExt     string
		damage      func(t *testing.T, dir string) // changes the files written from layout
		want        []string                       // ids shipped, in order
		wantTorn    uint64
		wantCorrupt []string // files in corrupt/, each equal to the damaged file
	}{
		{name: "clean", lastExt: segmentExt, want: all},
		{name: "clean open segment", lastExt: openExt, want: all},
		{name: "last record torn", lastExt: openExt, want: idRange(0, 80), wantTorn: 1,
			damage: func(t *testing.T, dir string) { truncateBy(t, filepath.Join(dir, segmentName(3, openExt)), 3) }},
		{name: "last header torn", lastExt: openExt, want: idRange(0, 80), wantTorn: 1,
			damage: func(t *testing.T, dir string) {
				truncateBy(t, filepath.Join(dir, segmentName(3, openExt)), int64(recLen-5))
			}},
		{name: "sealed segment torn", lastExt: segmentExt, want: idRange(0, 80), wantTorn: 1,
			damage: func(t *testing.T, dir string) { truncateBy(t, filepath.Join(dir, segmentName(3, segmentExt)), 1) }},
		{name: "zero-filled tail", lastExt: openExt, want: all, wantTorn: 1,
			damage: func(t *testing.T, dir string) {
				appendBytes(t, filepath.Join(dir, segmentName(3, openExt)), make([]byte, 8192))
			}},
		{name: "empty open segment", lastExt: openExt, want: idRange(0, 60),
			damage: func(t *testing.T, dir string) {
				truncateBy(t, filepath.Join(dir, segmentName(3, openExt)), int64(3*recLen))
			}},
		{name: "flipped byte in a middle record", lastExt: segmentExt, want: without(40, 50),
			wantCorrupt: []string{segmentName(2, segmentExt)},
			damage: func(t *testing.T, dir string) {
				flipByte(t, filepath.Join(dir, segmentName(2, segmentExt)), recLen+recLen/2)
			}},
		{name: "flipped byte in the open segment", lastExt: openExt, want: without(60, 70),
			wantCorrupt: []string{segmentName(3, openExt)},
			damage: func(t *testing.T, dir string) {
				flipByte(t, filepath.Join(dir, segmentName(3, openExt)), 100)
			}},
		{name: "zeroed length in a middle record", lastExt: segmentExt, want: without(40, 60),
			wantCorrupt: []string{segmentName(2, segmentExt)},
			damage: func(t *testing.T, dir string) {
				path := filepath.Join(dir, segmentName(2, segmentExt))
				for i := range 4 {
					setByte(t, path, recLen+i, 0)
				}
			}},
		{name: "segment of garbage", lastExt: segmentExt, want: without(30, 60),
			wantCorrupt: []string{segmentName(2, segmentExt)},
			damage: func(t *testing.T, dir string) {
				writeTestFile(t, filepath.Join(dir, segmentName(2, segmentExt)), []byte("\x01\x02garbage, not records"))
			}},
		{name: "checksummed record that is not events", lastExt: segmentExt, want: without(0, 10),
			wantCorrupt: []string{segmentName(1, segmentExt)},
			damage: func(t *testing.T, dir string) {
				path := filepath.Join(dir, segmentName(1, segmentExt))
				data, err := os.ReadFile(path)
				if err != nil {
					t.Fatal(err)
				}
				enc := newRecordEncoder()
				var off int
				enc.buf, off = beginRecord(enc.buf)
				enc.buf = append(enc.buf, "[1,2,3]\n"...)
				endRecord(enc.buf, off)
				writeTestFile(t, path, slices.Concat(enc.buf, data[recLen:]))
			}},
		{name: "leftovers", lastExt: openExt, want: all,
			damage: func(t *testing.T, dir string) {
				writeTestFile(t, filepath.Join(dir, segmentName(9, segmentExt)+tmpExt), []byte("half a repair"))
				writeTestFile(t, filepath.Join(dir, "README"), []byte("not a segment"))
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			for _, sf := range layout(tt.lastExt) {
				writeTestFile(t, filepath.Join(dir, segmentName(sf.seq, sf.ext)), sf.bytes(t))
			}
			if tt.damage != nil {
				tt.damage(t, dir)
			}
			damaged := map[string][]byte{}
			for _, name := range tt.wantCorrupt {
				data, err := os.ReadFile(filepath.Join(dir, name))
				if err != nil {
					t.Fatal(err)
				}
				damaged[name] = data
			}

			var logs testutil.SyncBuffer
			dst := &testDest{}
			s := openTestSpool(t, fastSpool(dir), dst, &logs)
			// Written after recovery: ships after everything recovered.
			writeSpool(t, s, spoolBatch(1000, 2))
			closeSpool(t, s)

			want := slices.Concat(tt.want, idRange(1000, 1002))
			if got := ids(dst.snapshot()); !reflect.DeepEqual(got, want) {
				t.Errorf("shipped %v\nwant %v", got, want)
			}
			st := s.Status()
			if st.TornRecords != tt.wantTorn || st.CorruptSegments != uint64(len(tt.wantCorrupt)) {
				t.Errorf("torn = %d, corrupt = %d; want %d, %d", st.TornRecords, st.CorruptSegments, tt.wantTorn, len(tt.wantCorrupt))
			}
			if st.PendingEvents != 0 || st.Segments != 0 {
				t.Errorf("after Close: Status() = %+v, want nothing pending", st)
			}
			entries, _ := os.ReadDir(filepath.Join(dir, corruptDir))
			var gotCorrupt []string
			for _, e := range entries {
				gotCorrupt = append(gotCorrupt, e.Name())
				data, err := os.ReadFile(filepath.Join(dir, corruptDir, e.Name()))
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(data, damaged[e.Name()]) {
					t.Errorf("corrupt/%s differs from the damaged file", e.Name())
				}
			}
			if !slices.Equal(gotCorrupt, tt.wantCorrupt) {
				t.Errorf("corrupt/ holds %v, want %v", gotCorrupt, tt.wantCorrupt)
			}
			if files := segmentFiles(t, dir); len(files) != 0 {
				t.Errorf("segment files left: %v", files)
			}
			if tmps, _ := filepath.Glob(filepath.Join(dir, "*"+tmpExt)); len(tmps) != 0 {
				t.Errorf("temporary files left: %v", tmps)
			}
			if len(tt.wantCorrupt) > 0 && !strings.Contains(logs.String(), "damaged records") {
				t.Errorf("no log of the damaged segment:\n%s", logs.String())
			}
			if tt.wantTorn > 0 && !strings.Contains(logs.String(), "torn record") {
				t.Errorf("no log of the torn record:\n%s", logs.String())
			}
		})
	}
}

// TestSpoolRecoveryRepeats checks that a repair interrupted by a crash
// (the damaged segment copied aside but not yet rewritten) is done again,
// without losing or duplicating the copy's evidence.
func TestSpoolRecoveryRepeats(t *testing.T) {
	dir := t.TempDir()
	good := frameRecord(t, spoolBatch(0, 5))
	bad := frameRecord(t, spoolBatch(5, 5))
	bad[len(bad)-2] ^= 1
	data := slices.Concat(good, bad)
	path := filepath.Join(dir, segmentName(4, segmentExt))
	writeTestFile(t, path, data)
	// What a crash after the copy left: the copy, its leftover tmp, and
	// the damaged segment still in place.
	if err := os.MkdirAll(filepath.Join(dir, corruptDir), 0o700); err != nil {
		t.Fatal(err)
	}
	writeTestFile(t, filepath.Join(dir, corruptDir, segmentName(4, segmentExt)), data)
	writeTestFile(t, filepath.Join(dir, segmentName(4, segmentExt)+tmpExt), good)

	dst := &testDest{}
	s := openTestSpool(t, fastSpool(dir), dst, nil)
	writeSpool(t, s, spoolBatch(100, 1))
	closeSpool(t, s)
	if got, want := ids(dst.snapshot()), slices.Concat(idRange(0, 5), idRange(100, 101)); !reflect.DeepEqual(got, want) {
		t.Errorf("shipped %v, want %v", got, want)
	}
	entries, _ := os.ReadDir(filepath.Join(dir, corruptDir))
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	want := []string{segmentName(4, segmentExt), segmentName(4, segmentExt) + ".1"}
	if !slices.Equal(names, want) {
		t.Errorf("corrupt/ holds %v, want %v", names, want)
	}
	// The new segment took a number past the corrupt ones: nothing reused.
	if s.nextSeq <= 5 {
		t.Errorf("next sequence number %d, want > 4", s.nextSeq)
	}
}

// TestSpoolCrashSnapshot copies the spool directory while a writer is
// busy, as a crash would leave it (newest file first, so that the copy is
// a prefix of the writes, possibly with a torn last record), and checks
// that each copy ships every batch acknowledged before the copy began, in
// order, with nothing damaged.
func TestSpoolCrashSnapshot(t *testing.T) {
	dir := t.TempDir()
	cfg := fastSpool(dir)
	cfg.SegmentBytes = 4 << 10
	s := openTestSpool(t, cfg, &testDest{err: errors.New("down")}, nil)

	const size = 10
	var acked atomic.Int64 // events acknowledged so far
	stop := make(chan struct{})
	var writer sync.WaitGroup
	writer.Go(func() {
		for b := 0; ; b++ {
			select {
			case <-stop:
				return
			default:
			}
			if err := s.WriteEvents(context.Background(), spoolBatch(b*size, size)); err != nil {
				t.Errorf("WriteEvents: %v", err)
				return
			}
			acked.Store(int64((b + 1) * size))
			if b%50 == 49 {
				// As the queue does every sync_interval: without it the
				// tiny segments' files pile up unsynced, and Close, which
				// fsyncs each, outlasts its deadline on a busy machine.
				if err := s.Sync(); err != nil {
					t.Errorf("Sync: %v", err)
					return
				}
			}
		}
	})

	type snapshot struct {
		dir   string
		acked int
	}
	var snaps []snapshot
	for range 8 {
		time.Sleep(3 * time.Millisecond)
		snap := snapshot{dir: t.TempDir(), acked: int(acked.Load())}
		copySpoolNewestFirst(t, dir, snap.dir)
		snaps = append(snaps, snap)
	}
	close(stop)
	writer.Wait()
	closeSpool(t, s)

	for i, snap := range snaps {
		dst := &testDest{}
		s := openTestSpool(t, fastSpool(snap.dir), dst, nil)
		closeSpool(t, s)
		got := ids(dst.snapshot())
		st := s.Status()
		if len(got) < snap.acked || len(got)%size != 0 || !slices.Equal(got, idRange(0, len(got))) {
			t.Errorf("snapshot %d: shipped %d events, want a whole-batch prefix of at least %d", i, len(got), snap.acked)
		}
		if st.CorruptSegments != 0 || st.TornRecords > 1 || st.PendingEvents != 0 {
			t.Errorf("snapshot %d: Status() = %+v, want nothing corrupt, at most one torn record", i, st)
		}
		t.Logf("snapshot %d: %d acknowledged before the copy, %d shipped, %d torn", i, snap.acked, len(got), st.TornRecords)
	}
}

// copySpoolNewestFirst copies the segment files of dir to dst, newest
// first; a segment sealed in between is read under its new name.
//
// Every segment from the first to the newest is copied, listed or not:
// the test's spool starts at segment 1 and its destination is down, so
// none is deleted, and a listing of a directory in which files are
// renamed meanwhile (sealed, .map to .seg) may leave a renamed one out
// altogether (ext4 reads its entries in hash order, in several calls),
// which a crash, freezing the directory, never does.
func copySpoolNewestFirst(t *testing.T, dir, dst string) {
	t.Helper()
	names := segmentFiles(t, dir)
	if len(names) == 0 {
		return
	}
	// Open names first: a segment sealed in between is then found
	// under its new name.
	exts := []string{mappedExt, openExt, segmentExt}
	exists := func(seq uint64) bool {
		for _, ext := range exts {
			if _, err := os.Stat(filepath.Join(dir, segmentName(seq, ext))); err == nil {
				return true
			}
		}
		return false
	}
	last, _, _ := parseSegmentName(names[len(names)-1])
	for exists(last + 1) {
		last++
	}
	for seq := last; seq >= 1; seq-- {
		var (
			data []byte
			err  error
			name string
		)
		for _, ext := range exts {
			name = segmentName(seq, ext)
			if data, err = os.ReadFile(filepath.Join(dir, name)); err == nil {
				break
			}
		}
		if err != nil {
			t.Fatal(err)
		}
		writeTestFile(t, filepath.Join(dst, name), data)
	}
}

// TestSpoolShipsAgainAfterCrash copies the spool directory while the
// destination holds a segment (stored, not yet acknowledged to the spool):
// a process killed then, between the destination's store and the delete,
// leaves the segment on disk, and the next start ships it again.
func TestSpoolShipsAgainAfterCrash(t *testing.T) {
	dir := t.TempDir()
	dst := &testDest{block: make(chan struct{}), entered: make(chan struct{}, 10)}
	s := openTestSpool(t, fastSpool(dir), dst, nil)
	writeSpool(t, s, spoolBatch(0, 5))
	<-dst.entered
	crashed := t.TempDir()
	copySpoolNewestFirst(t, dir, crashed)
	close(dst.block)
	closeSpool(t, s)
	if got, want := ids(dst.snapshot()), idRange(0, 5); !reflect.DeepEqual(got, want) {
		t.Fatalf("first run shipped %v, want %v", got, want)
	}
	if files := segmentFiles(t, dir); len(files) != 0 {
		t.Fatalf("segment files left after the acknowledgement: %v", files)
	}

	again := &testDest{}
	s = openTestSpool(t, fastSpool(crashed), again, nil)
	closeSpool(t, s)
	if got, want := ids(again.snapshot()), idRange(0, 5); !reflect.DeepEqual(got, want) {
		t.Errorf("after the crash shipped %v, want %v again (at least once)", got, want)
	}
}

func TestSpoolBudget(t *testing.T) {
	const size = 10
	rec := recordSize(t, spoolBatch(0, size))
	tests := []struct {
		name string
		// hang makes the destination hang on the first segment, which the
		// budget must then keep; otherwise it fails once and the shipper
		// waits an hour.
		hang        bool
		wantShipped []string
	}{
		{name: "destination down", wantShipped: idRange(15*size, 20*size)},
		{name: "segment being shipped is kept", hang: true,
			wantShipped: slices.Concat(idRange(0, size), idRange(16*size, 20*size))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			// One segment per batch; five segments fit.
			cfg := SpoolConfig{Dir: dir, MaxBytes: 5*rec + rec/2, SegmentBytes: 1, SegmentAge: time.Hour,
				RetryMin: time.Hour, RetryMax: time.Hour}
			dst := &testDest{err: errors.New("down"), entered: make(chan struct{}, 100)}
			if tt.hang {
				dst.block = make(chan struct{})
			}
			var logs testutil.SyncBuffer
			s := openTestSpool(t, cfg, dst, &logs)
			writeSpool(t, s, spoolBatch(0, size))
			<-dst.entered
			if !tt.hang {
				waitFor(t, "the first failure", func() bool { return s.Status().ShipErrors == 1 })
			}
			for b := 1; b < 20; b++ {
				writeSpool(t, s, spoolBatch(b*size, size))
				if st := s.Status(); st.Bytes > cfg.MaxBytes {
					t.Fatalf("after batch %d the spool holds %d bytes, more than %d", b, st.Bytes, cfg.MaxBytes)
				}
			}
			st := s.Status()
			wantDropped := 20 - len(tt.wantShipped)/size
			if st.DroppedSegments != uint64(wantDropped) || st.DroppedEvents != uint64(wantDropped*size) {
				t.Errorf("dropped %d segments and %d events, want %d and %d",
					st.DroppedSegments, st.DroppedEvents, wantDropped, wantDropped*size)
			}
			if st.Segments != 20-wantDropped || st.PendingEvents != int64(len(tt.wantShipped)) {
				t.Errorf("Status() = %+v, want %d segments, %d events pending", st, 20-wantDropped, len(tt.wantShipped))
			}
			var warnings int
			for line := range strings.Lines(logs.String()) {
				if strings.Contains(line, "over its disk budget, dropped the oldest segment") {
					warnings++
					if !strings.Contains(line, fmt.Sprintf(" events=%d ", size)) {
						t.Errorf("warning without the event count: %s", line)
					}
				}
			}
			if warnings != wantDropped {
				t.Errorf("%d drop warnings, want one per dropped segment (%d)", warnings, wantDropped)
			}
			if got := len(segmentFiles(t, dir)); got != 20-wantDropped {
				t.Errorf("%d segment files on disk, want %d", got, 20-wantDropped)
			}

			// The destination comes back; what is left ships in order.
			dst.setErr(nil)
			if tt.hang {
				close(dst.block)
			}
			closeSpool(t, s)
			if got := ids(dst.snapshot()); !reflect.DeepEqual(got, tt.wantShipped) {
				t.Errorf("shipped %v\nwant %v", got, tt.wantShipped)
			}
		})
	}
}

func TestSpoolBudgetOnOpen(t *testing.T) {
	dir := t.TempDir()
	rec := recordSize(t, spoolBatch(0, 10))
	for i := range 6 {
		writeTestFile(t, filepath.Join(dir, segmentName(uint64(i+1), segmentExt)), frameRecord(t, spoolBatch(i*10, 10)))
	}
	// A smaller budget than the last process had: the oldest go at once.
	dst := &testDest{}
	s := openTestSpool(t, SpoolConfig{Dir: dir, MaxBytes: 2 * rec, SegmentBytes: 1}, dst, nil)
	closeSpool(t, s)
	if got, want := ids(dst.snapshot()), idRange(40, 60); !reflect.DeepEqual(got, want) {
		t.Errorf("shipped %v, want %v", got, want)
	}
	if st := s.Status(); st.DroppedSegments != 4 || st.DroppedEvents != 40 {
		t.Errorf("dropped %d segments, %d events; want 4, 40", st.DroppedSegments, st.DroppedEvents)
	}
}

// TestSpoolHammer writes from four goroutines while the destination flaps
// up and down, with a budget small enough to drop, and checks the
// accounting: every acknowledged event is shipped or dropped, and each
// writer's events arrive in order.
func TestSpoolHammer(t *testing.T) {
	const writers, batches, size = 4, 150, 20
	dir := t.TempDir()
	cfg := SpoolConfig{Dir: dir, MaxBytes: 512 << 10, SegmentBytes: 8 << 10, SegmentAge: time.Millisecond,
		RetryMin: time.Millisecond, RetryMax: 4 * time.Millisecond}
	dst := &testDest{}
	s := openTestSpool(t, cfg, dst, nil)

	stop := make(chan struct{})
	var helpers sync.WaitGroup
	helpers.Go(func() { // the destination flaps
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
			if i%3 == 0 {
				dst.setErr(nil)
			} else {
				dst.setErr(errors.New("down"))
			}
		}
	})
	helpers.Go(func() { // readers of the status and metrics
		for {
			select {
			case <-stop:
				return
			default:
			}
			st := s.Status()
			if st.PendingEvents < 0 || st.Bytes < 0 {
				t.Errorf("inconsistent status %+v", st)
				return
			}
			s.Collect(make(chan prometheus.Metric, 32))
			time.Sleep(100 * time.Microsecond)
		}
	})

	var mu sync.Mutex
	written := map[string]bool{}
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for b := range batches {
				events := make([]Event, size)
				for i := range events {
					events[i] = spoolEv(b*size + i)
					events[i].EventID = fmt.Sprintf("w%d-%06d", w, b*size+i)
				}
				if err := s.WriteEvents(context.Background(), events); err != nil {
					t.Errorf("WriteEvents: %v", err)
					return
				}
				mu.Lock()
				for _, e := range events {
					written[e.EventID] = true
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	close(stop)
	helpers.Wait()
	dst.setErr(nil)
	closeSpool(t, s)

	st := s.Status()
	shipped := dst.snapshot()
	seen := map[string]bool{}
	last := map[int]int{}
	var dupes, unknown, disorder int
	for _, e := range shipped {
		if seen[e.EventID] {
			dupes++
			continue
		}
		seen[e.EventID] = true
		if !written[e.EventID] {
			unknown++
		}
		var w, i int
		fmt.Sscanf(e.EventID, "w%d-%d", &w, &i)
		if prev, ok := last[w]; ok && i <= prev {
			disorder++
		}
		last[w] = i
	}
	total := writers * batches * size
	if len(written) != total {
		t.Fatalf("%d events acknowledged, want %d", len(written), total)
	}
	if got, want := len(seen), total-int(st.DroppedEvents); got != want {
		t.Errorf("shipped %d distinct events, want written %d - dropped %d = %d", got, total, st.DroppedEvents, want)
	}
	if unknown != 0 || disorder != 0 {
		t.Errorf("%d shipped events never written, %d out of order", unknown, disorder)
	}
	if st.PendingEvents != 0 || st.Segments != 0 || st.CorruptSegments != 0 || st.TornRecords != 0 {
		t.Errorf("after Close: Status() = %+v", st)
	}
	if dupes != 0 {
		t.Errorf("%d events shipped twice by a destination that never stores and fails", dupes)
	}
	t.Logf("%d written, %d dropped in %d segments, %d shipped, %d ship errors",
		total, st.DroppedEvents, st.DroppedSegments, len(shipped), st.ShipErrors)
}

// TestSpoolAtLeastOnce: a destination that stores a segment and still
// reports an error (an insert whose answer timed out) gets the segment
// again; deduplicating by event id gives every event exactly once.
func TestSpoolAtLeastOnce(t *testing.T) {
	dst := &testDest{err: errors.New("read: i/o timeout"), storeAnyway: true}
	s := openTestSpool(t, fastSpool(t.TempDir()), dst, nil)
	writeSpool(t, s, spoolBatch(0, 5))
	waitFor(t, "a failed ship", func() bool { return s.Status().ShipErrors > 0 })
	dst.setErr(nil)
	closeSpool(t, s)
	got := dst.snapshot()
	if len(got) <= 5 {
		t.Fatalf("the destination got %d events, want the 5 more than once", len(got))
	}
	var dedup []string
	for _, id := range ids(got) {
		if !slices.Contains(dedup, id) {
			dedup = append(dedup, id)
		}
	}
	if want := idRange(0, 5); !reflect.DeepEqual(dedup, want) {
		t.Errorf("deduplicated by event id: %v, want %v", dedup, want)
	}
}

func TestSpoolWithQueue(t *testing.T) {
	dst := &testDest{}
	cfg := fastSpool(t.TempDir())
	cfg.SegmentBytes = 64 << 10
	s := openTestSpool(t, cfg, dst, nil)
	q := startQueue(t, s, QueueConfig{BatchSize: 100}, nil)
	const n = 5000
	for i := range n {
		if !q.Record(spoolEv(i)) {
			t.Fatalf("Record(%d) = false", i)
		}
	}
	closeQueue(t, q)
	closeSpool(t, s)
	if got, want := ids(dst.snapshot()), idRange(0, n); !reflect.DeepEqual(got, want) {
		t.Errorf("shipped %d events, want %d in order", len(got), n)
	}
	if qs := q.Stats(); qs.Written != n {
		t.Errorf("queue wrote %d, want %d", qs.Written, n)
	}
}

func FuzzSpoolRecover(f *testing.F) {
	valid := frameRecord(f, spoolBatch(0, 2))
	notEvents := func() []byte {
		enc := newRecordEncoder()
		var off int
		enc.buf, off = beginRecord(enc.buf)
		enc.buf = append(enc.buf, "{\"event_id\":7}\n"...)
		endRecord(enc.buf, off)
		return bytes.Clone(enc.buf)
	}()
	f.Add([]byte{})
	f.Add(valid)
	f.Add(valid[:len(valid)-1])
	f.Add(make([]byte, 100))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0})
	f.Add([]byte{1, 0, 0, 0, 0, 0, 0, 0, '\n'})
	f.Add(notEvents)
	f.Add(slices.Concat(notEvents, valid))
	prefix := frameRecord(f, spoolBatch(100, 3))
	f.Fuzz(func(t *testing.T, garbage []byte) {
		dir := t.TempDir()
		writeTestFile(t, filepath.Join(dir, segmentName(1, segmentExt)), garbage)
		writeTestFile(t, filepath.Join(dir, segmentName(2, openExt)), slices.Concat(prefix, garbage))
		dst := &testDest{}
		s, err := OpenSpool(SpoolConfig{Dir: dir, RetryMin: time.Millisecond, RetryMax: time.Millisecond}, dst, nil)
		if err != nil {
			t.Fatalf("OpenSpool: %v", err)
		}
		if err := s.Close(context.Background()); err != nil {
			t.Fatalf("Close: %v", err)
		}
		// The valid records before the garbage ship, after whatever the
		// garbage alone (segment 1) held.
		got := ids(dst.snapshot())
		want := idRange(100, 103)
		i := slices.Index(got, want[0])
		if i < 0 || len(got) < i+len(want) || !slices.Equal(got[i:i+len(want)], want) {
			t.Fatalf("shipped %v, want it to hold %v", got, want)
		}
		if st := s.Status(); st.PendingEvents != 0 || st.Segments != 0 {
			t.Fatalf("after Close: Status() = %+v, want nothing pending", st)
		}
	})
}

func BenchmarkSpoolWrite(b *testing.B) {
	for _, bc := range []struct {
		name string
		err  error
	}{
		{name: "destination up"},
		{name: "destination down", err: errors.New("down")},
	} {
		b.Run(bc.name, func(b *testing.B) {
			const size = 1000
			batch := make([]Event, size)
			for i := range batch {
				batch[i] = ev(i)
				batch[i].Listener = "reverse"
				batch[i].Method = "GET"
				batch[i].Host = "eutils.ncbi.nlm.nih.gov"
				batch[i].PathTemplate = "/entrez/eutils/esearch.fcgi"
				batch[i].UpstreamStatus = 200
				batch[i].OK = true
				batch[i].TotalUS, batch[i].UpstreamUS = 48210, 47005
				batch[i].ConfigVersion, batch[i].PolicyVersion = "sha256:4f2a9c01", "sha256:9e77d3b2"
			}
			w := writerFunc(func(context.Context, []Event) error { return bc.err })
			s, err := OpenSpool(SpoolConfig{Dir: b.TempDir(), MaxBytes: 4 << 30}, w, nil)
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(recordSize(b, batch))
			b.ResetTimer()
			for b.Loop() {
				writeSpool(b, s, batch)
			}
			b.StopTimer()
			b.ReportMetric(float64(b.N*size)/b.Elapsed().Seconds(), "events/s")
			if err := s.Close(context.Background()); err != nil {
				b.Fatal(err)
			}
		})
	}
}

// truncateBy cuts n bytes off the end of the file at path.
func truncateBy(t *testing.T, path string, n int64) {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, st.Size()-n); err != nil {
		t.Fatal(err)
	}
}

func appendBytes(t *testing.T, path string, b []byte) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	writeTestFile(t, path, append(data, b...))
}

func flipByte(t *testing.T, path string, at int) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	data[at] ^= 0x20
	writeTestFile(t, path, data)
}

func setByte(t *testing.T, path string, at int, v byte) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	data[at] = v
	writeTestFile(t, path, data)
}

func writeTestFile(t testing.TB, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestSpoolSyncPoint checks what Sync reports: the sync point moves to the
// end of what was written when Sync began, not before Sync runs, and past
// sealed segments once they are synced too. Cutting the spool back to the
// sync point (what a machine crash may do) keeps every event written
// before the last Sync.
func TestSpoolSyncPoint(t *testing.T) {
	forEachSegmentKind(t, testSpoolSyncPoint)
}

func testSpoolSyncPoint(t *testing.T, ext string, opts spoolOptions) {
	dir := t.TempDir()
	dst := writerFunc(func(context.Context, []Event) error { return errors.New("away") }) // everything stays on disk
	s := openTestSpoolOpts(t, SpoolConfig{Dir: dir, SegmentAge: time.Hour}, dst, nil, opts)
	if st := s.Status(); st.SyncedSegment != 0 || st.SyncedBytes != 0 || !st.LastSync.IsZero() {
		t.Fatalf("before any Sync: %+v", st)
	}
	writeSpool(t, s, []Event{ev(0), ev(1)})
	// size is how much of the segment holds records: the file's size, or
	// for a mapped segment (preallocated) where its records end.
	size := func(seq uint64) int64 {
		data, err := os.ReadFile(filepath.Join(dir, segmentName(seq, ext)))
		if err != nil {
			t.Fatal(err)
		}
		if ext == mappedExt {
			return int64(scanMapped(data).end)
		}
		return int64(len(data))
	}
	before := time.Now()
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	st := s.Status()
	if st.SyncedSegment != 1 || st.SyncedBytes != size(1) || st.LastSync.Before(before) {
		t.Fatalf("after Sync: segment %d, bytes %d (file %d), last %v; want segment 1 synced whole",
			st.SyncedSegment, st.SyncedBytes, size(1), st.LastSync)
	}
	synced := st.SyncedBytes
	writeSpool(t, s, []Event{ev(2)})
	if st := s.Status(); st.SyncedBytes != synced {
		t.Errorf("a write moved the sync point to %d before a Sync", st.SyncedBytes)
	}
	// What a machine crash may leave: the file cut at the sync point.
	if err := s.Close(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	<-s.stopped
	seg := filepath.Join(dir, segmentName(1, segmentExt))
	if err := os.Truncate(seg, synced); err != nil {
		t.Fatal(err)
	}
	got := &memWriter{}
	s2 := openTestSpool(t, SpoolConfig{Dir: dir}, got, nil)
	if err := s2.Close(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	if ids := ids(got.snapshot()); !slices.Equal(ids, []string{ev(0).EventID, ev(1).EventID}) {
		t.Errorf("after the cut the spool shipped %v, want the two events synced before it", ids)
	}
}

// TestSpoolMappedCrashMidCopy recovers what a process killed in the middle
// of copying a batch into a .map segment leaves: the batches before it
// intact, the one being copied partly there (its first bytes, or its last
// ones, as a copy may run either way), and zeros to the preallocated end.
// Every batch copied before ships, the cut one never does (it was not
// acknowledged), a cut that left nothing but zeros is no torn record, and
// the file is cut back to its records.
func TestSpoolMappedCrashMidCopy(t *testing.T) {
	done := bytes.Join([][]byte{frameRecord(t, spoolBatch(0, 2)), frameRecord(t, spoolBatch(2, 3))}, nil)
	cut := frameRecord(t, spoolBatch(5, 2))
	const prealloc = 16 << 10
	for _, from := range []string{"front", "back"} {
		for k := 0; k <= len(cut); k += max(1, len(cut)/23) {
			t.Run(fmt.Sprintf("%s/%d", from, k), func(t *testing.T) {
				img := make([]byte, prealloc)
				copy(img, done)
				part := img[len(done) : len(done)+len(cut)]
				if from == "front" {
					copy(part[:k], cut[:k])
				} else {
					copy(part[len(cut)-k:], cut[len(cut)-k:])
				}
				dir := t.TempDir()
				path := filepath.Join(dir, segmentName(3, mappedExt))
				writeTestFile(t, path, img)
				got := &memWriter{}
				s := openTestSpool(t, SpoolConfig{Dir: dir}, got, nil)
				if err := s.Close(testCtx(t)); err != nil {
					t.Fatal(err)
				}
				want := idRange(0, 5)
				if k == len(cut) {
					want = idRange(0, 7) // the copy had finished
				}
				if ids := ids(got.snapshot()); !slices.Equal(ids, want) {
					t.Errorf("shipped %v, want %v", ids, want)
				}
				wantTorn := uint64(0)
				if k > 0 && k < len(cut) && !allZero(part) {
					wantTorn = 1
				}
				if st := s.Status(); st.TornRecords != wantTorn || st.CorruptSegments != 0 {
					t.Errorf("torn %d, corrupt %d; want %d torn, nothing corrupt", st.TornRecords, st.CorruptSegments, wantTorn)
				}
			})
		}
	}
}

// TestSpoolMappedSegmentOnDisk checks a .map segment as it is while
// written (preallocated, its records then zeros) and once sealed (cut to
// its records, a .seg file like any other).
func TestSpoolMappedSegmentOnDisk(t *testing.T) {
	dir := t.TempDir()
	dst := &testDest{err: errors.New("down")}
	s := openTestSpool(t, SpoolConfig{Dir: dir, SegmentAge: time.Hour, SegmentBytes: 64 << 10}, dst, nil)
	writeSpool(t, s, spoolBatch(0, 3))
	writeSpool(t, s, spoolBatch(3, 1))
	want := bytes.Join([][]byte{frameRecord(t, spoolBatch(0, 3)), frameRecord(t, spoolBatch(3, 1))}, nil)
	data, err := os.ReadFile(filepath.Join(dir, segmentName(1, mappedExt)))
	if err != nil {
		t.Fatal(err)
	}
	if len(data) != 64<<10 || !bytes.Equal(data[:len(want)], want) || !allZero(data[len(want):]) {
		t.Fatalf(".map segment of %d bytes, want 64 KiB: the two records, then zeros", len(data))
	}
	if st := s.Status(); st.Bytes != int64(len(want)) {
		t.Errorf("Status().Bytes = %d, want the records' %d", st.Bytes, len(want))
	}
	s.wmu.Lock()
	s.mu.Lock()
	s.seal()
	s.mu.Unlock()
	s.wmu.Unlock()
	sealed, err := os.ReadFile(filepath.Join(dir, segmentName(1, segmentExt)))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(sealed, want) {
		t.Errorf("sealed segment holds %d bytes, want its %d bytes of records", len(sealed), len(want))
	}
	// A batch larger than SegmentBytes gets a segment of its own, mapped
	// large enough.
	big := spoolBatch(10, 300)
	writeSpool(t, s, big)
	if st := s.Status(); st.PendingEvents != 4+300 {
		t.Errorf("pending %d events, want %d", st.PendingEvents, 4+300)
	}
}

// TestQueueWritesToMappedSpool records from many goroutines through a
// Queue into a Spool with memory-mapped segments: every event is in the
// spool when its Record returns, and ships once.
func TestQueueWritesToMappedSpool(t *testing.T) {
	const producers, perProducer = 8, 2000
	dir := t.TempDir()
	got := &memWriter{}
	gate := make(chan struct{})
	dst := writerFunc(func(ctx context.Context, events []Event) error {
		select {
		case <-gate: // nothing ships until every Record returned
		case <-ctx.Done():
			return ctx.Err()
		}
		return got.WriteEvents(ctx, events)
	})
	s := openTestSpool(t, SpoolConfig{Dir: dir, SegmentBytes: 256 << 10}, dst, nil)
	// A loaded machine may starve the writer goroutine: no call is to be
	// answered before its event is written, however long that takes.
	q, err := NewQueue(s, QueueConfig{MaxWait: time.Minute}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for p := range producers {
		wg.Go(func() {
			for i := range perProducer {
				e := spoolEv(p*perProducer + i)
				if !q.Record(e) {
					t.Errorf("Record dropped event %s", e.EventID)
					return
				}
			}
		})
	}
	wg.Wait()
	if st := s.Status(); st.PendingEvents != producers*perProducer {
		t.Errorf("spool holds %d events after every Record returned, want %d", st.PendingEvents, producers*perProducer)
	}
	closeQueue(t, q)
	qs := q.Stats()
	if qs.Written != producers*perProducer || qs.WaitTimeouts != 0 {
		t.Errorf("queue stats %+v: want every event written before its Record returned", qs)
	}
	close(gate)
	if err := s.Close(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	shipped := ids(got.snapshot())
	slices.Sort(shipped)
	want := make([]string, 0, producers*perProducer)
	for i := range producers * perProducer {
		want = append(want, spoolEv(i).EventID)
	}
	slices.Sort(want)
	if !slices.Equal(shipped, want) {
		t.Errorf("shipped %d events, want each of the %d once", len(shipped), len(want))
	}
}

// TestSpoolMappedSegmentTruncatedUnderIt truncates the open .map segment
// behind the spool's back, as a careless person or another program might:
// the next write faults in the mapping, which must come back as an error
// (the process survives), and the write after it goes to a fresh segment.
func TestSpoolMappedSegmentTruncatedUnderIt(t *testing.T) {
	dir := t.TempDir()
	logs := &testutil.SyncBuffer{}
	s := openTestSpool(t, SpoolConfig{Dir: dir, SegmentAge: time.Hour}, &testDest{err: errors.New("down")}, logs)
	writeSpool(t, s, spoolBatch(0, 1))
	if err := os.Truncate(filepath.Join(dir, segmentName(1, mappedExt)), 0); err != nil {
		t.Fatal(err)
	}
	// Past the first page: the first one may still be mapped in.
	err := s.WriteEvents(t.Context(), spoolBatch(1, 20))
	if err == nil || !strings.Contains(err.Error(), "fault") {
		t.Fatalf("write into a truncated mapping = %v, want a fault error", err)
	}
	writeSpool(t, s, spoolBatch(21, 1))
	if _, err := os.Stat(filepath.Join(dir, segmentName(2, mappedExt))); err != nil {
		t.Errorf("the write after the fault did not start a fresh segment: %v", err)
	}
}

// TestSpoolShipsAsWritten checks that what a spool ships, read back from
// its segment files, is what was written, event for event (compared as the
// JSON both would give), even where the caller changed its memory after
// the write, across many segments.
func TestSpoolShipsAsWritten(t *testing.T) {
	got := &memWriter{}
	gate := make(chan struct{})
	dst := writerFunc(func(ctx context.Context, events []Event) error {
		select {
		case <-gate:
		case <-ctx.Done():
			return ctx.Err()
		}
		return got.WriteEvents(ctx, events)
	})
	// Segments of about 8 KiB: the events fill many.
	s := openTestSpool(t, SpoolConfig{Dir: t.TempDir(), SegmentBytes: 8 << 10, SegmentAge: time.Hour}, dst, nil)
	var want []Event
	for i := range 200 {
		e := spoolEv(i)
		e.ViolationPaths = []string{"/a", fmt.Sprintf("/b/%d", i)}
		e.DryRunViolations = []string{"would deny"}
		e.Detail = strings.Repeat("d", i)
		w := e
		w.ViolationPaths = slices.Clone(e.ViolationPaths)
		want = append(want, w)
		writeSpool(t, s, []Event{e})
		e.ViolationPaths[0] = "/changed after the write" // the caller reuses its memory
	}
	close(gate)
	if err := s.Close(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	shipped := got.snapshot()
	if len(shipped) != len(want) {
		t.Fatalf("shipped %d events, want %d", len(shipped), len(want))
	}
	for i := range want {
		w, _ := json.Marshal(want[i])
		g, _ := json.Marshal(shipped[i])
		if !bytes.Equal(w, g) {
			t.Fatalf("event %d shipped as\n%s\nwant\n%s", i, g, w)
		}
	}
	if st := s.Status(); st.ShippedSegments < 5 {
		t.Errorf("the events shipped in %d segments, want them spread over several", st.ShippedSegments)
	}
}

// The spool says at debug level how it fsyncs (docs/events.md): through
// the kernel's asynchronous interface on Linux amd64 and arm64 where the
// system allows it, blocking with the reason otherwise; and its Syncs
// succeed either way.
func TestSpoolLogsFsyncMode(t *testing.T) {
	var buf testutil.SyncBuffer
	s := openTestSpool(t, SpoolConfig{Dir: t.TempDir(), SegmentAge: time.Hour}, &testDest{}, &buf)
	writeSpool(t, s, []Event{ev(0)})
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	log := buf.String()
	line := ""
	for l := range strings.Lines(log) {
		if strings.Contains(l, `msg="sink: spool fsyncs"`) {
			line = l
		}
	}
	if line == "" {
		t.Fatalf("no %q line in the log:\n%s", "sink: spool fsyncs", log)
	}
	kernel := runtime.GOOS == "linux" && (runtime.GOARCH == "amd64" || runtime.GOARCH == "arm64")
	switch {
	case strings.Contains(line, "mode=kernel"):
		if !kernel {
			t.Errorf("kernel mode on %s/%s: %s", runtime.GOOS, runtime.GOARCH, line)
		}
	case strings.Contains(line, `mode="blocking: `):
		if kernel {
			t.Logf("the kernel's asynchronous fsync is refused here: %s", line)
		}
	default:
		t.Errorf("the line names no mode: %s", line)
	}
}

// The shipper cuts each record's payload from a string copy of the
// segment made a chunk of records at a time (shipText): every payload
// reads as its bytes, whatever the records' sizes and the damaged
// records between them, and a run of small records (lone calls' events)
// shares one copy per chunk rather than one each or one of the whole
// segment.
func TestShipTextPieces(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var data []byte
	var good []recordSpan
	add := func(n int, damaged bool) {
		off := len(data)
		data = append(data, make([]byte, recordHeaderSize)...)
		for range n {
			data = append(data, byte('a'+rng.IntN(26)))
		}
		if !damaged { // a damaged record is in the bytes, not among the good
			good = append(good, recordSpan{off: off, end: len(data)})
		}
	}
	// First a run of 500 lone calls' records, then records of every size.
	for i := range 500 {
		add(250+rng.IntN(100), i%50 == 7)
	}
	smallRun, smallBytes := len(good), len(data)
	sizes := []int{300, 20 << 10, 300, 1, 64 << 10, shipTextChunk - recordHeaderSize, shipTextChunk, 300}
	for i := range 300 {
		add(sizes[i%len(sizes)], i%11 == 5)
	}
	var text shipText
	copies, smallCopies := 0, 0
	for i, r := range good {
		from, n := text.from, len(text.s)
		got := text.payload(data, good, i)
		if text.from != from || len(text.s) != n {
			copies++
			if i < smallRun {
				smallCopies++
			}
			if len(text.s) > shipTextChunk && r.end-r.off <= shipTextChunk {
				t.Fatalf("record %d: a copy of %d bytes for a record of %d", i, len(text.s), r.end-r.off)
			}
		}
		if got != string(r.payload(data)) {
			t.Fatalf("record %d: payload differs from its bytes", i)
		}
	}
	if want := smallBytes/shipTextChunk + 1; smallCopies < want || smallCopies > 2*want {
		t.Errorf("%d copies for a run of %d records of %d bytes, want %d to %d", smallCopies, smallRun, smallBytes, want, 2*want)
	}
	if copies >= len(good) {
		t.Errorf("%d copies for %d records", copies, len(good))
	}
}
