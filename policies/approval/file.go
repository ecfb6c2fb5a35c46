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
	// pending holds the records with no verdict yet (expired or not).
	pending map[string]*Record
	// order is the requests in the order they were read, for dropping
	// those past the retention from the front without visiting the rest.
	order []idTime
	f     *os.File
}

// idTime is one request's id and time, in FileStore.order.
type idTime struct {
	id string
	t  time.Time
}

var (
	_ Store          = (*FileStore)(nil)
	_ UseStore       = (*FileStore)(nil)
	_ PendingCounter = (*FileStore)(nil)
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
	s := &FileStore{path: path, retention: retention}
	s.reset()
	return s
}

// reset forgets every row read, to read the file again from its start.
func (s *FileStore) reset() {
	s.off = 0
	s.byID, s.keys, s.pending = map[string]*Record{}, map[string]string{}, map[string]*Record{}
	s.order = nil
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
		s.reset()
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
	s.dropBefore(cutoff)
	return nil
}

// dropBefore forgets the requests made before cutoff. Requests are read
// mostly in time order (several writers' clocks may differ a little), so
// it drops from the front of order and stops at the first one still
// inside; one written out of order is dropped when those before it are.
func (s *FileStore) dropBefore(cutoff time.Time) {
	i := 0
	for ; i < len(s.order) && s.order[i].t.Before(cutoff); i++ {
		id := s.order[i].id
		rec, ok := s.byID[id]
		if !ok || !rec.Request.Time.Before(cutoff) {
			continue
		}
		delete(s.byID, id)
		delete(s.pending, id)
		if s.keys[rec.Request.Key] == id {
			delete(s.keys, rec.Request.Key)
		}
	}
	clear(s.order[:i]) // the ids' strings can go
	s.order = s.order[i:]
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
		rec := &Record{Request: *row.Request}
		s.byID[rec.Request.ID] = rec
		s.pending[rec.Request.ID] = rec
		s.order = append(s.order, idTime{rec.Request.ID, rec.Request.Time})
		if prev, ok := s.byID[s.keys[row.Request.Key]]; !ok || !row.Request.Time.Before(prev.Request.Time) {
			s.keys[row.Request.Key] = row.Request.ID
		}
	case row.Decision != nil:
		if rec, ok := s.byID[row.Decision.ID]; ok {
			rec.Decisions = append(rec.Decisions, *row.Decision)
			if row.Decision.Verdict != audit.VerdictUsed {
				delete(s.pending, row.Decision.ID)
			}
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

// CountPending counts the requests made at or after since with no
// verdict that have not expired at now, up to limit. It visits only the
// undecided requests kept (those past the retention are dropped), not
// the decided ones.
func (s *FileStore) CountPending(_ context.Context, since, now time.Time, limit int) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.catchUp(); err != nil {
		return 0, err
	}
	n := 0
	for _, rec := range s.pending {
		if n == limit {
			break
		}
		if now.Before(rec.Request.ExpiresAt) && !rec.Request.Time.Before(since) {
			n++
		}
	}
	return n, nil
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
