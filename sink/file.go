package sink

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"sync"

	"github.com/toolgate/toolgate/internal/section"
	"github.com/toolgate/toolgate/sink/internal/fsync"
)

// File defaults, applied by FileConfig.Validate to zero fields.
const (
	// DefaultFilePath is the default NDJSON file, relative to the working
	// directory.
	DefaultFilePath = "toolgate-events.ndjson"
	// DefaultMaxBytes is the default size at which the file rotates: 100 MiB.
	DefaultMaxBytes = 100 << 20
	// DefaultMaxBackups is the default number of rotated files kept.
	DefaultMaxBackups = 5
)

// Permissions of what OpenFile creates: events carry session ids, so only
// the owner may read them.
const (
	fileMode = 0o600
	dirMode  = 0o700
)

// maxKeptBuffer is the largest encoding buffer a File keeps between batches.
const maxKeptBuffer = 4 << 20

// FileConfig configures the NDJSON file destination. The zero value is
// valid: Validate replaces each zero field with its default.
type FileConfig struct {
	// Path is the file events are appended to. Default DefaultFilePath
	// ("toolgate-events.ndjson").
	Path string `yaml:"path"`
	// MaxBytes is the size the file may reach: a batch that would take it
	// beyond rotates it first. Default DefaultMaxBytes (100 MiB).
	MaxBytes int64 `yaml:"max_bytes"`
	// MaxBackups is how many rotated files are kept, as Path.1 (newest) to
	// Path.N (oldest); older ones are deleted. Default DefaultMaxBackups (5).
	MaxBackups int `yaml:"max_backups"`
	// Journal puts the spool (events.spool) in front of the file as its
	// journal: each call's event is copied into the spool's memory-mapped
	// segment before the call is answered, and appended to the file with
	// the rest of its segment once the segment is sealed
	// (events.spool.segment_age, 1s by default). Lone calls cost much less
	// CPU than a write(2) each; events reach the file up to segment_age
	// later. nil is unset: the configuration's events section then turns
	// it on unless events go to ClickHouse. See OpenJournaledFile.
	Journal *bool `yaml:"journal"`
}

// Journaled reports whether Journal is set and true.
func (c *FileConfig) Journaled() bool { return c.Journal != nil && *c.Journal }

// Validate applies the defaults to zero fields and rejects negative sizes
// and counts. Errors name the field as "file.<field>".
func (c *FileConfig) Validate() error {
	if c.MaxBytes < 0 {
		return section.Errorf("file.max_bytes", "must not be negative, got %d", c.MaxBytes)
	}
	if c.MaxBackups < 0 {
		return section.Errorf("file.max_backups", "must not be negative, got %d", c.MaxBackups)
	}
	if c.Path == "" {
		c.Path = DefaultFilePath
	}
	if c.MaxBytes == 0 {
		c.MaxBytes = DefaultMaxBytes
	}
	if c.MaxBackups == 0 {
		c.MaxBackups = DefaultMaxBackups
	}
	return nil
}

// File is the NDJSON file destination: one JSON object per line, appended,
// and rotated by size. Each batch is encoded first and then written with a
// single write, so a batch is stored whole or (after a failed write is
// rolled back) not at all: once WriteEvents returned nil the batch is in
// the page cache, and the death of the process cannot take it. File does
// not sync after each batch; Sync (called by a Queue every SyncInterval),
// a rotation and Close do.
// A File is safe for concurrent use.
type File struct {
	cfg FileConfig

	mu     sync.Mutex
	f      *os.File // nil after a failed rotation; reopened by the next write
	size   int64
	enc    *eventEncoder
	closed bool
	// fsync runs Sync's fsyncs without a thread waiting in them; closed
	// by Close.
	fsync *fsync.Syncer
	// journaled: the File is a journal's destination (OpenJournaledFile).
	// Each batch is then fsynced before WriteEvents returns, since the
	// journal deletes what it shipped; and the first batch's events up to
	// resumeAfter, the last event already in the file, are not written
	// again (the journal ships a batch again when the process died
	// between the write and the deletion).
	journaled   bool
	resumeAfter string
	skipped     uint64 // events not written again (tests read it)
	// fault, when set, is called before each write and its error
	// returned as the write's: tests inject a full disk (ENOSPC) with it.
	fault func() error
}

var _ Writer = (*File)(nil)

