// Package h1serve serves HTTP/1.1 on plain connections with the handler
// run on the connection's own goroutine and without the read in the
// background that net/http's server starts for every request, so a call
// passes between threads as few times as possible.
//
// A request head in a plain subset of HTTP/1.1 (a token method, an
// origin-form or http:// target, token names, values of visible ASCII,
// CRLF lines, one Host, at most one Content-Length of digits, no
// Transfer-Encoding or Pragma, the whole head already buffered) is read
// in place by readHead, with a handful of allocations; every other head
// (chunked bodies, obs-fold, LF-only lines, the smuggling classics, a
// head split across reads) is parsed by the standard library
// (http.ReadRequest), as the reference: readHead gives the Request
// ReadRequest gives, and a fuzz test (FuzzRequestHead) holds it to that.
// Answers are framed exactly as net/http's server frames them for the
// same handler: the status line, Date, Content-Length or chunked
// encoding, Content-Type sniffing, Connection: close, HEAD, 1xx answers,
// trailers, the unread request body (up to 256 KiB discarded before the
// connection is reused, else it is closed), flushes, panics. A
// differential test and a fuzz test compare the bytes with net/http's.
//
// What the loop does not serve it hands, at a request boundary and with
// the bytes it had read replayed, to a net/http server with the same
// handler and limits: CONNECT, Upgrade, Expect, "*", any version but HTTP/1.1,
// a request net/http would refuse or one whose Host header the loop
// cannot see (ReadRequest drops it), a header over the limit. Such a
// connection stays with net/http to its end.
//
// A request's context is cancelled when its caller goes away, as with
// net/http, but the connection is watched only once a request has run for
// WatchAfter (to twice that): a call that takes longer (a slow upstream,
// a held approval, a streamed answer) is watched by the same one-byte
// read in the background net/http uses; a quick one never pays for it.
// One scanner per server, asleep when no request runs, looks at the
// connections every WatchAfter; a request arms no timer.
//
// The ResponseWriter offers what toolgate's handlers use: http.Flusher,
// io.ReaderFrom, io.StringWriter, and through http.ResponseController
// FlushError, SetReadDeadline, SetWriteDeadline and EnableFullDuplex. It
// is not an http.Hijacker (CONNECT and Upgrade, which hijack, go to
// net/http) nor an http.CloseNotifier, and http.MaxBytesReader cannot ask
// it to close the connection (net/http's hook for that is unexported):
// handlers served here bound bodies themselves, as toolgate's do.
package h1serve

import (
	"context"
	"errors"
	"log"
	"math/rand/v2"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/toolgate/toolgate/internal/connqueue"
)

// DefaultWatchAfter is how long a request runs before its connection is
// watched for the caller going away, when Server.WatchAfter is zero.
const DefaultWatchAfter = 10 * time.Millisecond

// Server serves HTTP/1.1 connections. Its zero value is not usable: set
// Handler. Fields must not change once Serve has been called.
type Server struct {
	// Handler answers every request. Required.
	Handler http.Handler
	// ReadHeaderTimeout bounds reading a request's header, from its first
	// byte (from the connection's start for the first request), as
	// http.Server's does. Default 0: no bound.
	ReadHeaderTimeout time.Duration
	// IdleTimeout bounds the wait for the next request on a kept-alive
	// connection. Default 0: no bound (http.Server's falls back to its
	// ReadTimeout, which this server does not have).
	IdleTimeout time.Duration
	// MaxHeaderBytes bounds a request's header as http.Server's does.
	// Default 0: http.DefaultMaxHeaderBytes (1 MiB).
	MaxHeaderBytes int
	// ErrorLog receives what net/http would log (handler panics, a
	// superfluous WriteHeader). Default nil: the log package's logger.
	ErrorLog *log.Logger
	// WatchAfter is how long a request runs before its connection is
	// watched for the caller going away. Default 0: DefaultWatchAfter.
	WatchAfter time.Duration

	initOnce sync.Once
	fallback *http.Server
	handoff  *connqueue.Listener // what the fallback net/http server serves: the connections the loop hands over
	baseCtx  context.Context
	fbOnce   sync.Once
	fbDone   chan struct{}

	shutting  atomic.Bool
	scanning  atomic.Bool  // the scanner runs
	served    atomic.Int64 // requests the loop served
	handedOff atomic.Int64 // connections handed to net/http
	mu        sync.Mutex
	lns       map[*net.Listener]struct{}
	conns     map[*conn]struct{}
}

