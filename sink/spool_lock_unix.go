//go:build darwin || dragonfly || freebsd || linux || netbsd || openbsd

package sink

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// lockSpoolDir opens (or creates) the lock file at path and takes an
// exclusive flock on it, so that two processes never share a spool
// directory. Closing the returned file releases the lock; so does the
// process's death.
func lockSpoolDir(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, spoolFileMode)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: %s", ErrSpoolInUse, path)
		}
		return nil, err
	}
	return f, nil
}
