package sink

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/toolgate/toolgate/sink/internal/fsync"
)

// The spool's on-disk format.
//
// A spool directory holds segment files named by a sequence number, zero
// padded to 20 digits so that names sort in sequence order:
//
//	00000000000000000007.seg   sealed: complete, shippable, never appended to
//	00000000000000000008.map   the segment being appended to (at most one per process), through a memory mapping
//	00000000000000000008.open  the same, appended to with write(2) where the file system cannot map it
//	corrupt/00000000000000000005.seg   a damaged segment, as it was found
//	LOCK                       held (flock) by the process using the spool, which writes its pid there
//
// A segment is a sequence of records, each
//
//	[length uint32 LE][crc32c uint32 LE][payload: length bytes]
//
// where the checksum (Castagnoli) covers the payload, and the payload is
// events as File writes them: one JSON object per line, each line ending
// in "\n". One WriteEvents call appends one record, or several when its
// batch encodes to more than recordSplitBytes; all of them with a single
// write and a single fsync. Files end in ".tmp" while they are being
// written by a repair; such leftovers are removed when the spool opens.
//
// A .map segment is preallocated (SegmentBytes, or more for a larger
// batch) and records are copied into its mapping one batch at a time,
// under a lock, so that its records end at the first one that does not
// check (see scanMapped): zeros (never written) or the one batch a crash
// cut short. Sealing cuts the file to its records, so a .seg file reads
// the same whichever way it was written.
const (
	segmentExt = ".seg"
	openExt    = ".open"
	mappedExt  = ".map"
	tmpExt     = ".tmp"
	corruptDir = "corrupt"
	lockName   = "LOCK"
	seqDigits  = 20

	// recordHeaderSize is the size of a record's length and checksum.
	recordHeaderSize = 8
	// recordSplitBytes is the payload size past which a batch continues
	// in a new record.
	recordSplitBytes = 1 << 20
	// maxRecordBytes is the largest payload a record may have; a longer
	// length field marks a damaged record. An event that alone encodes
	// beyond it cannot be spooled.
	maxRecordBytes = 64 << 20

	spoolFileMode = 0o600
	spoolDirMode  = 0o700
)

var crc32c = crc32.MakeTable(crc32.Castagnoli)

// segmentName returns the file name of segment seq with extension ext.
func segmentName(seq uint64, ext string) string {
	return fmt.Sprintf("%0*d%s", seqDigits, seq, ext)
}

// parseSegmentName returns the sequence number and extension of a segment
// file name, and false for any other name.
func parseSegmentName(name string) (seq uint64, ext string, ok bool) {
	if len(name) <= seqDigits {
		return 0, "", false
	}
	ext = name[seqDigits:]
	if ext != segmentExt && ext != openExt && ext != mappedExt {
		return 0, "", false
	}
	seq, ok = parseSeq(name)
	return seq, ext, ok
}

// parseSeq parses the sequence number a name starts with.
func parseSeq(name string) (uint64, bool) {
	if len(name) < seqDigits {
		return 0, false
	}
	digits := name[:seqDigits]
	if strings.Trim(digits, "0123456789") != "" {
		return 0, false
	}
	seq, err := strconv.ParseUint(digits, 10, 64)
	return seq, err == nil
}

// recordSpan locates one record in a segment's bytes: the header starts at
// off, the payload ends at end.
type recordSpan struct {
	off, end int
}

func (r recordSpan) payload(data []byte) []byte {
	return data[r.off+recordHeaderSize : r.end]
}

// segmentScan is what scanSegment finds in a segment's bytes.
type segmentScan struct {
	// good are the complete records whose checksum matches, in order.
	good []recordSpan
	// bad counts complete records whose checksum does not match, plus one
	// for a header whose length is impossible (zero, or beyond
	// maxRecordBytes), after which nothing more can be read.
	bad int
	// torn is true when the segment ends in a torn record: a header or a
	// payload cut short by the end of the file, or zero bytes to the end
	// (blocks the file system allocated but a crash left unwritten). It
	// is false whenever bad is not zero: a damaged length may look torn.
	torn bool
	// end is where the torn tail starts, or the file's size.
	end int
}

// scanSegment reads records from data until its end or until a header can
// no longer be trusted. A complete record with a bad checksum is skipped,
// its length field taken on trust, so that the good records after it are
// still found; if the length was the damaged part the records after it
// read as bad or torn, and the checksums keep them out of good. It never
// panics, whatever data holds.
func scanSegment(data []byte) segmentScan {
	var sc segmentScan
	off := 0
	for off < len(data) {
		rest := data[off:]
		if allZero(rest) || len(rest) < recordHeaderSize {
			sc.torn = true
			break
		}
		n := binary.LittleEndian.Uint32(rest[0:4])
		sum := binary.LittleEndian.Uint32(rest[4:8])
		if n == 0 || n > maxRecordBytes {
			sc.bad++
			break
		}
		if uint64(len(rest)) < recordHeaderSize+uint64(n) {
			sc.torn = true
			break
		}
		end := off + recordHeaderSize + int(n)
		if crc32.Checksum(data[off+recordHeaderSize:end], crc32c) != sum {
			sc.bad++
		} else {
			sc.good = append(sc.good, recordSpan{off: off, end: end})
		}
		off = end
	}
	sc.end = off
	if sc.bad > 0 {
		sc.torn = false
	}
	return sc
}