func (s *Server) init() {
	s.initOnce.Do(func() {
		s.fallback = &http.Server{
			Handler:           s.Handler,
			ReadHeaderTimeout: s.ReadHeaderTimeout,
			IdleTimeout:       s.IdleTimeout,
			MaxHeaderBytes:    s.MaxHeaderBytes,
			ErrorLog:          s.ErrorLog,
		}
		s.handoff = connqueue.New("h1serve-handoff")
		s.fbDone = make(chan struct{})
		s.baseCtx = context.WithValue(context.Background(), http.ServerContextKey, s.fallback)
		s.lns = make(map[*net.Listener]struct{})
		s.conns = make(map[*conn]struct{})
	})
}

// Fallback returns the net/http server connections are handed to. It is
// for tests and for hooks that need an *http.Server; do not serve on it.
func (s *Server) Fallback() *http.Server {
	s.init()
	return s.fallback
}

func (s *Server) startFallback() {
	s.fbOnce.Do(func() {
		go func() {
			defer close(s.fbDone)
			_ = s.fallback.Serve(s.handoff)
		}()
	})
}

// Stats returns how many requests the loop has served and how many
// connections it has handed to net/http.
func (s *Server) Stats() (served, handedOff int64) {
	return s.served.Load(), s.handedOff.Load()
}

func (s *Server) handler() http.Handler {
	if s.Handler == nil {
		return http.DefaultServeMux
	}
	return s.Handler
}

func (s *Server) logf(format string, args ...any) {
	if s.ErrorLog != nil {
		s.ErrorLog.Printf(format, args...)
	} else {
		log.Printf(format, args...)
	}
}

func (s *Server) maxHeaderBytes() int64 {
	if s.MaxHeaderBytes > 0 {
		return int64(s.MaxHeaderBytes)
	}
	return http.DefaultMaxHeaderBytes
}

// initialReadLimit is net/http's: the header limit plus 4096 bytes of
// slack for the request line and bufio's reads.
func (s *Server) initialReadLimit() int64 { return s.maxHeaderBytes() + 4096 }

func (s *Server) watchAfter() time.Duration {
	if s.WatchAfter > 0 {
		return s.WatchAfter
	}
	return DefaultWatchAfter
}

// Serve accepts connections on ln and serves each on its own goroutine.
// It returns http.ErrServerClosed after Shutdown or Close, else the
// listener's error.
func (s *Server) Serve(ln net.Listener) error {
	s.init()
	if !s.trackListener(&ln, true) {
		return http.ErrServerClosed
	}
	defer s.trackListener(&ln, false)
	s.startFallback()
	var delay time.Duration
	for {
		rw, err := ln.Accept()
		if err != nil {
			if s.shutting.Load() {
				return http.ErrServerClosed
			}
			var ne net.Error
			//lint:ignore SA1019 net/http's Serve retries the same errors.
			if errors.As(err, &ne) && ne.Temporary() {
				if delay == 0 {
					delay = 5 * time.Millisecond
				} else {
					delay *= 2
				}
				delay = min(delay, time.Second)
				s.logf("http: Accept error: %v; retrying in %v", err, delay)
				time.Sleep(delay)
				continue
			}
			return err
		}
		delay = 0
		c := newConn(s, rw)
		if !s.trackConn(c, true) {
			rw.Close()
			continue
		}
		go c.serve(s.baseCtx)
	}
}

