package h1serve

import (
	"bufio"
	"context"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/proxy/internal/cancelwatch"
)

func startLoop(t *testing.T, s *Server) string {
	t.Helper()
	if s.ErrorLog == nil {
		s.ErrorLog = log.New(io.Discard, "", 0)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve(ln)
	t.Cleanup(func() { s.Close() })
	return ln.Addr().String()
}

// TestCallerGoneCancelsContext checks a request whose caller hangs up
// while the handler waits has its context cancelled, as under net/http,
// with and without a body.
func TestCallerGoneCancelsContext(t *testing.T) {
	for _, raw := range []string{
		"GET /wait HTTP/1.1\r\nHost: a\r\n\r\n",
		"POST /wait HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nabc",
		"POST /wait HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
	} {
		started := make(chan struct{})
		done := make(chan error, 1)
		s := &Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.ReadAll(r.Body)
			// The request's watch (cancelwatch) runs its function when
			// the caller leaves, as context.AfterFunc would.
			watched := make(chan struct{})
			wr := cancelwatch.From(r.Context())
			if wr == nil || !wr.Watch(func() { close(watched) }) {
				close(started)
				done <- errors.New("the request's context has no free watch")
				return
			}
			close(started)
			select {
			case <-r.Context().Done():
				select {
				case <-watched:
					done <- nil
				case <-time.After(20 * time.Second):
					done <- errors.New("the watched function did not run")
				}
			case <-time.After(20 * time.Second):
				done <- context.DeadlineExceeded
			}
		})}
		addr := startLoop(t, s)
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(c, raw)
		<-started
		c.Close()
		if err := <-done; err != nil {
			t.Errorf("%q: after the caller left: %v", raw, err)
		}
	}
}

// TestWatchKeepsPipelinedByte checks the read in the background, started
// while a slow handler runs, keeps the first byte of a pipelined request.
func TestWatchKeepsPipelinedByte(t *testing.T) {
	s := &Server{WatchAfter: time.Millisecond, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			time.Sleep(100 * time.Millisecond)
		}
		io.WriteString(w, r.URL.Path)
	})}
	c := dialLoop(t, s)
	io.WriteString(c, "GET /slow HTTP/1.1\r\nHost: a\r\n\r\n")
	time.Sleep(20 * time.Millisecond) // the watch has started
	io.WriteString(c, "GET /next HTTP/1.1\r\nHost: a\r\n\r\n")
	br := bufio.NewReader(c)
	for _, want := range []string{"/slow", "/next"} {
		res, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		if string(b) != want {
			t.Errorf("answer %q, want %q", b, want)
		}
	}
}

// TestShutdownDrains checks Shutdown waits for a request under way,
// which is answered in full with Connection: close, and closes idle
// connections, on the loop and on a connection handed to net/http.
func TestShutdownDrains(t *testing.T) {
	release := make(chan struct{})
	started := make(chan struct{}, 2)
	s := &Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hold" {
			started <- struct{}{}
			<-release
		}
		io.WriteString(w, "done")
	})}
	addr := startLoop(t, s)
	idle, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	io.WriteString(idle, "GET /x HTTP/1.1\r\nHost: a\r\n\r\n")
	if _, err := http.ReadResponse(bufio.NewReader(idle), nil); err != nil {
		t.Fatal(err)
	}
	answers := make(chan string, 2)
	for _, proto := range []string{"HTTP/1.1", "HTTP/1.0"} {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		io.WriteString(c, "GET /hold "+proto+"\r\nHost: a\r\n\r\n")
		go func() {
			b, _ := io.ReadAll(c)
			answers <- string(b)
		}()
	}
	<-started
	<-started
	shut := make(chan error, 1)
	go func() { shut <- s.Shutdown(context.Background()) }()
	select {
	case err := <-shut:
		t.Fatalf("Shutdown returned %v with requests under way", err)
	case <-time.After(200 * time.Millisecond):
	}
	close(release)
	select {
	case err := <-shut:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Shutdown did not return after the requests ended")
	}
	for range 2 {
		if a := <-answers; !strings.HasSuffix(a, "done") || !strings.Contains(a, "200 OK") {
			t.Errorf("answer %q, want a 200 ending in done", a)
		}
	}
	idle.SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, err := idle.Read(make([]byte, 1)); err == nil {
		t.Errorf("idle connection still open after Shutdown (read %d bytes)", n)
	}
	if served, handed := s.Stats(); served != 2 || handed != 1 {
		t.Errorf("served %d, handed off %d; want 2 and 1", served, handed)
	}
}

