//go:build darwin || dragonfly || freebsd || linux || netbsd || openbsd

package sink

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestSpoolInUseNamesHolder checks that a second OpenSpool on a directory
// says who holds it: the pid its holder recorded in LOCK, this process's
// own here, and that the lock works as before (refused while held, free
// after Close, the pid then the new holder's).
func TestSpoolInUseNamesHolder(t *testing.T) {
	dir := t.TempDir()
	lock := filepath.Join(dir, lockName)
	s := openTestSpool(t, SpoolConfig{Dir: dir}, &testDest{}, nil)
	pid := strconv.Itoa(os.Getpid())
	if b, err := os.ReadFile(lock); err != nil || string(b) != pid+"\n" {
		t.Errorf("LOCK holds %q (%v), want this process's pid %s", b, err, pid)
	}
	_, err := OpenSpool(SpoolConfig{Dir: dir}, &testDest{}, nil)
	want := "sink: spool directory in use: this process (pid " + pid + ") itself holds " + dir + " (flock on " + lock + ")"
	if !errors.Is(err, ErrSpoolInUse) || !strings.Contains(err.Error(), want) {
		t.Errorf("second OpenSpool = %v, want ErrSpoolInUse saying %q", err, want)
	}
	closeSpool(t, s)
	s2, err := OpenSpool(SpoolConfig{Dir: dir}, &testDest{}, nil)
	if err != nil {
		t.Fatalf("OpenSpool after Close: %v", err)
	}
	closeSpool(t, s2)
	if b, _ := os.ReadFile(lock); string(b) != pid+"\n" {
		t.Errorf("LOCK holds %q after a second holder, want %q alone", b, pid+"\n")
	}
}

// TestSpoolInUseByAnotherProcess checks the refusal when another process
// holds the lock (flock(1), which records no pid: the error says another
// process holds it, with no pid), and when that process has recorded its
// pid as toolgate does.
func TestSpoolInUseByAnotherProcess(t *testing.T) {
	flock, err := exec.LookPath("flock")
	if err != nil {
		t.Skip("flock(1) is not installed")
	}
	dir := t.TempDir()
	if err := os.MkdirAll(dir, spoolDirMode); err != nil {
		t.Fatal(err)
	}
	lock := filepath.Join(dir, lockName)
	// flock(1) takes the lock and holds it while the cat it runs (without
	// the lock's descriptor, --close) says so and reads its input; closing
	// that ends cat, then flock(1), which frees the lock.
	cmd := exec.Command(flock, "--exclusive", "--nonblock", "--close", lock, "sh", "-c", "echo locked; exec cat")
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { in.Close(); cmd.Wait() }()
	buf := make([]byte, len("locked\n"))
	if _, err := io.ReadFull(out, buf); err != nil || string(buf) != "locked\n" {
		t.Fatalf("flock(1) said %q, %v", buf, err)
	}
	_, err = OpenSpool(SpoolConfig{Dir: dir}, &testDest{}, nil)
	if want := "spool directory in use: another toolgate process holds " + dir; !errors.Is(err, ErrSpoolInUse) || !strings.Contains(err.Error(), want) {
		t.Errorf("OpenSpool under flock(1) = %v, want ErrSpoolInUse saying %q", err, want)
	}
	holder := strconv.Itoa(cmd.Process.Pid)
	if err := os.WriteFile(lock, []byte(holder+"\n"), spoolFileMode); err != nil {
		t.Fatal(err)
	}
	_, err = OpenSpool(SpoolConfig{Dir: dir}, &testDest{}, nil)
	if want := "another toolgate process (pid " + holder + ") holds " + dir; !errors.Is(err, ErrSpoolInUse) || !strings.Contains(err.Error(), want) {
		t.Errorf("OpenSpool with the holder's pid recorded = %v, want ErrSpoolInUse saying %q", err, want)
	}
	in.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("flock(1): %v", err)
	}
	// The holder gone, the lock is free again, whatever LOCK says.
	deadline := time.Now().Add(30 * time.Second)
	for {
		s, err := OpenSpool(SpoolConfig{Dir: dir}, &testDest{}, nil)
		if err == nil {
			closeSpool(t, s)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("OpenSpool after the holder died: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// FuzzParseLockPID feeds parseLockPID arbitrary lock file contents: it
// never panics and reads back exactly what writeLockPID writes.
func FuzzParseLockPID(f *testing.F) {
	for _, s := range []string{"", "1234\n", "1234", "0\n", "-1\n", "12a\n", "99999999999\n", "\n", " 12\n", "12\n\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		pid, ok := parseLockPID(b)
		if ok && (pid <= 0 || strconv.Itoa(pid)+"\n" != strings.TrimSuffix(string(b), "\n")+"\n") {
			t.Errorf("parseLockPID(%q) = %d, true", b, pid)
		}
	})
}