func (s *Server) trackListener(ln *net.Listener, add bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if add {
		if s.shutting.Load() {
			return false
		}
		s.lns[ln] = struct{}{}
	} else {
		delete(s.lns, ln)
	}
	return true
}

func (s *Server) trackConn(c *conn, add bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if add {
		if s.shutting.Load() {
			return false
		}
		s.conns[c] = struct{}{}
	} else {
		delete(s.conns, c)
	}
	return true
}

func (s *Server) closeListenersLocked() error {
	var err error
	for ln := range s.lns {
		if cerr := (*ln).Close(); cerr != nil && err == nil {
			err = cerr
		}
		delete(s.lns, ln)
	}
	return err
}

// Shutdown stops accepting connections, closes idle ones, and waits for
// the others (the loop's and those handed to net/http) to finish their
// request, or for ctx to end, as http.Server's Shutdown does.
func (s *Server) Shutdown(ctx context.Context) error {
	s.init()
	s.shutting.Store(true)
	s.mu.Lock()
	lnerr := s.closeListenersLocked()
	s.mu.Unlock()
	fberr := make(chan error, 1)
	go func() { fberr <- s.fallback.Shutdown(ctx) }()

	base := time.Millisecond
	next := func() time.Duration {
		d := base + time.Duration(rand.Int64N(int64(base/10)+1))
		base = min(2*base, 500*time.Millisecond)
		return d
	}
	timer := time.NewTimer(next())
	defer timer.Stop()
	for !s.closeIdleConns() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-timer.C:
			timer.Reset(next())
		}
	}
	if err := <-fberr; err != nil {
		return err
	}
	return lnerr
}

// Close closes the listeners and every connection at once, as
// http.Server's Close does.
func (s *Server) Close() error {
	s.init()
	s.shutting.Store(true)
	s.mu.Lock()
	err := s.closeListenersLocked()
	for c := range s.conns {
		c.rwc.Close()
		delete(s.conns, c)
	}
	s.mu.Unlock()
	if ferr := s.fallback.Close(); ferr != nil && err == nil {
		err = ferr
	}
	return err
}

// closeIdleConns closes idle connections and reports whether none is left.
func (s *Server) closeIdleConns() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	quiescent := true
	now := time.Now().Unix()
	for c := range s.conns {
		st, since := c.getState()
		if st == http.StateNew && since < now-5 {
			st = http.StateIdle
		}
		if st != http.StateIdle || since == 0 {
			quiescent = false
			continue
		}
		c.rwc.Close()
		delete(s.conns, c)
	}
	return quiescent
}

// ensureScanner starts the scanner unless it runs.
func (s *Server) ensureScanner() {
	if !s.scanning.Load() && s.scanning.CompareAndSwap(false, true) {
		go s.scan()
	}
}

// scan looks at every connection each WatchAfter, so a request running
// at two looks in a row (for WatchAfter to twice that) gets its
// connection watched. It stops when no request runs; the next request
// starts it again. One sleep per WatchAfter, not a timer per request: a
// timer armed per request would wake the network poller's thread.
func (s *Server) scan() {
	for {
		time.Sleep(s.watchAfter())
		if s.lookAll() {
			continue
		}
		s.scanning.Store(false)
		// A request that started before the Store saw the scanner
		// running and did not start another: look once more.
		if !s.lookAll() || !s.scanning.CompareAndSwap(false, true) {
			return
		}
	}
}

// lookAll looks at every connection and reports whether any request runs.
func (s *Server) lookAll() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	running := false
	for c := range s.conns {
		if c.look() {
			running = true
		}
	}
	return running
}

// replayConn is a connection handed to net/http: the bytes the loop had
// read from it come first.
type replayConn struct {
	net.Conn
	replay []byte
}

func (c *replayConn) Read(p []byte) (int, error) {
	if len(c.replay) > 0 {
		n := copy(p, c.replay)
		c.replay = c.replay[n:]
		return n, nil
	}
	return c.Conn.Read(p)
}
