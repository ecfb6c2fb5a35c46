package upstream

import (
	"io"
	"net"
	"testing"
)

// TestOwnConnHalfCloses checks an upstream connection keeps TCP's
// half-close (tunnels pass a client's FIN on without cutting the answer)
// and leaves the loop registry when closed.
func TestOwnConnHalfCloses(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		b, _ := io.ReadAll(c) // until the client's half-close
		c.Write(append([]byte("got "), b...))
		c.Close()
	}()
	var own Conns
	c, err := Dialer(&net.Dialer{}, &own)(t.Context(), "tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	if !own.Has(c.LocalAddr().String()) {
		t.Fatal("a dialled connection is not registered")
	}
	if _, ok := c.(interface {
		CloseWrite() error
		CloseRead() error
	}); !ok {
		t.Fatal("upstream connections must half-close")
	}
	c.Write([]byte("ping"))
	c.(interface{ CloseWrite() error }).CloseWrite()
	b, err := io.ReadAll(c)
	if err != nil || string(b) != "got ping" {
		t.Errorf("after a half-close: %q, %v; want the answer", b, err)
	}
	c.Close()
	if own.Has(c.LocalAddr().String()) {
		t.Error("a closed connection is still registered")
	}
}
