package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/testutil"
)

// TestSecondRunNamesSpoolHolder starts a sidecar as its own process, then
// `toolgate run` on the same configuration: the second exits 1 saying that
// another toolgate process, by its pid, holds the events file's journal
// and what to do, and the first keeps running; once the first has stopped
// the same configuration starts (the lock is as it was).
func TestSecondRunNamesSpoolHolder(t *testing.T) {
	t.Parallel()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cfg := filepath.Join(dir, "toolgate.yaml")
	writeFile(t, cfg, "listen:\n  forward: 127.0.0.1:0\nadmin:\n  listen: \"off\"\nevents:\n  file: {path: ev.ndjson}\n")

	// The first: this test binary as toolgate, in its own process.
	first := exec.Command(exe, "run", "--config", cfg)
	first.Env = append(os.Environ(), asToolgateEnv+"=1")
	firstErr := new(testutil.SyncBuffer)
	first.Stderr = firstErr
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- first.Wait() }()
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			first.Process.Kill()
			<-exited
		}
	})
	for deadline := time.Now().Add(runningWithin); ; time.Sleep(20 * time.Millisecond) {
		if _, ok := findRunning(firstErr.String()); ok {
			break
		}
		select {
		case err := <-exited:
			stopped = true
			t.Fatalf("the first sidecar exited (%v) before running:\n%s", err, firstErr)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the first sidecar is not running after %v:\n%s", runningWithin, firstErr)
		}
	}

	// The second, on the same file.
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"run", "--config", cfg}, &stdout, &stderr)
	if code != exitError {
		t.Errorf("second run = %d, want %d", code, exitError)
	}
	journal := filepath.Join(dir, "ev.ndjson.journal")
	for _, want := range []string{
		fmt.Sprintf("another toolgate process (pid %d) holds %s", first.Process.Pid, journal),
		"two sidecars cannot share an events file and its journal: stop that one, or give this one another events.file.path (and events.spool.dir, if set)",
	} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("second run's stderr lacks %q:\n%s", want, stderr.String())
		}
	}
	if strings.Contains(stderr.String(), "toolgate running") {
		t.Errorf("the second sidecar started:\n%s", stderr.String())
	}
	if b, err := os.ReadFile(filepath.Join(journal, "LOCK")); err != nil || string(b) != strconv.Itoa(first.Process.Pid)+"\n" {
		t.Errorf("LOCK holds %q (%v), want the first's pid", b, err)
	}
	select {
	case err := <-exited:
		stopped = true
		t.Fatalf("the first sidecar exited (%v) when the second was refused:\n%s", err, firstErr)
	default:
	}

	// The first stopped, the same configuration starts.
	if err := first.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		stopped = true
		if err != nil {
			t.Fatalf("the first sidecar's exit: %v\n%s", err, firstErr)
		}
	case <-time.After(runningWithin):
		t.Fatalf("the first sidecar did not stop on SIGTERM:\n%s", firstErr)
	}
	r := startRun(t, dir, "listen:\n  forward: 127.0.0.1:0\nadmin:\n  listen: \"off\"\nevents:\n  file: {path: ev.ndjson}\n")
	r.running(t)
	if code := r.stop(t); code != exitOK {
		t.Errorf("the sidecar started after the first stopped exited %d:\n%s", code, r.stderr)
	}
}
