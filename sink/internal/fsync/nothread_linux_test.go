//go:build linux

package fsync_test

import (
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// While a Syncer's fsync runs, no thread of the process is in fsync(2):
// the kernel's worker runs it. The test writes 64 MiB so that the fsync
// takes a while, and reads /proc/self/task/*/syscall (the system call
// each thread is in) until the Sync returns. With (*os.File).Sync in its
// place it fails: a thread shows fsync.
func TestNoThreadWaitsInFsync(t *testing.T) {
	if runtime.GOARCH != "amd64" && runtime.GOARCH != "arm64" {
		t.Skipf("no asynchronous fsync on %s", runtime.GOARCH)
	}
	s := newSyncer(t)
	if m := s.Mode(); m != "kernel" {
		t.Skipf("the kernel's asynchronous fsync is not available here: %s", m)
	}
	if _, err := os.ReadFile("/proc/self/task/" + strconv.Itoa(unix.Gettid()) + "/syscall"); err != nil {
		t.Skipf("cannot read threads' system calls: %v", err)
	}
	f, err := os.Create(filepath.Join(t.TempDir(), "big"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 1<<20)
	for i := range chunk {
		chunk[i] = byte(i)
	}
	for range 64 {
		if _, err := f.Write(chunk); err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- s.Sync(f) }()
	samples, inFsync := 0, 0
	for {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("Sync took %v; %d samples of every thread, %d in fsync", time.Since(start), samples, inFsync)
			if inFsync > 0 {
				t.Fatalf("%d samples found a thread in fsync(2)", inFsync)
			}
			if samples == 0 {
				t.Skip("the fsync ended before a thread could be looked at")
			}
			return
		default:
		}
		inFsync += threadsIn(t, unix.SYS_FSYNC)
		samples++
	}
}

// threadsIn counts the process's threads that are in system call nr.
func threadsIn(t *testing.T, nr int) int {
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, task := range tasks {
		b, err := os.ReadFile(filepath.Join("/proc/self/task", task.Name(), "syscall"))
		if err != nil {
			continue // the thread ended
		}
		if f := strings.Fields(string(b)); len(f) > 0 && f[0] == strconv.Itoa(nr) {
			n++
		}
	}
	return n
}
