//go:build linux

package rawconn_test

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/toolgate/toolgate/proxy/internal/rawconn"
)

// pair is a connected pair of TCP connections on loopback: a is the one
// under test (wrapped or not), b its peer, always plain.
func pair(t *testing.T, wrap bool) (a net.Conn, b *net.TCPConn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	type res struct {
		c   net.Conn
		err error
	}
	ch := make(chan res, 1)
	go func() {
		c, err := ln.Accept()
		ch <- res{c, err}
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	r := <-ch
	if r.err != nil {
		t.Fatal(r.err)
	}
	t.Cleanup(func() { c.Close(); r.c.Close() })
	a = c
	if wrap {
		a = rawconn.Wrap(c)
		if _, ok := a.(*rawconn.Conn); !ok {
			t.Fatalf("Wrap(%T) = %T, want *rawconn.Conn", c, a)
		}
	}
	return a, r.c.(*net.TCPConn)
}

// outcome is what a scenario saw, with the connection's addresses taken
// out of error texts, so that the plain and the wrapped run compare.
type outcome struct {
	n                  int
	err                string
	eof, closed, dl    bool
	timeout            bool
	reset, pipe, short bool
}

func outcomeOf(c net.Conn, b net.Conn, n int, err error) outcome {
	o := outcome{n: n}
	if err == nil {
		return o
	}
	s := err.Error()
	for _, a := range []net.Addr{c.LocalAddr(), c.RemoteAddr(), b.LocalAddr(), b.RemoteAddr()} {
		s = strings.ReplaceAll(s, a.String(), "ADDR")
	}
	o.err = s
	o.eof = errors.Is(err, io.EOF)
	o.closed = errors.Is(err, net.ErrClosed)
	o.dl = errors.Is(err, os.ErrDeadlineExceeded)
	var ne net.Error
	o.timeout = errors.As(err, &ne) && ne.Timeout()
	o.reset = errors.Is(err, syscall.ECONNRESET)
	o.pipe = errors.Is(err, syscall.EPIPE)
	o.short = errors.Is(err, io.ErrUnexpectedEOF)
	return o
}

// TestSameAsTCPConn runs each scenario on a plain *net.TCPConn and on the
// same kind of connection wrapped, and requires the same results: bytes
// counted, error texts (addresses aside) and what errors.Is and Timeout
// say of them.
func TestSameAsTCPConn(t *testing.T) {
	scenarios := []scenario{
		{"read", func(t *testing.T, a net.Conn, b *net.TCPConn) (int, error) {
			b.Write([]byte("hello"))
			buf := make([]byte, 64)
			n, err := io.ReadAtLeast(a, buf, 5)
			if string(buf[:n]) != "hello" {
				t.Errorf("read %q", buf[:n])
			}
			return n, err
		}},
		{"write", func(t *testing.T, a net.Conn, b *net.TCPConn) (int, error) {
			n, err := a.Write([]byte("hello"))
			buf := make([]byte, 5)
			if _, err := io.ReadFull(b, buf); err != nil || string(buf) != "hello" {
				t.Errorf("peer read %q, %v", buf, err)
			}
			return n, err
		}},
		{"zero-length read", func(t *testing.T, a net.Conn, b *net.TCPConn) (int, error) {
			return a.Read(nil)
		}},
		{"zero-length write", func(t *testing.T, a net.Conn, b *net.TCPConn) (int, error) {
			return a.Write(nil)
		}},
		{"eof after data", func(t *testing.T, a net.Conn, b *net.TCPConn) (int, error) {
			b.Write([]byte("last"))
			b.Close()
			got, err := io.ReadAll(a)
			if string(got) != "last" {
				t.Errorf("read %q", got)
			}
			n, err2 := a.Read(make([]byte, 8))
			if err != nil {
				return len(got), err
			}
			return n, err2
		}},
		{"peer half-closes", func(t *testing.T, a net.Conn, b *net.TCPConn) (int, error) {
			b.CloseWrite()
			return a.Read(make([]byte, 8))
		}},
		{"read deadline", func(t *testing.T, a net.Conn, b *net.TCPConn) (int, error) {
			a.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
			return a.Read(make([]byte, 8))
		}},
		{"read deadline already past", func(t *testing.T, a net.Conn, b *net.TCPConn) (int, error) {
			b.Write([]byte("waiting")) // net does not read once the deadline passed
			time.Sleep(10 * time.Millisecond)
			a.SetReadDeadline(time.Now().Add(-time.Second))
			return a.Read(make([]byte, 8))
		}},
		{"write deadline, peer not reading", func(t *testing.T, a net.Conn, b *net.TCPConn) (int, error) {
			buf := make([]byte, 64<<20) // more than the socket buffers take
			a.SetWriteDeadline(time.Now().Add(50 * time.Millisecond))
			n, err := a.Write(buf)
			if n >= len(buf) {
				t.Errorf("wrote all %d bytes to a peer that reads nothing", n)
			}
			return 0, err // how much fits in the buffers is not the point
		}},
		{"closed", func(t *testing.T, a net.Conn, b *net.TCPConn) (int, error) {
			a.Close()
			return a.Read(make([]byte, 8))
		}},
		{"write after close", func(t *testing.T, a net.Conn, b *net.TCPConn) (int, error) {
			a.Close()
			return a.Write([]byte("x"))
		}},
		{"closed while reading", func(t *testing.T, a net.Conn, b *net.TCPConn) (int, error) {
			time.AfterFunc(20*time.Millisecond, func() { a.Close() })
			return a.Read(make([]byte, 8))
		}},
		{"peer resets", func(t *testing.T, a net.Conn, b *net.TCPConn) (int, error) {
			b.SetLinger(0)
			b.Close()
			time.Sleep(20 * time.Millisecond)
			return a.Read(make([]byte, 8))
		}},
		{"write to a reset peer", func(t *testing.T, a net.Conn, b *net.TCPConn) (int, error) {
			b.SetLinger(0)
			b.Close()
			time.Sleep(20 * time.Millisecond)
			var (
				n   int
				err error
			)
			for range 4 { // the first write may land before the reset is seen
				if n, err = a.Write([]byte("x")); err != nil {
					break
				}
				time.Sleep(5 * time.Millisecond)
			}
			return n, err
		}},
	}
	runAlike(t, scenarios, "net.TCPConn", "wrapped")
}

// scenario is one thing done on a connection pair: a is the end under
// test (plain or wrapped), b its peer.
type scenario struct {
	name string
	run  func(t *testing.T, a net.Conn, b *net.TCPConn) (int, error)
}

// runAlike runs each scenario on a plain connection pair and on a wrapped
// one and requires the same outcome (outcomeOf); plain and wrapped name
// the two in a failure.
func runAlike(t *testing.T, scenarios []scenario, plain, wrapped string) {
	t.Helper()
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			var got [2]outcome
			for i, wrap := range []bool{false, true} {
				a, b := pair(t, wrap)
				n, err := sc.run(t, a, b)
				got[i] = outcomeOf(a, b, n, err)
			}
			if got[0] != got[1] {
				t.Errorf("%s: %+v\n%s: %+v", plain, got[0], wrapped, got[1])
			}
		})
	}
}

