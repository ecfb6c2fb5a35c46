package listen

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"time"

	"github.com/toolgate/toolgate/internal/connqueue"
)

// RecordTypeHandshake is the first byte of a TLS connection.
const RecordTypeHandshake = 0x16

const (
	// HandshakeTimeout bounds reading a client's first bytes, its TLS
	// handshake, and answering a CONNECT.
	HandshakeTimeout = 10 * time.Second
	// maxHelloBytes bounds what is read to find a ClientHello's SNI.
	maxHelloBytes = 64 << 10
)

// prefixConn is a connection whose first bytes were already read; Read
// returns them again first.
type prefixConn struct {
	net.Conn
	r io.Reader
}

// Prefixed returns c reading from r, which holds the bytes already read
// from c and then c's own (io.MultiReader, or a bufio.Reader over c).
func Prefixed(c net.Conn, r io.Reader) net.Conn { return &prefixConn{Conn: c, r: r} }

func (c *prefixConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// CloseWrite half-closes the underlying TCP connection, for tunnels.
func (c *prefixConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return c.Conn.Close()
}

// ReadClientHello reads a TLS ClientHello from r (at most maxHelloBytes)
// with crypto/tls's own parser and returns its SNI ("" when the client
// sent none) and every byte it read, to be replayed.
func ReadClientHello(r io.Reader) (sni string, consumed []byte, err error) {
	var buf bytes.Buffer
	sc := &sniffConn{r: io.TeeReader(io.LimitReader(r, maxHelloBytes), &buf)}
	got := false
	srv := tls.Server(sc, &tls.Config{
		GetConfigForClient: func(h *tls.ClientHelloInfo) (*tls.Config, error) {
			sni, got = h.ServerName, true
			return nil, errHelloRead
		},
	})
	herr := srv.Handshake()
	if !got {
		if herr == nil {
			herr = errors.New("no ClientHello")
		}
		return "", nil, herr
	}
	return sni, buf.Bytes(), nil
}

var errHelloRead = errors.New("ClientHello read")

// sniffConn feeds a TLS server the client's bytes and swallows whatever
// the server writes (the alert that ends the sniffing handshake).
type sniffConn struct{ r io.Reader }

func (c *sniffConn) Read(p []byte) (int, error)       { return c.r.Read(p) }
func (c *sniffConn) Write(p []byte) (int, error)      { return len(p), nil }
func (c *sniffConn) Close() error                     { return nil }
func (c *sniffConn) LocalAddr() net.Addr              { return connqueue.Addr("intercept") }
func (c *sniffConn) RemoteAddr() net.Addr             { return connqueue.Addr("intercept") }
func (c *sniffConn) SetDeadline(time.Time) error      { return nil }
func (c *sniffConn) SetReadDeadline(time.Time) error  { return nil }
func (c *sniffConn) SetWriteDeadline(time.Time) error { return nil }

// LooksLikeHTTP reports whether a connection's first bytes are an HTTP
// request line's method and a space.
func LooksLikeHTTP(br *bufio.Reader) bool {
	for n := 2; n <= 16; n++ {
		b, err := br.Peek(n)
		if err != nil {
			return false
		}
		c := b[n-1]
		if c == ' ' {
			return true
		}
		if c < 'A' || c > 'Z' {
			if c < 'a' || c > 'z' {
				return false
			}
		}
	}
	return false
}

// Splice copies both ways between a client and upstream until both sides
// are done, passing on half-closes.
func Splice(c, up net.Conn) {
	done := make(chan struct{}, 2)
	cp := func(dst, src net.Conn) {
		io.Copy(dst, src)
		if cw, ok := dst.(interface{ CloseWrite() error }); ok {
			cw.CloseWrite()
		} else {
			dst.Close()
		}
		done <- struct{}{}
	}
	go cp(up, c)
	go cp(c, up)
	<-done
	<-done
	c.Close()
	up.Close()
}
