// Package rawconn reads and writes toolgate's TCP connections without the
// Go runtime's system call bookkeeping.
//
// Go enters every read(2) and write(2) of a network connection as a
// system call that may block: the goroutine's processor is handed to
// another thread if the call lasts (the runtime's monitor thread retakes
// it), and the first such call after the process was idle wakes the
// monitor thread, which then naps in 20 µs steps until the process is
// idle again. A network connection's descriptor is non-blocking: read(2)
// and write(2) on it return EAGAIN rather than wait, so none of that is
// needed. Where a context switch is dear (a virtual machine), it was a
// large part of each call's cost (docs/performance.md, "Raw socket I/O").
//
// Wrap returns a connection whose Read and Write make the same system
// calls through syscall.RawConn with syscall.RawSyscall: the waiting for
// readiness, the deadlines, Close and the errors are net's own (the
// poller's), and what Read and Write return is what net.TCPConn's return
// for the same socket. Everything else (ReadFrom, WriteTo, CloseWrite,
// SyscallConn, the addresses and options) is the TCP connection's own.
package rawconn

import (
	"io"
	"net"
)

// Conn is a TCP connection whose Read and Write bypass the runtime's
// system call bookkeeping. Its other methods are the TCP connection's.
type Conn struct {
	*net.TCPConn
	raw rawIO
}

// TCP returns the TCP connection underneath.
func (c *Conn) TCP() *net.TCPConn { return c.TCPConn }

// maxRW bounds one read(2) or write(2), as the net package does; a write
// also bounds each of its system calls to maxWrite, so that its
// goroutine can be preempted between two (a raw system call cannot be).
const (
	maxRW    = 1 << 30
	maxWrite = 256 << 10
)

// TwoWriter writes two buffers one after the other, in one system call
// where it can (writev(2)): an answer's head and its body.
type TwoWriter interface {
	WriteTwo(a, b []byte) (int, error)
}

// WriteTwo writes a then b to w: with one writev(2) when w is a TwoWriter,
// with two Writes otherwise. It returns the bytes of both written.
func WriteTwo(w io.Writer, a, b []byte) (int, error) {
	if tw, ok := w.(TwoWriter); ok {
		return tw.WriteTwo(a, b)
	}
	n, err := w.Write(a)
	if err != nil {
		return n, err
	}
	m, err := w.Write(b)
	return n + m, err
}