// OpenFile opens cfg.Path for appending, creating it with mode 0600 if it is
// missing, and its parent directory with mode 0700. An existing file keeps
// its mode. cfg is validated (defaults applied) on a copy.
func OpenFile(cfg FileConfig) (*File, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	fl := &File{cfg: cfg, enc: newEventEncoder()}
	if err := os.MkdirAll(filepath.Dir(cfg.Path), dirMode); err != nil {
		return nil, fmt.Errorf("sink: open %s: %w", cfg.Path, err)
	}
	if err := fl.open(); err != nil {
		return nil, err
	}
	fl.fsync = fsync.New()
	return fl, nil
}

// Path returns the path of the file being written.
func (fl *File) Path() string { return fl.cfg.Path }

// open opens the current file for appending and learns its size. A file
// that does not end with a line break ends in a write that a killed
// process left half done, never acknowledged: its torn line is cut off,
// so that the next batch starts on a line of its own.
func (fl *File) open() error {
	f, err := os.OpenFile(fl.cfg.Path, os.O_RDWR|os.O_CREATE|os.O_APPEND, fileMode)
	if err != nil {
		return fmt.Errorf("sink: open %s: %w", fl.cfg.Path, err)
	}
	size, err := cutTornLine(f)
	if err != nil {
		f.Close()
		return fmt.Errorf("sink: open %s: %w", fl.cfg.Path, err)
	}
	fl.f, fl.size = f, size
	return nil
}

// cutTornLine truncates f after its last line break (to nothing if it has
// none) and returns its size then.
func cutTornLine(f *os.File) (int64, error) {
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	end := st.Size()
	i, err := lastLineBreak(f, 0, end)
	if err != nil {
		return 0, err
	}
	if keep := i + 1; keep < end {
		return keep, f.Truncate(keep)
	}
	return end, nil
}

// lastLineBreak returns the offset of the last line break in f between
// from and end, or -1 if there is none; it reads backwards from end, 4 KiB
// at a time.
func lastLineBreak(f *os.File, from, end int64) (int64, error) {
	buf := make([]byte, 4096)
	for pos := end; pos > from; {
		n := min(int64(len(buf)), pos-from)
		pos -= n
		if _, err := f.ReadAt(buf[:n], pos); err != nil {
			return 0, err
		}
		if i := bytes.LastIndexByte(buf[:n], '\n'); i >= 0 {
			return pos + int64(i), nil
		}
	}
	return -1, nil
}

// WriteEvents appends events, one JSON object per line, in one write. When
// the file is not empty and the batch would take it beyond MaxBytes, the
// file is rotated first; a batch larger than MaxBytes on its own is still
// written whole, and the file rotates before the next one. If any event
// cannot be encoded nothing is written.
func (fl *File) WriteEvents(ctx context.Context, events []Event) error {
	return fl.writeBatch(ctx, eventBatch(events))
}

// writeLines is WriteEvents for events already in the file's form: a
// journal's segment, its records' lines rewritten by appendFullLine. They
// are written as they stand.
func (fl *File) writeLines(ctx context.Context, lines *fileLines) error {
	return fl.writeBatch(ctx, lines)
}

// fileBatch is what WriteEvents and writeLines write: events, or the
// lines of events.
type fileBatch interface {
	len() int
	// eventID is the event_id of item i.
	eventID(i int) string
	// chunkEnd is where the chunk of about journalChunk bytes that starts
	// at item i ends (after i).
	chunkEnd(i int) int
	// bytes returns the file's bytes of items [i, j), encoded into enc's
	// buffer if need be.
	bytes(enc *eventEncoder, i, j int) ([]byte, error)
}

