//go:build darwin || dragonfly || freebsd || linux || netbsd || openbsd

package sink

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// lockSpoolDir opens (or creates) the lock file at path and takes an
// exclusive flock on it, so that two processes never share a spool
// directory. Closing the returned file releases the lock; so does the
// process's death. The holder writes its pid into the file (see
// writeLockPID), which a process refused the lock names in its error.
func lockSpoolDir(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, spoolFileMode)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		if errors.Is(err, syscall.EWOULDBLOCK) {
			holder := lockHolder(f)
			f.Close()
			return nil, fmt.Errorf("%w: %s holds %s (flock on %s)", ErrSpoolInUse, holder, filepath.Dir(path), path)
		}
		f.Close()
		return nil, err
	}
	writeLockPID(f)
	return f, nil
}
