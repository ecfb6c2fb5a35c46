package approval

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"sync"
	"time"

	"github.com/toolgate/toolgate/policies/approval/audit"
)

// maxFileLine bounds one line of the file store; a longer line (which
// toolgate never writes) is skipped.
const maxFileLine = 64 << 10

// FileStore keeps requests and decisions in one NDJSON file, one row a
// line, appended with one write each (O_APPEND), so a sidecar and the
// `toolgate approvals` command on the same host share it. Each call reads
// what other processes appended since. Rows older than the retention are
// dropped from memory (the file keeps them as the audit trail).
type FileStore struct {
	path      string
	retention time.Duration

	mu   sync.Mutex
	off  int64
	byID map[string]*Record
	keys map[string]string // key -> newest request id
	f    *os.File
}

var (
	_ Store    = (*FileStore)(nil)
	_ UseStore = (*FileStore)(nil)
)

// fileRow is one line of the file store.
type fileRow struct {
	Request  *audit.ApprovalRequest  `json:"request,omitempty"`
	Decision *audit.ApprovalDecision `json:"decision,omitempty"`
}

// NewFileStore returns the file store at path; the file is opened
// (created when missing) at first use, so a configuration whose calls
// never need approval leaves no file. retention bounds how long rows stay
// in memory; it should cover pending_ttl plus decision_ttl.
func NewFileStore(path string, retention time.Duration) *FileStore {
	return &FileStore{path: path, retention: retention, byID: map[string]*Record{}, keys: map[string]string{}}
}

// OpenFileStore is NewFileStore, opening the file at once.
func OpenFileStore(path string, retention time.Duration) (*FileStore, error) {
	s := NewFileStore(path, retention)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.catchUp(); err != nil {
		return nil, err
	}
	return s, nil
}

// Close closes the file.
func (s *FileStore) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.f == nil {
		return nil
	}
	err := s.f.Close()
	s.f = nil
	return err
}

// catchUp reads rows appended since the last read. s.mu is held.
func (s *FileStore) catchUp() error {
	if s.f == nil {
		f, err := os.OpenFile(s.path, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o600)
		if err != nil {
			return fmt.Errorf("open approvals file: %w", err)
		}
		s.f = f
	}
	fi, err := s.f.Stat()
	if err != nil {
		return fmt.Errorf("read approvals file: %w", err)
	}
	if fi.Size() < s.off { // truncated or replaced: read it all again
		s.off = 0
		s.byID, s.keys = map[string]*Record{}, map[string]string{}
	}
	if fi.Size() == s.off {
		return nil
	}
	r := bufio.NewReaderSize(io.NewSectionReader(s.f, s.off, fi.Size()-s.off), 64<<10)
	cutoff := time.Now().Add(-s.retention)
	for {
		line, err := readLine(r)
		if errors.Is(err, io.EOF) {
			break // a line without its newline is still being written
		}
		if err != nil {
			return fmt.Errorf("read approvals file: %w", err)
		}
		s.off += int64(len(line))
		var row fileRow
		if len(line) > maxFileLine || json.Unmarshal(line, &row) != nil {
			continue
		}
		s.apply(row, cutoff)
	}
	for id, rec := range s.byID {
		if rec.Request.Time.Before(cutoff) {
			delete(s.byID, id)
			if s.keys[rec.Request.Key] == id {
				delete(s.keys, rec.Request.Key)
			}
		}
	}
	return nil
}

// readLine reads one whole line with its newline (io.EOF when none is
// complete); a line over maxFileLine is returned cut, to be skipped.
func readLine(r *bufio.Reader) ([]byte, error) {
	var out []byte
	for {
		chunk, err := r.ReadSlice('\n')
		if len(out)+len(chunk) <= maxFileLine+1 {
			out = append(out, chunk...)
		} else {
			out = append(out[:0:0], bytes.Repeat([]byte{' '}, maxFileLine+1)...)
		}
		switch {
		case err == nil:
			return out, nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		default:
			return nil, err
		}
	}
}

func (s *FileStore) apply(row fileRow, cutoff time.Time) {
	switch {
	case row.Request != nil:
		if row.Request.Time.Before(cutoff) || !validID(row.Request.ID) {
			return
		}
		s.byID[row.Request.ID] = &Record{Request: *row.Request}
		if prev, ok := s.byID[s.keys[row.Request.Key]]; !ok || !row.Request.Time.Before(prev.Request.Time) {
			s.keys[row.Request.Key] = row.Request.ID
		}
	case row.Decision != nil:
		if rec, ok := s.byID[row.Decision.ID]; ok {
			rec.Decisions = append(rec.Decisions, *row.Decision)
		}
	}
}

func (s *FileStore) append(row fileRow) error {
	b, err := json.Marshal(row)
	if err != nil {
		return err
	}
	b = append(b, '\n')
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.catchUp(); err != nil {
		return err
	}
	if _, err := s.f.Write(b); err != nil {
		return fmt.Errorf("write approvals file: %w", err)
	}
	return s.catchUp()
}

// Use appends the use row d when its request has fewer than uses uses,
// and reports whether it did. The check and the write are one step under
// an exclusive flock on the file, which every sidecar sharing the file
// takes for its uses, so a grant of n uses is used at most n times by any
// number of processes on one host (where flock exists: Linux, the BSDs
// and macOS). The lock is waited for at most 5s, and no longer than ctx
// allows; then the use fails. A request no longer in memory (past the
// retention) is not used.
func (s *FileStore) Use(ctx context.Context, d audit.ApprovalDecision, uses int) (bool, error) {
	b, err := json.Marshal(fileRow{Decision: &d})
	if err != nil {
		return false, err
	}
	b = append(b, '\n')
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.catchUp(); err != nil { // opens the file
		return false, err
	}
	unlock, err := lockFile(ctx, s.f)
	if err != nil {
		return false, fmt.Errorf("lock approvals file: %w", err)
	}
	defer unlock()
	if err := s.catchUp(); err != nil {
		return false, err
	}
	rec, ok := s.byID[d.ID]
	if !ok || rec.Uses() >= uses {
		return false, nil
	}
	if _, err := s.f.Write(b); err != nil {
		return false, fmt.Errorf("write approvals file: %w", err)
	}
	return true, s.catchUp()
}

// PutRequest appends a request row.
func (s *FileStore) PutRequest(_ context.Context, r audit.ApprovalRequest) error {
	return s.append(fileRow{Request: &r})
}

// PutDecision appends a decision row.
func (s *FileStore) PutDecision(_ context.Context, d audit.ApprovalDecision) error {
	return s.append(fileRow{Decision: &d})
}

// Find returns a request by id, else the newest by key.
func (s *FileStore) Find(_ context.Context, id, key string) (Record, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.catchUp(); err != nil {
		return Record{}, false, err
	}
	if id == "" {
		id = s.keys[key]
	}
	rec, ok := s.byID[id]
	if !ok {
		return Record{}, false, nil
	}
	return copyRecord(rec), true, nil
}

// Recent returns requests made since since, newest first.
func (s *FileStore) Recent(_ context.Context, since time.Time, limit int) ([]Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.catchUp(); err != nil {
		return nil, err
	}
	var out []Record
	for _, rec := range s.byID {
		if !rec.Request.Time.Before(since) {
			out = append(out, copyRecord(rec))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Request.Time.After(out[j].Request.Time) })
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

func copyRecord(r *Record) Record {
	c := *r
	c.Decisions = append([]audit.ApprovalDecision(nil), r.Decisions...)
	return c
}
