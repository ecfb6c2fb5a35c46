//go:build linux

package rawconn

import (
	"io"
	"net"
	"os"
	"syscall"
	"unsafe"
)

// rawIO holds what Read and Write need, set up once per connection.
type rawIO struct {
	rc syscall.RawConn
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
	return &Conn{TCPConn: tc, raw: rawIO{rc: rc}}
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
	var (
		n     int
		errno syscall.Errno
	)
	err := c.raw.rc.Read(func(fd uintptr) bool {
		for {
			r, _, e := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
			switch e {
			case syscall.EINTR:
				continue
			case syscall.EAGAIN:
				return false // wait for the poller, within the deadline
			}
			n, errno = int(r), e
			return true
		}
	})
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

// Write writes as net.TCPConn.Write does: all of p, or an error.
func (c *Conn) Write(p []byte) (int, error) {
	var (
		done  int
		zero  bool // a write(2) wrote nothing: to net, an unexpected EOF
		errno syscall.Errno
	)
	err := c.raw.rc.Write(func(fd uintptr) bool {
		for done < len(p) {
			chunk := min(len(p)-done, maxWrite)
			r, _, e := syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(&p[done])), uintptr(chunk))
			switch {
			case e == syscall.EINTR:
			case e == syscall.EAGAIN:
				return false // wait for room, within the deadline
			case e != 0:
				errno = e
				return true
			case r == 0:
				zero = true
				return true
			default:
				done += int(r)
			}
		}
		return true
	})
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
