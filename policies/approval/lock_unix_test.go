//go:build darwin || dragonfly || freebsd || linux || netbsd || openbsd

package approval_test

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/toolgate/toolgate/policies/approval"
	"github.com/toolgate/toolgate/policies/approval/audit"
)

// TestFileStoreUseWaitsForTheLock: while another process holds the file's
// lock (here: another open file description, as another process has), a
// use waits, and gives up when its context ends; once the lock is
// released, the use is recorded.
func TestFileStoreUseWaitsForTheLock(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a.ndjson")
	s, err := approval.OpenFileStore(path, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	const id = "0123456789abcdef0123456789abcdef"
	now := time.Now().UTC()
	if err := s.PutRequest(ctx, audit.ApprovalRequest{ID: id, Time: now, ExpiresAt: now.Add(time.Hour), Key: "k"}); err != nil {
		t.Fatal(err)
	}
	other, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if err := syscall.Flock(int(other.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	use := audit.ApprovalDecision{ID: id, Time: now, Verdict: audit.VerdictUsed, Decider: "sidecar:t"}
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if ok, err := s.Use(short, use, 1); ok || err == nil {
		t.Fatalf("a use while another holds the lock: %v, %v; want it to give up", ok, err)
	}
	fd := int(other.Fd())
	released := make(chan struct{})
	go func() {
		defer close(released)
		time.Sleep(50 * time.Millisecond)
		syscall.Flock(fd, syscall.LOCK_UN)
	}()
	ok, err := s.Use(ctx, use, 1)
	<-released
	if !ok || err != nil {
		t.Fatalf("a use once the lock is released: %v, %v", ok, err)
	}
	if ok, _ := s.Use(ctx, use, 1); ok {
		t.Fatal("a second use of a one-use grant was recorded")
	}
}