// TestStreams sends streams both ways at once through a wrapped
// connection, in writes and reads of random sizes (up to 3 MiB, past the
// socket buffers, so both wait for the poller), with the peer reading
// slowly at times, and checks every byte.
func TestStreams(t *testing.T) {
	a, b := pair(t, true)
	const total = 48 << 20
	rnd := rand.New(rand.NewPCG(1, 2))
	src := make([]byte, total)
	for i := range src {
		src[i] = byte(rnd.Uint32())
	}
	want := sha256.Sum256(src)
	var wg sync.WaitGroup
	send := func(w io.Writer, seed uint64) error {
		r := rand.New(rand.NewPCG(seed, 7))
		for off := 0; off < total; {
			n := min(total-off, 1+r.IntN(3<<20))
			m, err := w.Write(src[off : off+n])
			if err != nil || m != n {
				return errors.Join(err, errors.New("short write"))
			}
			off += n
		}
		return nil
	}
	recv := func(rd io.Reader, seed uint64) ([32]byte, error) {
		r := rand.New(rand.NewPCG(seed, 9))
		h := sha256.New()
		buf := make([]byte, 4<<20)
		for got := 0; got < total; {
			n, err := rd.Read(buf[:1+r.IntN(len(buf))])
			h.Write(buf[:n])
			got += n
			if err != nil {
				return [32]byte{}, err
			}
			if r.IntN(200) == 0 {
				time.Sleep(time.Millisecond)
			}
		}
		return [32]byte(h.Sum(nil)), nil
	}
	errs := make([]error, 4)
	sums := make([][32]byte, 2)
	wg.Go(func() { errs[0] = send(a, 1) })
	wg.Go(func() { errs[1] = send(b, 2) })
	wg.Go(func() { sums[0], errs[2] = recv(b, 3) })
	wg.Go(func() { sums[1], errs[3] = recv(a, 4) })
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	for i, s := range sums {
		if !bytes.Equal(s[:], want[:]) {
			t.Errorf("stream %d arrived different", i)
		}
	}
}