// writeBatch writes b as WriteEvents says.
func (fl *File) writeBatch(ctx context.Context, b fileBatch) error {
	n := b.len()
	if n == 0 {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	fl.mu.Lock()
	defer fl.mu.Unlock()
	if fl.closed {
		return ErrClosed
	}
	from := 0
	if fl.resumeAfter != "" {
		// The resume point stays set until write moves or clears it: an
		// attempt that fails before its first chunk is written leaves it
		// for the next attempt, which must skip the same events again.
		from = -1
		for i := range n {
			if b.eventID(i) == fl.resumeAfter {
				from = i + 1
				break
			}
		}
		if from >= 0 {
			fl.skipped += uint64(from)
		} else {
			from, fl.resumeAfter = 0, ""
		}
	}
	if from < n {
		if err := fl.write(b, from); err != nil {
			return err
		}
	}
	if fl.journaled && fl.f != nil {
		if err := fl.fsync.Sync(fl.f); err != nil {
			// The batch is in the file; a retry of it only syncs.
			fl.resumeAfter = b.eventID(n - 1)
			return fmt.Errorf("sink: sync %s: %w", fl.cfg.Path, err)
		}
	}
	fl.resumeAfter = ""
	return nil
}

// write encodes and appends b's items from from on, rotating first if
// needed. The caller holds mu. A File behind a journal gets whole
// segments, thousands of events: it writes them in chunks of about
// journalChunk bytes, so that its encoding buffer stays one it keeps; if
// a chunk fails after others were written, the retry of the batch resumes
// after them.
func (fl *File) write(b fileBatch, from int) error {
	if !fl.journaled {
		return fl.writeChunk(b, from, b.len())
	}
	for i := from; i < b.len(); {
		j := b.chunkEnd(i)
		if err := fl.writeChunk(b, i, j); err != nil {
			return err
		}
		fl.resumeAfter = b.eventID(j - 1) // cleared below once all are written
		i = j
	}
	fl.resumeAfter = ""
	return nil
}

// journalChunk is about how many bytes of a journal's segment a File
// encodes and writes at once, and fileEventBytesGuess about what one event
// takes in the file.
const (
	journalChunk        = 1 << 20
	fileEventBytesGuess = 720
)

// writeChunk appends b's items [i, j) in one write. The caller holds mu.
func (fl *File) writeChunk(b fileBatch, i, j int) error {
	defer fl.enc.reset()
	data, err := b.bytes(fl.enc, i, j)
	if err != nil {
		return err
	}
	if fl.f != nil && fl.size > 0 && fl.size+int64(len(data)) > fl.cfg.MaxBytes {
		if err := fl.rotate(); err != nil {
			return err
		}
	}
	if fl.f == nil {
		if err := fl.open(); err != nil {
			return err
		}
	}
	n, err := fl.write1(data)
	if err != nil {
		fl.rollback(n)
		return fmt.Errorf("sink: write %s: %w", fl.cfg.Path, err)
	}
	fl.size += int64(n)
	return nil
}

// eventBatch is WriteEvents' batch.
type eventBatch []Event

func (b eventBatch) len() int             { return len(b) }
func (b eventBatch) eventID(i int) string { return b[i].EventID }
func (b eventBatch) chunkEnd(i int) int {
	return min(len(b), i+max(1, journalChunk/fileEventBytesGuess))
}

func (b eventBatch) bytes(enc *eventEncoder, i, j int) ([]byte, error) {
	for k := i; k < j; k++ {
		if err := enc.encode(&b[k]); err != nil {
			return nil, fmt.Errorf("sink: encode event %d of %d: %w", k+1, len(b), err)
		}
	}
	return enc.buf, nil
}

// fileLines are events in the file's form: lines, each ending in a line
// break, the first of them at the start of buf.
type fileLines struct {
	buf   []byte
	ends  []int    // where each line ends in buf (after its line break)
	times timeMemo // appendRecord's, for appendFullLine
}

func (l *fileLines) len() int { return len(l.ends) }

// start is where line i starts in buf.
func (l *fileLines) start(i int) int {
	if i == 0 {
		return 0
	}
	return l.ends[i-1]
}

// line is line i, with its line break.
func (l *fileLines) line(i int) []byte { return l.buf[l.start(i):l.ends[i]] }

// eventID reads the event_id the line starts with, as appendEvent writes
// it (the line's first field).
func (l *fileLines) eventID(i int) string {
	d := eventDecoder{b: l.line(i)}
	var id string
	if d.next('{') {
		if key, ok := d.key(); ok && string(key) == "event_id" {
			d.str(&id)
		}
	}
	return id
}

func (l *fileLines) chunkEnd(i int) int {
	start := l.start(i)
	j := i + 1
	for j < len(l.ends) && l.ends[j]-start <= journalChunk {
		j++
	}
	return j
}

func (l *fileLines) bytes(_ *eventEncoder, i, j int) ([]byte, error) {
	return l.buf[l.start(i):l.ends[j-1]], nil
}

// reset empties l, keeping its memory.
func (l *fileLines) reset() {
	l.buf, l.ends = l.buf[:0], l.ends[:0]
}

// truncate drops the lines from line n on.
func (l *fileLines) truncate(n int) {
	l.buf, l.ends = l.buf[:l.start(n)], l.ends[:n]
}

// write1 writes buf to the file, or fails as the test hook says.
func (fl *File) write1(buf []byte) (int, error) {
	if fl.fault != nil {
		if err := fl.fault(); err != nil {
			return 0, err
		}
	}
	return fl.f.Write(buf)
}

// rollback removes the n bytes of a failed write, so that no half line is
// left for the next batch to continue. If that fails too, the file is
// rotated before the next write and the damage stays in a backup.
func (fl *File) rollback(n int) {
	if n == 0 {
		return
	}
	if err := fl.f.Truncate(fl.size); err != nil {
		fl.size = fl.cfg.MaxBytes + 1
	}
}

// eventEncoder is the one event encoding of the package: one JSON object
// per line, as encoding/json writes it with HTML characters left as they
// are (appendEvent). File writes every field; a Spool's records leave
// fields at their zero value out (omitZero), which reads back into the
// same Event and keeps its pages few.
type eventEncoder struct {
	buf      []byte
	omitZero bool
}

func newEventEncoder() *eventEncoder {
	return &eventEncoder{}
}

// encode appends ev and its line break to the buffer. When ev cannot be
// encoded nothing is appended.
func (e *eventEncoder) encode(ev *Event) error {
	b, err := appendEvent(e.buf, ev, e.omitZero)
	if err != nil {
		return fmt.Errorf("time: %w", err)
	}
	e.buf = b
	return nil
}

// reset empties the buffer, and lets it go when it grew beyond
// maxKeptBuffer.
func (e *eventEncoder) reset() {
	if cap(e.buf) > maxKeptBuffer {
		e.buf = nil
		return
	}
	e.buf = e.buf[:0]
}

// backup returns the name of rotated file number i.
func (fl *File) backup(i int) string {
	return fl.cfg.Path + "." + strconv.Itoa(i)
}

// rotate syncs and closes the current file, shifts Path.i to Path.i+1, deleting the
// oldest beyond MaxBackups, moves Path to Path.1 and opens a new Path.
func (fl *File) rotate() error {
	cerr := errors.Join(fl.f.Sync(), fl.f.Close())
	fl.f = nil
	if cerr != nil {
		return fmt.Errorf("sink: rotate %s: %w", fl.cfg.Path, cerr)
	}
	// Backups beyond MaxBackups, left by a larger setting, go first.
	for i := fl.cfg.MaxBackups; ; i++ {
		if err := os.Remove(fl.backup(i)); err != nil {
			if !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("sink: rotate %s: %w", fl.cfg.Path, err)
			}
			if i > fl.cfg.MaxBackups {
				break
			}
		}
	}
	for i := fl.cfg.MaxBackups - 1; i >= 1; i-- {
		if err := os.Rename(fl.backup(i), fl.backup(i+1)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("sink: rotate %s: %w", fl.cfg.Path, err)
		}
	}
	if err := os.Rename(fl.cfg.Path, fl.backup(1)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("sink: rotate %s: %w", fl.cfg.Path, err)
	}
	return fl.open()
}

