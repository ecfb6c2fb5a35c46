//go:build unix

package upstream

import (
	"net"
	"syscall"
)

// peeker tells whether an idle upstream connection is still usable: upstream
// has not closed it and has sent nothing unasked. It peeks without waiting,
// so it sees what http.Transport's reader goroutine would have seen. It is
// made once per connection, so a check allocates nothing.
type peeker struct {
	rc    syscall.RawConn // nil: cannot peek, assume alive
	alive bool
	b     [1]byte
	fn    func(fd uintptr) bool
}

func newPeeker(c net.Conn) *peeker {
	if oc, ok := c.(*ownConn); ok {
		c = oc.Conn
	}
	p := &peeker{}
	if sc, ok := c.(syscall.Conn); ok {
		if rc, err := sc.SyscallConn(); err == nil {
			p.rc = rc
		}
	}
	p.fn = func(fd uintptr) bool {
		// Nothing to read (EAGAIN) is the one answer of a live idle
		// connection: 0 bytes is upstream's close, 1 is an unasked answer.
		err := peekOne(fd, p.b[:])
		p.alive = err == syscall.EAGAIN || err == syscall.EWOULDBLOCK
		return true
	}
	return p
}

// ok reports whether the connection is alive.
func (p *peeker) ok() bool {
	if p.rc == nil {
		return true
	}
	p.alive = false
	return p.rc.Read(p.fn) == nil && p.alive
}