// TestWatchEndsWithRequest checks a function left watched on a request's
// context runs when the request ends (its handler returned), as
// context.AfterFunc's would, and that the next request on the connection
// gets a watch of its own.
func TestWatchEndsWithRequest(t *testing.T) {
	ran := make(chan string, 2)
	s := &Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		wr := cancelwatch.From(r.Context())
		if wr == nil || !wr.Watch(func() { ran <- r.URL.Path }) {
			http.Error(w, "no free watch", http.StatusInternalServerError)
			return
		}
		select {
		case p := <-ran:
			http.Error(w, "ran under the handler: "+p, http.StatusInternalServerError)
			return
		default:
		}
		io.WriteString(w, r.URL.Path)
	})}
	c := dialLoop(t, s)
	br := bufio.NewReader(c)
	for _, p := range []string{"/one", "/two"} {
		io.WriteString(c, "GET "+p+" HTTP/1.1\r\nHost: a\r\n\r\n")
		res, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		if res.StatusCode != http.StatusOK || string(b) != p {
			t.Fatalf("%s: %d %q", p, res.StatusCode, b)
		}
		select {
		case got := <-ran:
			if got != p {
				t.Errorf("the watch of %s ran for %s", got, p)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("the watch of %s did not run when its request ended", p)
		}
	}
}

// dialLoop starts s and connects to it; the connection closes with t.
func dialLoop(t *testing.T, s *Server) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", startLoop(t, s))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestHeadDeadlineAfterIdle checks that a kept-alive connection's next
// request has ReadHeaderTimeout for its head, not the idle wait's
// IdleTimeout, whether its first bytes came alone or after empty lines a
// caller may send after a POST (which could pass for a head's end), and
// that a head that arrives whole is served.
func TestHeadDeadlineAfterIdle(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		io.WriteString(w, "ok")
	})
	addr := startLoop(t, &Server{Handler: h, ReadHeaderTimeout: 300 * time.Millisecond, IdleTimeout: time.Minute})
	const first = "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}"
	for _, tc := range []struct{ name, next string }{
		{"head cut short", "GET / HTTP/1.1\r\nHost: x\r\n"},
		{"empty lines first", "\r\n\r\nGET / HTTP/1.1\r\nHost: x\r\n"},
		{"request line cut short", "GET / HT"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			br := bufio.NewReader(c)
			io.WriteString(c, first)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			time.Sleep(50 * time.Millisecond) // the loop is in its idle wait
			io.WriteString(c, tc.next)
			start := time.Now()
			c.SetReadDeadline(time.Now().Add(20 * time.Second))
			// The connection ends, with no answer or with net/http's
			// 400 for a request line it never saw whole.
			got, err := io.ReadAll(br)
			if (err != nil && !isReset(err)) || (len(got) > 0 && !strings.HasPrefix(string(got), "HTTP/1.1 400 ")) {
				t.Fatalf("read %q, %v: want the connection closed", got, err)
			}
			// ReadHeaderTimeout is 300 ms and IdleTimeout a minute: well
			// past the one on a loaded machine, far short of the other.
			if took := time.Since(start); took > 10*time.Second {
				t.Fatalf("closed after %v: the head had no ReadHeaderTimeout", took)
			}
		})
	}
	t.Run("whole head", func(t *testing.T) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		br := bufio.NewReader(c)
		for i := range 3 {
			io.WriteString(c, first)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("request %d: %v", i+1, err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if string(body) != "ok" {
				t.Fatalf("request %d: %q", i+1, body)
			}
			time.Sleep(400 * time.Millisecond) // past ReadHeaderTimeout, idle
		}
	})
}

func isReset(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && strings.Contains(op.Err.Error(), "reset")
}