// TestWrapLeavesOthers checks that Wrap wraps non-blocking TCP connections
// only, and that the wrapped connection keeps the TCP connection's other
// methods.
func TestWrapLeavesOthers(t *testing.T) {
	p1, p2 := net.Pipe()
	defer p1.Close()
	defer p2.Close()
	if got := rawconn.Wrap(p1); got != p1 {
		t.Errorf("Wrap(net.Pipe) = %T, want it unchanged", got)
	}
	a, b := pair(t, true)
	for _, m := range []string{"CloseWrite", "ReadFrom", "WriteTo", "SyscallConn", "SetNoDelay"} {
		if !hasMethod(a, m) {
			t.Errorf("wrapped connection lacks %s", m)
		}
	}
	if a.(*rawconn.Conn).TCP() == nil {
		t.Error("TCP() is nil")
	}
	if err := a.(interface{ CloseWrite() error }).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	if n, err := b.Read(make([]byte, 1)); n != 0 || err != io.EOF {
		t.Errorf("peer read after CloseWrite: %d, %v; want 0, EOF", n, err)
	}
}

func hasMethod(c net.Conn, name string) bool {
	switch name {
	case "CloseWrite":
		_, ok := c.(interface{ CloseWrite() error })
		return ok
	case "ReadFrom":
		_, ok := c.(io.ReaderFrom)
		return ok
	case "WriteTo":
		_, ok := c.(io.WriterTo)
		return ok
	case "SyscallConn":
		_, ok := c.(syscall.Conn)
		return ok
	case "SetNoDelay":
		_, ok := c.(interface{ SetNoDelay(bool) error })
		return ok
	}
	return false
}

// TestReadWriteDoNotAllocate checks that a wrapped connection's Read and
// Write allocate nothing: a closure made per call used to escape to the
// heap with what it captured, several allocations per proxied call.
func TestReadWriteDoNotAllocate(t *testing.T) {
	a, b := pair(t, true)
	if _, ok := a.(*rawconn.Conn); !ok {
		t.Fatalf("Wrap gave %T", a)
	}
	msg, buf := []byte("a 24-byte message, here."), make([]byte, 64)
	allocs := testing.AllocsPerRun(200, func() {
		if n, err := a.Write(msg); n != len(msg) || err != nil {
			t.Fatalf("Write = %d, %v", n, err)
		}
		if _, err := io.ReadFull(b, buf[:len(msg)]); err != nil {
			t.Fatal(err)
		}
		if _, err := b.Write(msg); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(a, buf[:len(msg)]); err != nil {
			t.Fatalf("Read: %v", err)
		}
	})
	if allocs != 0 {
		t.Errorf("a Write and a Read of the wrapped connection took %v allocations, want 0", allocs)
	}
}
