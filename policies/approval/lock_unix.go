//go:build darwin || dragonfly || freebsd || linux || netbsd || openbsd

package approval

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"
)

// maxLockWait bounds how long a use waits for the file's lock; past it (a
// process holding the lock is stuck) the call is refused, fail closed.
const maxLockWait = 5 * time.Second

// lockFile takes an exclusive flock on f, waiting for it at most
// maxLockWait or until ctx ends; every process that shares the file and
// uses its grants takes the same lock, so a use is decided by one of them
// at a time. The returned function releases it; so does the process's
// death.
func lockFile(ctx context.Context, f *os.File) (func(), error) {
	fd := int(f.Fd())
	deadline := time.Now().Add(maxLockWait)
	wait := 50 * time.Microsecond
	for {
		err := syscall.Flock(fd, syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { _ = syscall.Flock(fd, syscall.LOCK_UN) }, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			return nil, err
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("another process has held the lock for %s", maxLockWait)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
		wait = min(2*wait, 5*time.Millisecond)
	}
}
