package reload

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestFolderWatcher checks what the Linux watcher reports: a file written
// and closed, created by rename, or removed in a watched folder is
// reported by its path; writes to a file kept open (toolgate's events
// file, written on every call) are not, until it is closed.
func TestFolderWatcher(t *testing.T) {
	dir := t.TempDir()
	w, err := newFolderWatcher()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := w.Add(dir); err != nil {
		t.Fatal(err)
	}
	// next returns the next reported path, or "" when none comes within d.
	next := func(d time.Duration) string {
		select {
		case p := <-w.Events():
			return p
		case err := <-w.Errors():
			t.Fatalf("watcher error: %v", err)
		case <-time.After(d):
		}
		return ""
	}
	expect := func(what, want string) {
		t.Helper()
		deadline := time.After(10 * time.Second)
		for {
			select {
			case p := <-w.Events():
				if p == want {
					return
				}
			case err := <-w.Errors():
				t.Fatalf("%s: watcher error: %v", what, err)
			case <-deadline:
				t.Fatalf("%s: %s not reported within 10s", what, want)
			}
		}
	}

	events := filepath.Join(dir, "events.ndjson")
	f, err := os.OpenFile(events, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	expect("create", events)
	for p := next(200 * time.Millisecond); p != ""; p = next(200 * time.Millisecond) {
	}
	for range 100 {
		if _, err := f.WriteString("{}\n"); err != nil {
			t.Fatal(err)
		}
	}
	if p := next(500 * time.Millisecond); p != "" {
		t.Errorf("writes to an open file reported %s", p)
	}

	cfg := filepath.Join(dir, "toolgate.yaml")
	if err := os.WriteFile(cfg, []byte("listen: {}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	expect("write and close", cfg)

	tmp := filepath.Join(dir, ".policy.tmp")
	pol := filepath.Join(dir, "policy.rego")
	if err := os.WriteFile(tmp, []byte("package x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, pol); err != nil {
		t.Fatal(err)
	}
	expect("rename", pol)
	if err := os.Remove(pol); err != nil {
		t.Fatal(err)
	}
	expect("remove", pol)

	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	expect("events file closed", events)
}