// scanMapped reads the records of a .map segment. Its batches were copied
// one at a time, in order, so the first record that does not check (a
// zero or impossible length, a payload past the end, a checksum that
// fails) is where nothing was written yet, or where the one copy a crash
// cut short begins: nothing from there on was acknowledged, and the scan
// ends there. torn reports whether anything but zeros lies past the end;
// bad is always zero.
func scanMapped(data []byte) segmentScan {
	var sc segmentScan
	off := 0
	for len(data)-off >= recordHeaderSize {
		n := binary.LittleEndian.Uint32(data[off : off+4])
		sum := binary.LittleEndian.Uint32(data[off+4 : off+8])
		if n == 0 || n > maxRecordBytes || uint64(len(data)-off-recordHeaderSize) < uint64(n) {
			break
		}
		end := off + recordHeaderSize + int(n)
		if crc32.Checksum(data[off+recordHeaderSize:end], crc32c) != sum {
			break
		}
		sc.good = append(sc.good, recordSpan{off: off, end: end})
		off = end
	}
	sc.end = off
	sc.torn = !allZero(data[off:])
	return sc
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// beginRecord appends a record header to buf, to be filled by endRecord,
// and returns buf and the header's offset.
func beginRecord(buf []byte) ([]byte, int) {
	var hdr [recordHeaderSize]byte
	return append(buf, hdr[:]...), len(buf)
}

// endRecord fills the header at off for the payload written after it.
func endRecord(buf []byte, off int) {
	b := buf[off:]
	payload := b[recordHeaderSize:]
	binary.LittleEndian.PutUint32(b[0:4], uint32(len(payload)))
	binary.LittleEndian.PutUint32(b[4:8], crc32.Checksum(payload, crc32c))
}

// errBadPayload marks a record whose checksum matches but whose payload is
// not events as this package writes them.
var errBadPayload = errors.New("not NDJSON events")

// countEvents returns the number of events in a record's payload without
// decoding them: the encoder ends each with a line break and JSON escapes
// line breaks inside strings.
func countEvents(payload []byte) int {
	return bytes.Count(payload, []byte{'\n'})
}

// decodeRecord appends the events of a record's payload to events. The
// payload must be what the encoder writes: lines, each ending in "\n" and
// holding one JSON object that decodes into an Event. On error events is
// returned as it was given. text is "" or holds the same bytes as payload,
// for the events' strings to be cut from (see decodeEvent).
func decodeRecord(payload []byte, text string, events []Event) ([]Event, error) {
	n := len(events)
	if len(payload) == 0 || payload[len(payload)-1] != '\n' {
		return events, errBadPayload
	}
	off := 0
	for line := range bytes.Lines(payload) {
		if line[0] != '{' {
			return events[:n], errBadPayload
		}
		lineText := ""
		if text != "" {
			lineText = text[off : off+len(line)]
		}
		off += len(line)
		events = append(events, Event{})
		if err := decodeLine(line, lineText, &events[len(events)-1]); err != nil {
			return events[:n], err
		}
	}
	return events, nil
}

// decodeLine decodes one line of a record into e, the zero Event: by
// decodeEvent, else by encoding/json, whose reading is the one that counts.
func decodeLine(line []byte, text string, e *Event) error {
	if decodeEvent(line, text, e) {
		return nil
	}
	*e = Event{} // what the fast path set: encoding/json starts afresh
	if err := json.Unmarshal(line, e); err != nil {
		return fmt.Errorf("%w: %w", errBadPayload, err)
	}
	return nil
}

// firstEventTime returns the time of the first event in a record's
// payload, or the zero time when it cannot be read.
func firstEventTime(payload []byte) time.Time {
	line, _, _ := bytes.Cut(payload, []byte{'\n'})
	var e struct {
		Time time.Time `json:"time"`
	}
	if json.Unmarshal(line, &e) != nil {
		return time.Time{}
	}
	return e.Time
}

// writeFileSync writes data to path through path+".tmp": written, synced,
// renamed over path, and the directory synced. A crash leaves either the
// old path or the new one, never a mix; at worst a stale .tmp file.
func writeFileSync(path string, data []byte) error {
	tmp := path + tmpExt
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, spoolFileMode)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	return syncDir(filepath.Dir(path))
}

// syncDir makes the directory's entries (created, renamed, removed files)
// durable.
func syncDir(dir string) error {
	return syncDirWith(nil, dir)
}

// syncDirWith is syncDir with the fsync through syncer (nil: blocking).
func syncDirWith(syncer *fsync.Syncer, dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	if syncer != nil {
		err = syncer.Sync(d)
	} else {
		err = d.Sync()
	}
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// freeName returns name, or name.1, name.2, ... whichever does not exist
// in dir yet.
func freeName(dir, name string) (string, error) {
	candidate := name
	for i := 1; ; i++ {
		_, err := os.Lstat(filepath.Join(dir, candidate))
		if errors.Is(err, fs.ErrNotExist) {
			return candidate, nil
		}
		if err != nil {
			return "", err
		}
		candidate = name + "." + strconv.Itoa(i)
	}
}
