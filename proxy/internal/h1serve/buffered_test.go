package h1serve

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// TestBodyBuffered: a body of declared length that came with its head is
// held whole (no read of it can wait on the caller, so no body deadline is
// needed); one still on its way, or chunked, is not; once read, what is
// left is nothing, held.
func TestBodyBuffered(t *testing.T) {
	for _, c := range []struct {
		name   string
		head   string
		later  string // sent after the handler has answered whether the body is held
		before bool   // BodyBuffered before reading the body
	}{
		{"whole", "POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello", "", true},
		{"on its way", "POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhe", "llo", false},
		{"chunked", "POST /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n", "", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			type seen struct{ before, after bool }
			got := make(chan seen, 1)
			asked := make(chan struct{})
			s := &Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				bb := w.(interface{ BodyBuffered() bool })
				var x seen
				x.before = bb.BodyBuffered()
				close(asked)
				io.ReadAll(r.Body)
				x.after = bb.BodyBuffered()
				got <- x
				io.WriteString(w, "ok")
			})}
			addr := startLoop(t, s)
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			io.WriteString(conn, c.head)
			<-asked
			if c.later != "" {
				io.WriteString(conn, c.later)
			}
			conn.SetReadDeadline(time.Now().Add(30 * time.Second))
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			x := <-got
			if x.before != c.before {
				t.Errorf("BodyBuffered before reading = %v, want %v", x.before, c.before)
			}
			if want := c.name != "chunked"; x.after != want {
				t.Errorf("BodyBuffered after reading = %v, want %v", x.after, want)
			}
		})
	}
}
