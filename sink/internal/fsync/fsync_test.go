package fsync_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/toolgate/toolgate/sink/internal/fsync"
)

// newSyncer returns a Syncer closed when the test ends.
func newSyncer(t *testing.T) *fsync.Syncer {
	t.Helper()
	s := fsync.New()
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

// A Syncer's Sync answers as (*os.File).Sync does, file by file: the same
// error texts, the same errors.Is results.
func TestSameAsFileSync(t *testing.T) {
	s := newSyncer(t)
	t.Logf("mode: %s", s.Mode())
	dir := t.TempDir()
	// tempFile creates a file in dir holding content.
	tempFile := func(t *testing.T, content string) *os.File {
		f, err := os.CreateTemp(dir, "f")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteString(content); err != nil {
			t.Fatal(err)
		}
		return f
	}
	cases := map[string]func(t *testing.T) *os.File{
		"regular file": func(t *testing.T) *os.File { return tempFile(t, strings.Repeat("event\n", 1000)) },
		"empty file":   func(t *testing.T) *os.File { return tempFile(t, "") },
		"directory": func(t *testing.T) *os.File {
			f, err := os.Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			return f
		},
		"closed file": func(t *testing.T) *os.File {
			f := tempFile(t, "")
			f.Close()
			return f
		},
		"pipe": func(t *testing.T) *os.File {
			r, w, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { r.Close() })
			return w
		},
		"read-only file": func(t *testing.T) *os.File {
			p := filepath.Join(dir, "ro")
			if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
				t.Fatal(err)
			}
			f, err := os.Open(p)
			if err != nil {
				t.Fatal(err)
			}
			return f
		},
	}
	for name, open := range cases {
		t.Run(name, func(t *testing.T) {
			a, b := open(t), open(t)
			defer a.Close()
			defer b.Close()
			want := b.Sync()
			got := s.Sync(a)
			if errText(got) != errText(want) {
				t.Fatalf("Sync = %v, (*os.File).Sync = %v", errText(got), errText(want))
			}
			for _, target := range []error{os.ErrClosed, os.ErrInvalid} {
				if errors.Is(got, target) != errors.Is(want, target) {
					t.Errorf("errors.Is(%v, %v) = %v, (*os.File).Sync's %v", got, target, errors.Is(got, target), errors.Is(want, target))
				}
			}
		})
	}
}

// errText is err's text with the file's own name (they differ between the
// two files of a case) taken out.
func errText(err error) string {
	if err == nil {
		return "<nil>"
	}
	var pe *os.PathError
	if errors.As(err, &pe) {
		return fmt.Sprintf("%T %s: %v", pe.Err, pe.Op, pe.Err)
	}
	return err.Error()
}

// On Linux, amd64 and arm64, Sync goes through the kernel's asynchronous
// interface unless the system refuses it (then the test says why and
// skips): and what it syncs is written back. After a Sync, every page of
// the file is clean, so the kernel drops them all when told it will not
// need them (POSIX_FADV_DONTNEED leaves dirty pages and pages under
// writeback in memory).
func TestKernelWritesBack(t *testing.T) {
	if runtime.GOOS != "linux" || (runtime.GOARCH != "amd64" && runtime.GOARCH != "arm64") {
		t.Skipf("no asynchronous fsync on %s/%s", runtime.GOOS, runtime.GOARCH)
	}
	s := newSyncer(t)
	if m := s.Mode(); m != "kernel" {
		t.Skipf("the kernel's asynchronous fsync is not available here: %s", m)
	}
	f, err := os.CreateTemp(t.TempDir(), "f")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	const size = 4 << 20
	if _, err := f.Write(make([]byte, size)); err != nil {
		t.Fatal(err)
	}
	if err := s.Sync(f); err != nil {
		t.Fatal(err)
	}
	if resident := residentAfterDontNeed(t, f, size); resident != 0 {
		t.Fatalf("%d of %d pages still in memory after Sync and DONTNEED: not written back", resident, size/os.Getpagesize())
	}
}

// Syncs of many files at once, on one Syncer, each file synced many
// times: every one succeeds (run with -race).
func TestConcurrentSyncs(t *testing.T) {
	s := newSyncer(t)
	dir := t.TempDir()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f, err := os.Create(filepath.Join(dir, fmt.Sprint(i)))
			if err != nil {
				errs <- err
				return
			}
			defer f.Close()
			for j := range 25 {
				if _, err := fmt.Fprintf(f, "line %d\n", j); err != nil {
					errs <- err
					return
				}
				if err := s.Sync(f); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// After Close, Sync still syncs, blocking.
func TestSyncAfterClose(t *testing.T) {
	s := fsync.New()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	f, err := os.CreateTemp(t.TempDir(), "f")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := s.Sync(f); err != nil {
		t.Fatal(err)
	}
}
