// Package connqueue is a net.Listener whose connections are handed to it
// by the program itself rather than accepted from the network: how a
// server (net/http's, say) is made to serve connections that another part
// of the program accepted and read from first.
package connqueue

import (
	"net"
	"sync"
)

// Listener yields the connections Push hands it, one Accept each.
type Listener struct {
	ch   chan net.Conn
	done chan struct{}
	once sync.Once
	addr Addr
}

// New returns a Listener whose Addr is name.
func New(name string) *Listener {
	return &Listener{ch: make(chan net.Conn), done: make(chan struct{}), addr: Addr(name)}
}

// Push hands c to the next Accept, waiting for one; it reports false, and
// leaves c to the caller, once the Listener is closed.
func (l *Listener) Push(c net.Conn) bool {
	select {
	case l.ch <- c:
		return true
	case <-l.done:
		return false
	}
}

// Accept returns the next connection pushed, or net.ErrClosed once the
// Listener is closed.
func (l *Listener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ch:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

// Close ends Accept and Push; it may be called more than once.
func (l *Listener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

// Addr returns the Listener's name as its address.
func (l *Listener) Addr() net.Addr { return l.addr }

// Addr is a name standing for an address where there is none: its
// network and its string are the name.
type Addr string

// Network returns the name.
func (a Addr) Network() string { return string(a) }

// String returns the name.
func (a Addr) String() string { return string(a) }
