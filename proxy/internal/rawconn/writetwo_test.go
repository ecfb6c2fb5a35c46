//go:build linux

package rawconn_test

import (
	"bytes"
	"crypto/sha256"
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/toolgate/toolgate/proxy/internal/rawconn"
)

// TestWriteTwoSameAsTwoWrites runs each scenario with WriteTwo on a plain
// *net.TCPConn (two Writes) and on a wrapped one (writev), and requires the
// same results: the bytes the peer read, the count, the error texts and
// what errors.Is and Timeout say of them.
func TestWriteTwoSameAsTwoWrites(t *testing.T) {
	big := bytes.Repeat([]byte("z"), 8<<20)
	scenarios := []scenario{
		{"head and body", func(t *testing.T, a net.Conn, b *net.TCPConn) (int, error) {
			n, err := rawconn.WriteTwo(a, []byte("HTTP/1.1 200 OK\r\n\r\n"), []byte("body"))
			buf := make([]byte, 23)
			if _, err := io.ReadFull(b, buf); err != nil || string(buf) != "HTTP/1.1 200 OK\r\n\r\nbody" {
				t.Errorf("peer read %q, %v", buf, err)
			}
			return n, err
		}},
		{"empty head", func(t *testing.T, a net.Conn, b *net.TCPConn) (int, error) {
			n, err := rawconn.WriteTwo(a, nil, []byte("body"))
			buf := make([]byte, 4)
			if _, err := io.ReadFull(b, buf); err != nil || string(buf) != "body" {
				t.Errorf("peer read %q, %v", buf, err)
			}
			return n, err
		}},
		{"empty body", func(t *testing.T, a net.Conn, b *net.TCPConn) (int, error) {
			n, err := rawconn.WriteTwo(a, []byte("head"), nil)
			buf := make([]byte, 4)
			if _, err := io.ReadFull(b, buf); err != nil || string(buf) != "head" {
				t.Errorf("peer read %q, %v", buf, err)
			}
			return n, err
		}},
		{"both empty", func(t *testing.T, a net.Conn, b *net.TCPConn) (int, error) {
			return rawconn.WriteTwo(a, nil, []byte{})
		}},
		{"write after close", func(t *testing.T, a net.Conn, b *net.TCPConn) (int, error) {
			a.Close()
			return rawconn.WriteTwo(a, []byte("a"), []byte("b"))
		}},
		{"write deadline, peer not reading", func(t *testing.T, a net.Conn, b *net.TCPConn) (int, error) {
			a.SetWriteDeadline(time.Now().Add(50 * time.Millisecond))
			n, err := rawconn.WriteTwo(a, big[:1<<20], big)
			return min(n, 1), err // how much fits the socket buffers varies
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
				if n, err = rawconn.WriteTwo(a, []byte("x"), []byte("y")); err != nil {
					break
				}
				time.Sleep(5 * time.Millisecond)
			}
			return n, err
		}},
	}
	runAlike(t, scenarios, "two writes", "writeTwo")
}

// TestWriteTwoStreams sends a stream through a wrapped connection in
// WriteTwo calls of random splits and sizes (up to 6 MiB, past the socket
// buffers and maxWrite, so writev writes part and waits for the poller),
// with the peer reading slowly at times, and checks every byte.
func TestWriteTwoStreams(t *testing.T) {
	a, b := pair(t, true)
	const total = 32 << 20
	rnd := rand.New(rand.NewPCG(5, 6))
	src := make([]byte, total)
	for i := range src {
		src[i] = byte(rnd.Uint32())
	}
	want := sha256.Sum256(src)
	var wg sync.WaitGroup
	var werr error
	wg.Go(func() {
		r := rand.New(rand.NewPCG(7, 8))
		for off := 0; off < total; {
			n1 := min(total-off, r.IntN(3<<20))
			n2 := min(total-off-n1, r.IntN(3<<20))
			m, err := rawconn.WriteTwo(a, src[off:off+n1], src[off+n1:off+n1+n2])
			if err != nil || m != n1+n2 {
				werr = err
				if werr == nil {
					werr = io.ErrShortWrite
				}
				return
			}
			off += n1 + n2
		}
	})
	h := sha256.New()
	buf := make([]byte, 1<<20)
	r := rand.New(rand.NewPCG(9, 10))
	for got := 0; got < total; {
		n, err := b.Read(buf[:1+r.IntN(len(buf))])
		h.Write(buf[:n])
		got += n
		if err != nil {
			t.Fatal(err)
		}
		if r.IntN(100) == 0 {
			time.Sleep(time.Millisecond)
		}
	}
	wg.Wait()
	if werr != nil {
		t.Fatal(werr)
	}
	if !bytes.Equal(h.Sum(nil), want[:]) {
		t.Error("the stream arrived different")
	}
}
