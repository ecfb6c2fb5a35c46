//go:build linux

package rawconn

import (
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"unsafe"
)

// rawIO holds what Read and Write need, set up once per connection: the
// functions they hand to the RawConn, made once in Wrap, and the
// arguments and results those functions share with them. A closure made
// in each Read and Write escaped to the heap with what it captured: about
// five allocations per proxied call. Each direction's fields are guarded
// by its own lock, held for the whole Read or Write; concurrent Reads
// (or Writes) of one connection take turns, as net's own take turns on
// the descriptor's lock.
type rawIO struct {
	rc syscall.RawConn

	rmu    sync.Mutex
	rp     []byte
	rn     int
	rerrno syscall.Errno
	readFn func(fd uintptr) bool

	wmu     sync.Mutex
	wp      []byte
	wp2     []byte // WriteTwo's second buffer, after wp
	wdone   int
	wzero   bool // a write(2) wrote nothing: to net, an unexpected EOF
	werrno  syscall.Errno
	writeFn func(fd uintptr) bool
	twoFn   func(fd uintptr) bool
	iov     [2]syscall.Iovec
}

// Wrap returns c with raw reads and writes when c is a non-blocking TCP
// connection (every TCP connection the net package makes is), and c
// itself otherwise.
func Wrap(c net.Conn) net.Conn {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return c
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return c
	}
	nonblocking := false
	if err := rc.Control(func(fd uintptr) {
		flags, _, errno := syscall.RawSyscall(syscall.SYS_FCNTL, fd, syscall.F_GETFL, 0)
		nonblocking = errno == 0 && flags&syscall.O_NONBLOCK != 0
	}); err != nil || !nonblocking {
		return c
	}
	rw := &Conn{TCPConn: tc}
	rw.raw.rc = rc
	rw.raw.readFn = rw.raw.read
	rw.raw.writeFn = rw.raw.write
	rw.raw.twoFn = rw.raw.writeTwo
	return rw
}

// Read reads as net.TCPConn.Read does.
func (c *Conn) Read(p []byte) (int, error) {
	if len(p) == 0 {
		// As net: a zero-length read does not reach the socket.
		return 0, nil
	}
	if len(p) > maxRW {
		p = p[:maxRW]
	}
	r := &c.raw
	r.rmu.Lock()
	r.rp, r.rn, r.rerrno = p, 0, 0
	err := r.rc.Read(r.readFn)
	n, errno := r.rn, r.rerrno
	r.rp = nil // the caller's buffer is not kept
	r.rmu.Unlock()
	if err != nil {
		return 0, c.opError("read", err)
	}
	if errno != 0 {
		return 0, c.opError("read", os.NewSyscallError("read", errno))
	}
	if n == 0 {
		return 0, io.EOF
	}
	return n, nil
}

// read is Read's function for the RawConn: one read(2) into rp.
func (r *rawIO) read(fd uintptr) bool {
	for {
		n, _, e := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&r.rp[0])), uintptr(len(r.rp)))
		switch e {
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			return false // wait for the poller, within the deadline
		}
		r.rn, r.rerrno = int(n), e
		return true
	}
}

// Write writes as net.TCPConn.Write does: all of p, or an error.
func (c *Conn) Write(p []byte) (int, error) {
	r := &c.raw
	r.wmu.Lock()
	r.wp, r.wdone, r.wzero, r.werrno = p, 0, false, 0
	err := r.rc.Write(r.writeFn)
	done, zero, errno := r.wdone, r.wzero, r.werrno
	r.wp = nil // the caller's buffer is not kept
	r.wmu.Unlock()
	switch {
	case err != nil:
		return done, c.opError("write", err)
	case errno != 0:
		return done, c.opError("write", os.NewSyscallError("write", errno))
	case zero:
		return done, c.opError("write", io.ErrUnexpectedEOF)
	}
	return done, nil
}

// WriteTwo writes a then b as Write writes one buffer, with writev(2):
// one system call for both when the socket has room.
func (c *Conn) WriteTwo(a, b []byte) (int, error) {
	r := &c.raw
	r.wmu.Lock()
	r.wp, r.wp2, r.wdone, r.wzero, r.werrno = a, b, 0, false, 0
	err := r.rc.Write(r.twoFn)
	done, zero, errno := r.wdone, r.wzero, r.werrno
	r.wp, r.wp2 = nil, nil // the caller's buffers are not kept
	r.iov = [2]syscall.Iovec{}
	r.wmu.Unlock()
	switch {
	case err != nil:
		return done, c.opError("write", err)
	case errno != 0:
		return done, c.opError("write", os.NewSyscallError("write", errno)) // as Write names it
	case zero:
		return done, c.opError("write", io.ErrUnexpectedEOF)
	}
	return done, nil
}

// writeTwo is WriteTwo's function for the RawConn: writev(2)s of what is
// left of wp and wp2 from wdone on, maxWrite at a time, until both are
// written, the socket is full or an error.
func (r *rawIO) writeTwo(fd uintptr) bool {
	total := len(r.wp) + len(r.wp2)
	for r.wdone < total {
		left := maxWrite
		niov := 0
		if r.wdone < len(r.wp) {
			p := r.wp[r.wdone:]
			p = p[:min(len(p), left)]
			r.iov[niov].Base = &p[0]
			r.iov[niov].SetLen(len(p))
			niov++
			left -= len(p)
		}
		if off := max(r.wdone-len(r.wp), 0); left > 0 && off < len(r.wp2) {
			p := r.wp2[off:]
			p = p[:min(len(p), left)]
			r.iov[niov].Base = &p[0]
			r.iov[niov].SetLen(len(p))
			niov++
		}
		n, _, e := syscall.RawSyscall(syscall.SYS_WRITEV, fd, uintptr(unsafe.Pointer(&r.iov[0])), uintptr(niov))
		if ret, stop := r.wrote(n, e); stop {
			return ret
		}
	}
	return true
}

// wrote records the result of one write(2) or writev(2) of n bytes with
// errno e: stop says the loop ends, returning ret (false: wait for room,
// within the deadline; true: done, with an error or zero write noted).
// EINTR and a write that made progress go on.
func (r *rawIO) wrote(n uintptr, e syscall.Errno) (ret, stop bool) {
	switch {
	case e == syscall.EINTR:
		return false, false
	case e == syscall.EAGAIN:
		return false, true
	case e != 0:
		r.werrno = e
		return true, true
	case n == 0:
		r.wzero = true
		return true, true
	}
	r.wdone += int(n)
	return false, false
}

// write is Write's function for the RawConn: write(2)s of wp from wdone
// on, maxWrite at a time, until all of it is written, the socket is full
// or an error.
func (r *rawIO) write(fd uintptr) bool {
	for r.wdone < len(r.wp) {
		chunk := min(len(r.wp)-r.wdone, maxWrite)
		n, _, e := syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(&r.wp[r.wdone])), uintptr(chunk))
		if ret, stop := r.wrote(n, e); stop {
			return ret
		}
	}
	return true
}

// opError wraps err as net's connections do: a *net.OpError naming the
// operation and both ends. An error from the poller (a deadline, a closed
// connection) comes from syscall.RawConn already wrapped, under the
// operation "raw-read" or "raw-write"; it is named as Read's or Write's.
func (c *Conn) opError(op string, err error) error {
	if oe, ok := err.(*net.OpError); ok {
		e := *oe
		e.Op = op
		return &e
	}
	return &net.OpError{Op: op, Net: "tcp", Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: err}
}
