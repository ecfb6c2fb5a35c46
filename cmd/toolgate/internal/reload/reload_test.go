package reload

import (
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// fileTarget is the smallest Target: a file whose content is the
// configuration; a file holding "bad" does not load.
type fileTarget struct {
	path string
	mu   sync.Mutex
	in   string // the content in force
}

func (f *fileTarget) Files(path string, _ []byte) []string { return []string{path} }

func (f *fileTarget) Load() (Staged, error) {
	b, err := os.ReadFile(f.path)
	if err != nil {
		return nil, err
	}
	if strings.TrimSpace(string(b)) == "bad" {
		return nil, errors.New("bad configuration")
	}
	return fileStaged{f, string(b)}, nil
}

func (f *fileTarget) inForce() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.in
}

type fileStaged struct {
	f    *fileTarget
	next string
}

func (s fileStaged) Commit() (Versions, []string, error) {
	s.f.mu.Lock()
	defer s.f.mu.Unlock()
	s.f.in = s.next
	return Versions{Config: s.next, Policy: "p"}, nil, nil
}

func (s fileStaged) Discard() {}

// TestWatcherReloadsAFile checks the mechanism with a Target that knows
// nothing of toolgate's configuration: a rewritten file is put in force
// once it settles, POST /reload answers 422 for one that does not load and
// leaves the one in force, and Status counts both.
func TestWatcherReloadsAFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "conf")
	if err := os.WriteFile(path, []byte("v1"), 0o644); err != nil {
		t.Fatal(err)
	}
	target := &fileTarget{path: path, in: "v1"}
	w := New(Options{Path: path, Target: target, InForce: Versions{Config: "v1", Policy: "p"},
		Settle: 20 * time.Millisecond, Poll: 50 * time.Millisecond, Log: slog.New(slog.DiscardHandler)})
	w.Start(nil)
	defer w.Stop()

	replace(t, path, "v2")
	for deadline := time.Now().Add(30 * time.Second); target.inForce() != "v2"; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("v2 not in force within 30 s: %+v", w.Status())
		}
	}
	if st := w.Status(); !st.OK || st.ConfigVersion != "v2" || st.Reloads.OK != 1 {
		t.Errorf("status after the file changed = %+v, want ok, v2, 1 reload", st)
	}

	replace(t, path, "bad")
	rec := httptest.NewRecorder()
	w.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/reload", nil))
	var a Answer
	if err := json.Unmarshal(rec.Body.Bytes(), &a); err != nil {
		t.Fatalf("answer %q: %v", rec.Body, err)
	}
	if rec.Code != http.StatusUnprocessableEntity || a.OK || a.Error != "bad configuration" || a.ConfigVersion != "v2" {
		t.Errorf("POST /reload of a bad file = %d %+v, want 422, the error, v2 still in force", rec.Code, a)
	}
	if got := target.inForce(); got != "v2" {
		t.Errorf("in force after a failed reload: %q, want v2", got)
	}
	if st := w.Status(); st.OK || st.Reloads.Failed < 1 {
		t.Errorf("status after a failed reload = %+v, want not ok, a failure counted", st)
	}
}

// replace writes content to path as an editor's write-then-rename does, so
// no reader sees it half-written.
func replace(t *testing.T, path, content string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}
