//go:build linux

package sink

import (
	"errors"
	"os"
	"syscall"
	"unsafe"

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
//
// The call is made without the runtime's bookkeeping for system calls
// that may block (RawSyscall): it does what the copies' own page faults
// would do, on the same goroutine, and they hold their processor too. As
// an ordinary system call it woke the runtime's monitor thread whenever
// the process had been idle, and a lone call paid for the monitor's naps
// that followed (docs/performance.md, "Events and crashes").
func populateSegment(m []byte) error {
	if len(m) == 0 {
		return nil
	}
	_, _, e := unix.RawSyscall(unix.SYS_MADVISE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), unix.MADV_POPULATE_WRITE)
	if e != 0 && e != unix.EFAULT {
		return e
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
