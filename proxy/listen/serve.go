package listen

import (
	"context"
	"io"
	"log"
	"net"
	"net/http"
	"time"

	"github.com/toolgate/toolgate/proxy/internal/h1serve"
)

// HTTPServer is what serves a plain listener: net/http's server, or the
// HTTP/1.1 loop (listen.server).
type HTTPServer interface {
	Serve(net.Listener) error
	Shutdown(context.Context) error
}

// NewHTTPServer serves a plain listener with h: by default with the
// HTTP/1.1 loop (h1serve), which hands what it does not serve to a
// net/http server with the same settings; with netHTTP (listen.server:
// net/http), with net/http's server alone. readHeaderTimeout and
// idleTimeout are limits.read_header_timeout and limits.idle_timeout;
// errLog receives the servers' errors.
func NewHTTPServer(netHTTP bool, h http.Handler, readHeaderTimeout, idleTimeout time.Duration, errLog *log.Logger) HTTPServer {
	if netHTTP {
		return &http.Server{
			Handler:           h,
			ReadHeaderTimeout: readHeaderTimeout,
			IdleTimeout:       idleTimeout,
			ErrorLog:          errLog,
		}
	}
	return &h1serve.Server{
		Handler:           h,
		ReadHeaderTimeout: readHeaderTimeout,
		IdleTimeout:       idleTimeout,
		ErrorLog:          errLog,
	}
}

// BodyDeadline bounds reading r's body to d (limits.body_timeout): the
// connection's reads fail once d has passed. It is set when a request's
// handler starts (its headers just read) and cleared as soon as the body
// has been read to its end, so a call that takes longer upstream, or an
// answer that streams for minutes, is not cut when the deadline passes
// (the read in the background, net/http's or h1serve's, which watches
// for the caller going away, would end the request's context). A request without a body gets
// none; nor does a CONNECT, whose connection becomes a tunnel.
//
// Nor does a body the server says it already holds whole (BodyBuffered,
// toolgate's own HTTP/1.1 loop: a declared length, every byte of it read
// from the socket with the head): reading it cannot wait on the caller.
func BodyDeadline(w http.ResponseWriter, r *http.Request, d time.Duration) {
	if d <= 0 || r.Body == nil || r.Body == http.NoBody || bodyBuffered(w) {
		return
	}
	ctl := http.NewResponseController(w)
	if ctl.SetReadDeadline(time.Now().Add(d)) != nil {
		return
	}
	r.Body = &deadlineBody{ReadCloser: r.Body, ctl: ctl}
}

// deadlineBody clears its connection's read deadline when it has been read
// to its end.
type deadlineBody struct {
	io.ReadCloser
	ctl     *http.ResponseController
	cleared bool
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF && !b.cleared {
		b.cleared = true
		_ = b.ctl.SetReadDeadline(time.Time{})
	}
	return n, err
}

// bodyBuffered asks w, or what it wraps, whether the request's body is
// already wholly in the server's buffer.
func bodyBuffered(w http.ResponseWriter) bool {
	for {
		switch t := w.(type) {
		case interface{ BodyBuffered() bool }:
			return t.BodyBuffered()
		case interface{ Unwrap() http.ResponseWriter }:
			w = t.Unwrap()
		default:
			return false
		}
	}
}