// Sync fsyncs what was written to the current file. It does not hold up
// WriteEvents, which may append meanwhile; a file rotated away was synced
// by the rotation. A Queue in front of the File calls it every
// QueueConfig.SyncInterval.
func (fl *File) Sync() error {
	fl.mu.Lock()
	f := fl.f
	fl.mu.Unlock()
	if f == nil {
		return nil
	}
	if err := fl.fsync.Sync(f); err != nil && !errors.Is(err, os.ErrClosed) {
		return fmt.Errorf("sink: sync %s: %w", fl.cfg.Path, err)
	}
	return nil
}

// AppendsLocally marks File as an Appender.
func (fl *File) AppendsLocally() {}

var (
	_ Syncer   = (*File)(nil)
	_ Appender = (*File)(nil)
)

// Close syncs and closes the file. WriteEvents then returns ErrClosed;
// closing again returns nil.
func (fl *File) Close() error {
	fl.mu.Lock()
	defer fl.mu.Unlock()
	if fl.closed {
		return nil
	}
	fl.closed = true
	defer fl.fsync.Close()
	if fl.f == nil {
		return nil
	}
	err := errors.Join(fl.f.Sync(), fl.f.Close())
	fl.f = nil
	if err != nil {
		return fmt.Errorf("sink: close %s: %w", fl.cfg.Path, err)
	}
	return nil
}
