//go:build darwin || dragonfly || freebsd || linux || netbsd || openbsd

package approval

import (
	"os"
	"syscall"
)

// lockFile takes an exclusive flock on f, waiting for it; every process
// that shares the file and uses its grants takes the same lock, so a use
// is decided by one of them at a time. The returned function releases it;
// so does the process's death.
func lockFile(f *os.File) (func(), error) {
	fd := int(f.Fd())
	for {
		err := syscall.Flock(fd, syscall.LOCK_EX)
		if err == nil {
			break
		}
		if err != syscall.EINTR {
			return nil, err
		}
	}
	return func() { _ = syscall.Flock(fd, syscall.LOCK_UN) }, nil
}

// fileLocking says whether lockFile locks across processes here.
const fileLocking = true
