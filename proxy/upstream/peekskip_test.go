package upstream

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

// keptConn returns the one connection pooled for addr.
func keptConn(t *testing.T, fast *Transport, addr string) *h1Conn {
	t.Helper()
	fast.mu.Lock()
	defer fast.mu.Unlock()
	list := fast.idle[addr]
	if len(list) != 1 {
		t.Fatalf("%d connections pooled for %s, want 1", len(list), addr)
	}
	return list[0]
}

// TestUpstreamPeekSkipped: a connection that served a call after being
// reused is used again without the peek while idle less than the bound,
// and peeked again once idle longer.
func TestUpstreamPeekSkipped(t *testing.T) {
	if !canSkipPeek {
		t.Skip("every pooled connection is peeked on " + runtime.GOOS)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Write([]byte("ok"))
	}))
	defer srv.Close()
	_, fast := transports(t)
	fast.peekSkip = time.Minute
	ctx := context.Background()
	for i := 0; i < 5; i++ {
		if o := do(ctx, fast, "POST", srv.URL, []byte("1"), nil); o.Status != 200 || o.Body != "ok" {
			t.Fatalf("call %d: %s", i, o)
		}
	}
	pc := keptConn(t, fast, srv.Listener.Addr().String())
	// The first reuse is peeked; the three after it are not.
	if pc.peeks != 1 || !pc.kept {
		t.Errorf("after 5 calls on one connection: %d peeks (want 1), kept %v", pc.peeks, pc.kept)
	}
	fast.peekSkip = time.Nanosecond
	time.Sleep(time.Millisecond)
	if o := do(ctx, fast, "POST", srv.URL, []byte("1"), nil); o.Status != 200 {
		t.Fatalf("call after the bound: %s", o)
	}
	if pc := keptConn(t, fast, srv.Listener.Addr().String()); pc.peeks != 2 {
		t.Errorf("a connection idle past the bound was not peeked: %d peeks, want 2", pc.peeks)
	}
}

// TestUpstreamUnpeekedStale: on a connection taken without the peek, what
// happens when upstream closed it is what happens after the peek: closed
// while idle, the call goes once on a new connection (POST included);
// closed after reading the call, a POST fails and is not sent again, a GET
// is, exactly as net/http's transport does.
func TestUpstreamUnpeekedStale(t *testing.T) {
	if !canSkipPeek {
		t.Skip("every pooled connection is peeked on " + runtime.GOOS)
	}
	for _, method := range []string{"POST", "GET"} {
		t.Run("closed while idle "+method, func(t *testing.T) {
			var hits atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				hits.Add(1)
				io.Copy(io.Discard, r.Body)
				w.Write([]byte("ok"))
			}))
			defer srv.Close()
			_, fast := transports(t)
			fast.peekSkip = time.Minute
			ctx := context.Background()
			for i := 0; i < 3; i++ {
				if o := do(ctx, fast, method, srv.URL, []byte("1"), nil); o.Status != 200 {
					t.Fatalf("call %d: %s", i, o)
				}
			}
			if pc := keptConn(t, fast, srv.Listener.Addr().String()); !pc.kept {
				t.Fatal("the connection is not kept after three calls")
			}
			srv.CloseClientConnections()
			time.Sleep(20 * time.Millisecond) // the close reaches toolgate's side
			if o := do(ctx, fast, method, srv.URL, []byte("2"), nil); o.Status != 200 || o.Body != "ok" {
				t.Fatalf("call after upstream closed the idle connection: %s", o)
			}
			if n := hits.Load(); n != 4 {
				t.Errorf("upstream handled %d calls, want 4", n)
			}
		})
	}
	// Four calls: the fourth rides a connection taken without the peek.
	closedAfterReading(t, 4, func(fast *Transport) { fast.peekSkip = time.Minute })
}
