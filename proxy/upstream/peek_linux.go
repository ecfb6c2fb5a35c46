//go:build linux

package upstream

import (
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
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

// canSkipPeek says a pooled connection may be used without the peek
// (peekSkipWithin): Linux tells what upstream acknowledged (unacked).
const canSkipPeek = true

// unacked reports whether upstream acknowledged the sent bytes written
// before the current call and none of it: its close came before the call
// reached it. Upstream's close acknowledges what its side received, so a
// close after the call arrived (read or not) is never taken for one before
// it. Linux counts the SYN in tcpi_bytes_acked, so it is sent or sent+1
// (a call's first segment is far longer than one byte). It is false when
// it cannot tell (no socket, a kernel without tcpi_bytes_acked, whose zero
// is below sent). It runs only when such a call failed.
func (p *peeker) unacked(sent int64) bool {
	if p.rc == nil || sent <= 0 {
		return false
	}
	var acked uint64
	var gerr error
	err := p.rc.Control(func(fd uintptr) {
		var info *unix.TCPInfo
		info, gerr = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
		if gerr == nil {
			acked = info.Bytes_acked
		}
	})
	return err == nil && gerr == nil && (acked == uint64(sent) || acked == uint64(sent)+1)
}
