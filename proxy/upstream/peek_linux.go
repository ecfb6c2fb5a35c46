//go:build linux

package upstream

import (
	"syscall"
	"unsafe"
)

// peekOne peeks at one byte of the socket fd without waiting. MSG_DONTWAIT
// never waits, so the call skips the runtime's system call bookkeeping,
// as internal/rawconn's reads and writes do.
func peekOne(fd uintptr, b []byte) error {
	_, _, e := syscall.RawSyscall6(syscall.SYS_RECVFROM, fd, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)), syscall.MSG_PEEK|syscall.MSG_DONTWAIT, 0, 0)
	if e != 0 {
		return e
	}
	return nil
}
