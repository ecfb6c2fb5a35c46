package upstream

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// writeCounter counts the Write calls on the connections it dialled.
type writeCounter struct {
	mu     sync.Mutex
	writes []int // the length of each write, in order
}

type countedConn struct {
	net.Conn
	wc *writeCounter
}

func (c countedConn) Write(p []byte) (int, error) {
	c.wc.mu.Lock()
	c.wc.writes = append(c.wc.writes, len(p))
	c.wc.mu.Unlock()
	return c.Conn.Write(p)
}

func (wc *writeCounter) take() []int {
	wc.mu.Lock()
	defer wc.mu.Unlock()
	w := wc.writes
	wc.writes = nil
	return w
}

// TestUpstreamOneWritePerRequest: a request's head and its held body,
// up to MaxHeldBody, leave in one write, and upstream receives the bytes
// Go's transport sends for it.
func TestUpstreamOneWritePerRequest(t *testing.T) {
	up := startRaw(t, func(int, *http.Request) ([]byte, bool) {
		return []byte("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"), false
	})
	std, _ := transports(t)
	wc := &writeCounter{}
	ft := NewStd(512, nil, nil)
	d := Dialer(&net.Dialer{Timeout: 5 * time.Second}, &Conns{})
	fast := New(ft, func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := d(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return countedConn{c, wc}, nil
	})
	t.Cleanup(fast.CloseIdleConnections)
	h := http.Header{"Content-Type": {"application/json"}, "X-Long": {strings.Repeat("h", 900)}}
	for _, n := range []int{0, 10, 3000, 3100, 4096, 5000, 40 << 10, MaxHeldBody} {
		ctx := context.Background()
		body := bytes.Repeat([]byte("b"), n)
		a := do(ctx, std, "POST", up.url("/big"), body, h)
		sent := up.take()
		b := do(ctx, fast, "POST", up.url("/big"), body, h)
		got := up.take()
		if a.String() != b.String() {
			t.Errorf("%d bytes: answers differ:\nstd:  %s\nfast: %s", n, a, b)
		}
		if len(sent) != 1 || len(got) != 1 || !bytes.Equal(sent[0], got[0]) {
			t.Errorf("%d bytes: upstream received different requests (%d and %d)", n, len(sent), len(got))
		}
		if w := wc.take(); len(w) != 1 {
			t.Errorf("%d bytes: the request left in %d writes %v, want 1", n, len(w), w)
		}
	}
}
