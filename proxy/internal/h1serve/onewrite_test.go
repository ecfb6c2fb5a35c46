package h1serve

import (
	"bufio"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/toolgate/toolgate/proxy/internal/rawconn"
)

// countingConn counts the writes made on a raw connection, WriteTwo's
// included.
type countingConn struct {
	net.Conn
	mu     sync.Mutex
	writes int
}

func (c *countingConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	c.writes++
	c.mu.Unlock()
	return c.Conn.Write(p)
}

func (c *countingConn) WriteTwo(a, b []byte) (int, error) {
	c.mu.Lock()
	c.writes++
	c.mu.Unlock()
	return rawconn.WriteTwo(c.Conn, a, b)
}

func (c *countingConn) take() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.writes
	c.writes = 0
	return n
}

type countingListener struct {
	net.Listener
	conns chan *countingConn
}

func (l countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	cc := &countingConn{Conn: rawconn.Wrap(c)}
	l.conns <- cc
	return cc, nil
}

// TestAnswerInOneWrite: an answer whose length is known leaves in one
// write, its head and body together, however long its body (up to what
// the socket takes at once), as a small one does.
func TestAnswerInOneWrite(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cl := countingListener{ln, make(chan *countingConn, 1)}
	srv := &Server{Handler: diffHandler(), ReadHeaderTimeout: 10 * time.Second, ErrorLog: log.New(io.Discard, "", 0)}
	go srv.Serve(cl)
	defer srv.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	br := bufio.NewReader(c)
	var sc *countingConn
	for _, tc := range []struct {
		path   string
		writes int
	}{
		{"/cl", 1},
		{"/json", 1},
		{"/big-cl", 1},   // 5,000 bytes: past the 4 KiB buffer
		{"/big-cl-3", 2}, // three Writes of 4,000 bytes: the head with the first, the second with the third
		{"/big", 2},      // chunked: unchanged
	} {
		fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: a\r\n\r\n", tc.path)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("%s: %v", tc.path, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if sc == nil {
			sc = <-cl.conns
		}
		if n := sc.take(); n != tc.writes {
			t.Errorf("%s: the answer left in %d writes, want %d", tc.path, n, tc.writes)
		}
	}
}
