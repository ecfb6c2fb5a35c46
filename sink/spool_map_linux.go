//go:build linux

package sink

import (
	"errors"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// mapSegment reserves size bytes of disk for f (fallocate, so that a
// write into the mapping can never find the disk full) and maps them
// shared and writable: what is copied into the mapping is in the page
// cache, as after a write(2).
func mapSegment(f *os.File, size int) ([]byte, error) {
	conn, err := f.SyscallConn()
	if err != nil {
		return nil, err
	}
	var m []byte
	cerr := conn.Control(func(fd uintptr) {
		if err = syscall.Fallocate(int(fd), 0, 0, int64(size)); err != nil {
			return
		}
		m, err = syscall.Mmap(int(fd), 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	})
	if cerr != nil {
		return nil, cerr
	}
	return m, err
}

// populateSegment faults in the pages of m, a part of a mapping from
// mapSegment, writable, in one call (madvise MADV_POPULATE_WRITE, Linux
// 5.14): about a third of the CPU of faulting them in one at a time as
// copies first touch them. It fails where the kernel does not know the
// advice (EINVAL). A page that is gone (the file was cut under the
// mapping, EFAULT) is not its error but the copy's to meet: it returns
// nil, and never raises a signal.
func populateSegment(m []byte) error {
	if err := unix.Madvise(m, unix.MADV_POPULATE_WRITE); err != nil && !errors.Is(err, unix.EFAULT) {
		return err
	}
	return nil
}

// unmapSegment releases a mapping from mapSegment.
func unmapSegment(m []byte) error {
	return syscall.Munmap(m)
}

// mapUnsupported reports whether err from mapSegment says the file system
// cannot preallocate or map files at all, rather than that it could not
// this time (the disk is full, say).
func mapUnsupported(err error) bool {
	return errors.Is(err, syscall.EOPNOTSUPP) || errors.Is(err, syscall.ENODEV) ||
		errors.Is(err, syscall.EINVAL) || errors.Is(err, syscall.ENOSYS)
}
