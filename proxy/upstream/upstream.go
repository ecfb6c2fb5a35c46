// Package upstream holds the transport that sends toolgate's calls to
// upstream (a fast path for plain HTTP/1.1 beside net/http's transport),
// the dialer every upstream connection goes through, the registry of those
// connections that catches a routing loop, and the hook of the dial guard.
// Its fast path writes requests and parses answer heads itself for the
// messages it is sure of, with net/http's own framing for the rest (raw.go).
// It knows nothing of tools, calls or the configuration: what the dial
// guard refuses is decided by its caller (a Guard in the dial's context).
// It must never import proxy, nor anything that proxy must not link (the
// policies implementations, sink).
package upstream

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/http/httpguts"

	"github.com/toolgate/toolgate/internal/monoclock"
	"github.com/toolgate/toolgate/proxy/internal/cancelwatch"
)

// Transport sends calls upstream. A plain-HTTP call (http://)
// whose body toolgate holds in memory, or that has none, is written and
// its answer read on the calling goroutine, over a pooled keep-alive
// connection. Its request is written and its answer's head parsed by
// toolgate's own framing (writeRequest and parseHead, raw.go), which take
// only a conservative subset they write and read exactly as net/http does
// (a request's bytes are Request.Write's; an answer is the *http.Response
// http.ReadResponse makes of it, body framing included) and hand anything
// else to Request.Write and http.ReadResponse as before; net/http's
// framing cost more CPU than the rest of the forwarding and ~10
// allocations per call. Go's http.Transport runs two goroutines per
// connection (a reader and a writer), so each call through it passes
// between three goroutines and, on an idle core, wakes a thread at each
// hand-off; measured from outside that was most of the latency toolgate
// added at one connection (docs/performance.md). Every other call (HTTPS
// and HTTP/2, a body streamed from the caller, Expect, Upgrade, trailers, a
// request net/http would refuse) goes through std, the shared
// http.Transport, unchanged.
//
// The fast path keeps http.Transport's contract where a caller can see it:
// the same bytes go upstream; a connection is reused only after its answer's
// body was read to its end with nothing left over, and never after
// Connection: close (either way), an HTTP/1.0 answer without keep-alive, or
// a body that ends with the connection; 1xx answers are skipped, and all the heads
// read before the final one's end are bounded as in net/http
// (MaxResponseHeaderBytes, 10 MiB by default); HEAD, 204 and 304 answers have no body; the request's
// context (the tool's timeout, the caller going away) bounds the dial, the
// exchange and the body, and its error is what a read or write it cut off
// returns; a pooled connection is checked before use (a peer that closed it
// is seen without sending anything, as http.Transport's reader sees it;
// on Linux a connection that kept alive before and was idle less than
// peekSkipWithin is not, and a close found by the call that upstream sent
// before receiving any of it counts as seen before), and
// a call that failed on a reused connection before any byte of its answer
// was read is sent once more on a new connection only when nothing of it
// was written, or when net/http would send it again too (no body, and GET,
// HEAD, OPTIONS, TRACE or an Idempotency-Key header): a POST upstream may
// have acted on is never sent twice. Connections are
// pooled by the address dialled, so a call's headers (injected secrets
// included) go only to the connection of its own origin.
type Transport struct {
	std            *http.Transport
	dial           DialFunc
	maxIdlePerHost int
	maxIdle        int
	idleTimeout    time.Duration
	peekSkip       time.Duration // peekSkipWithin; tests change it

	mu     sync.Mutex
	idle   map[string][]*h1Conn // by poolKey, most recently used last
	nidle  int
	sweep  *time.Timer // closes connections idle too long; nil when idle is empty
	closed bool        // close ran: nothing is pooled any more
}

// New wraps std, sharing its pool limits and idle timeout; dial connects
// the fast path's connections (std's own DialContext, as a rule).
func New(std *http.Transport, dial DialFunc) *Transport {
	return &Transport{
		std: std, dial: dial,
		maxIdlePerHost: std.MaxIdleConnsPerHost, maxIdle: std.MaxIdleConns, idleTimeout: std.IdleConnTimeout,
		peekSkip: peekSkipWithin,
		idle:     map[string][]*h1Conn{},
	}
}

// MaxHeldBody is the largest in-memory body the fast path sends: it is
// written before the answer is read, so a larger one could block on an
// upstream that answers without reading it; those go through std, which
// reads while it writes.
const MaxHeldBody = 64 << 10

// headRoom is the room a request's head is given beside its held body
// in one write.
const headRoom = 1 << 10

// bigWriters are the buffers of the requests whose held body and head do
// not fit a connection's own (4 KiB): MaxHeldBody and a head of up to
// 8 KiB. Only calls under way hold one.
var bigWriters = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, MaxHeldBody+8<<10) }}

// RoundTrip sends a call without a held body (see RoundTripHeld).
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	return t.RoundTripHeld(req, nil)
}

// RoundTripHeld sends req upstream. held, when not nil, is the request's body
// (req.Body reads it): toolgate read it, so it can be sent again.
func (t *Transport) RoundTripHeld(req *http.Request, held *bytes.Reader) (*http.Response, error) {
	ctx := req.Context()
	cc := lazy(ctx)
	if !t.fast(req, held) {
		if cc != nil {
			cc.Arm()
		}
		return t.std.RoundTrip(req)
	}
	addr := hostPort(req.URL)
	key := addr
	if d := dialAddr(ctx); d != "" {
		key = addr + "\x00" + d
	}
	for attempt := 0; ; attempt++ {
		pc, err := t.get(ctx, key, addr, cc)
		if err != nil {
			if ctx.Err() != nil {
				return nil, context.Cause(ctx)
			}
			if cc != nil && !time.Now().Before(cc.deadline) {
				return nil, context.DeadlineExceeded
			}
			return nil, err
		}
		var size int64
		if held != nil {
			size = held.Size()
		}
		resp, retry, err := t.exchange(ctx, pc, req, size, cc)
		if err == nil {
			return resp, nil
		}
		if !retry || attempt > 0 || ctx.Err() != nil {
			return nil, err
		}
		if held != nil {
			held.Seek(0, io.SeekStart)
		}
	}
}

// hostPort is the address a URL's call dials:
// net.JoinHostPort(u.Hostname(), u.Port() or "80"), which is u.Host itself
// when it names a port and a host without a colon (no brackets to add).
func hostPort(u *url.URL) string {
	host, port := u.Hostname(), u.Port()
	if port != "" && len(u.Host) == len(host)+1+len(port) && u.Host[:len(host)] == host && !strings.Contains(host, ":") {
		return u.Host
	}
	return net.JoinHostPort(host, portOr(port, "80"))
}

func portOr(port, def string) string {
	if port == "" {
		return def
	}
	return port
}

// fast reports whether req can take the fast path.
func (t *Transport) fast(req *http.Request, held *bytes.Reader) bool {
	u := req.URL
	if u == nil || u.Scheme != "http" || u.Host == "" || t.std.Proxy != nil || t.std.DisableKeepAlives {
		return false
	}
	switch {
	case req.Body == nil || req.Body == http.NoBody:
	case held != nil && held.Size() <= MaxHeldBody:
	default:
		return false
	}
	if len(req.Trailer) > 0 || !validMethod(req.Method) || !isASCII(u.Host) {
		return false
	}
	for k, vs := range req.Header {
		if !httpguts.ValidHeaderFieldName(k) {
			return false
		}
		switch {
		case strings.EqualFold(k, "Expect"), strings.EqualFold(k, "Upgrade"), strings.EqualFold(k, "Connection"):
			return false
		}
		for _, v := range vs {
			if !httpguts.ValidHeaderFieldValue(v) {
				return false
			}
		}
	}
	return true
}

// validMethod is net/http's rule: an empty method (GET) or a token.
func validMethod(m string) bool {
	if m == "" {
		return true
	}
	for i := 0; i < len(m); i++ {
		if !httpguts.IsTokenRune(rune(m[i])) {
			return false
		}
	}
	return true
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// replayable is net/http's rule for sending a request again after its
// connection failed once it was written: no body (or one it can get
// again), and an idempotent method or an idempotency key.
func replayable(req *http.Request) bool {
	if req.Body != nil && req.Body != http.NoBody && req.GetBody == nil {
		return false
	}
	switch req.Method {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
		return true
	}
	_, k1 := req.Header["Idempotency-Key"]
	_, k2 := req.Header["X-Idempotency-Key"]
	return k1 || k2
}

// h1Conn is one upstream connection of the fast path. It counts what it
// wrote and read, which decides whether a failed call may be sent again.
type h1Conn struct {
	conn    net.Conn
	peek    *peeker
	br      *bufio.Reader
	bw      *bufio.Writer
	key     string
	reused  bool
	idleAt  int64 // monoclock.Now() when pooled
	written int64
	read    int64
	limit   int64 // bytes the answer's heads may still take; < 0: no limit
	maxHead int64
	// kept says an answer on it was read to its end after it was reused:
	// upstream keeps its connections open after answering.
	kept bool
	// unpeeked says it was taken from the pool without the peek
	// (peekSkipWithin).
	unpeeked bool
	// sent counts the bytes written on it before the current call.
	sent int64
	// peeks counts the peeks before its reuses (for tests).
	peeks int
	// abort cuts off a read or write under way: the AfterFunc of each
	// call's context, made once per connection.
	abort func()
	// watch is the caller's request's watch that runs abort, when the
	// call uses it; unwatch (made once) takes abort back from it.
	watch   *cancelwatch.Context
	unwatch func() bool
	// timed says the connection's deadline is the call's (a CallContext's
	// the fast path keeps); it is cleared before the connection is pooled.
	timed bool
}

// peekSkipWithin is how long a pooled connection may have been idle and
// still be used without the peek, when it already served a call after
// being reused (kept) and its last answer was read to its end by its
// framing (the only way a connection is pooled). Within it, a connection
// upstream closed meanwhile is found by the call's first read instead: a
// close that did not acknowledge any byte of the call (upstream closed
// before the call reached it) sends the call again on a new connection,
// as the peek would have; any other failure is the call's, as after the
// peek. Servers close idle connections after seconds (Node and uvicorn 5 s,
// gunicorn 2 s), so within it a close is a rare race, and a connection in
// steady use skips one system call per call. Bytes upstream sends unasked
// after a complete answer, apart from it, are then read as the next call's
// answer instead of closing the connection (docs/performance.md).
const peekSkipWithin = 100 * time.Millisecond

func (c *h1Conn) Read(p []byte) (int, error) {
	if c.limit >= 0 {
		if c.limit == 0 {
			return 0, fmt.Errorf("read limit of %d bytes exhausted", c.maxHead)
		}
		if int64(len(p)) > c.limit {
			p = p[:c.limit]
		}
	}
	n, err := c.conn.Read(p)
	c.read += int64(n)
	if c.limit >= 0 {
		c.limit -= int64(n)
	}
	return n, err
}

func (c *h1Conn) Write(p []byte) (int, error) {
	n, err := c.conn.Write(p)
	c.written += int64(n)
	return n, err
}

// get returns a pooled connection to key, or dials addr. The dial of a
// call whose deadline the fast path keeps (cc) gets a deadline context.
func (t *Transport) get(ctx context.Context, key, addr string, cc *CallContext) (*h1Conn, error) {
	now := monoclock.Now()
	for {
		t.mu.Lock()
		list := t.idle[key]
		if len(list) == 0 {
			t.mu.Unlock()
			break
		}
		pc := list[len(list)-1]
		list[len(list)-1] = nil
		t.idle[key] = list[:len(list)-1]
		t.nidle--
		t.mu.Unlock()
		idle := time.Duration(now - pc.idleAt)
		pc.unpeeked = pc.kept && idle < t.peekSkip && canSkipPeek
		if !pc.unpeeked {
			pc.peeks++
		}
		if idle > t.idleTimeout || (!pc.unpeeked && !pc.peek.ok()) {
			pc.conn.Close()
			continue
		}
		pc.sent += pc.written
		pc.reused, pc.written, pc.read = true, 0, 0
		return pc, nil
	}
	if cc != nil {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, cc.deadline)
		defer cancel()
	}
	conn, err := t.dial(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	maxHead := t.std.MaxResponseHeaderBytes
	if maxHead == 0 {
		maxHead = 10 << 20 // net/http's default
	}
	pc := &h1Conn{conn: conn, peek: newPeeker(conn), key: key, limit: -1, maxHead: maxHead}
	pc.abort = func() { pc.conn.SetDeadline(aLongTimeAgo) }
	pc.unwatch = func() bool {
		w := pc.watch
		pc.watch = nil
		return w.Unwatch()
	}
	pc.br = bufio.NewReaderSize(pc, 4<<10)
	pc.bw = bufio.NewWriterSize(pc, 4<<10)
	return pc, nil
}

// put pools a connection whose last answer was read to its end, or closes
// it when the pool is full or closed.
func (t *Transport) put(pc *h1Conn) {
	pc.idleAt = monoclock.Now()
	pc.kept = pc.kept || pc.reused
	t.mu.Lock()
	if t.closed || t.nidle >= t.maxIdle || len(t.idle[pc.key]) >= t.maxIdlePerHost {
		t.mu.Unlock()
		pc.conn.Close()
		return
	}
	t.idle[pc.key] = append(t.idle[pc.key], pc)
	t.nidle++
	if t.sweep == nil {
		t.sweep = time.AfterFunc(t.idleTimeout/2, t.sweepIdle)
	}
	t.mu.Unlock()
}

// sweepIdle closes pooled connections idle longer than the idle timeout,
// or that upstream closed, and runs again while any stay pooled.
func (t *Transport) sweepIdle() {
	now := monoclock.Now()
	var dead []*h1Conn
	t.mu.Lock()
	for key, list := range t.idle {
		kept := list[:0]
		for _, pc := range list {
			if time.Duration(now-pc.idleAt) > t.idleTimeout || !pc.peek.ok() {
				dead = append(dead, pc)
				continue
			}
			kept = append(kept, pc)
		}
		clear(list[len(kept):])
		t.nidle -= len(list) - len(kept)
		if len(kept) == 0 {
			delete(t.idle, key)
		} else {
			t.idle[key] = kept
		}
	}
	if t.nidle > 0 && !t.closed {
		t.sweep.Reset(t.idleTimeout / 2)
	} else {
		t.sweep = nil
	}
	t.mu.Unlock()
	for _, pc := range dead {
		pc.conn.Close()
	}
}

// CloseIdleConnections closes every pooled connection, the fast path's and
// std's; connections in use go back to the pool when their call ends, as
// with http.Transport.
func (t *Transport) CloseIdleConnections() { t.closeIdle(false) }

// Close closes every pooled connection and pools none from now on: a call
// that ends after it closes its connection (Server.Shutdown).
func (t *Transport) Close() { t.closeIdle(true) }

func (t *Transport) closeIdle(forever bool) {
	t.mu.Lock()
	idle := t.idle
	t.idle, t.nidle = map[string][]*h1Conn{}, 0
	t.closed = t.closed || forever
	if t.sweep != nil {
		t.sweep.Stop()
		t.sweep = nil
	}
	t.mu.Unlock()
	for _, list := range idle {
		for _, pc := range list {
			pc.conn.Close()
		}
	}
	t.std.CloseIdleConnections()
}

// aLongTimeAgo is a deadline in the past: it ends a read or write under way.
var aLongTimeAgo = time.Unix(1, 0)

// exchange writes req on pc and reads its answer's head. retry says the
// call failed on a reused connection in a way net/http would retry.
func (t *Transport) exchange(ctx context.Context, pc *h1Conn, req *http.Request, bodySize int64, cc *CallContext) (*http.Response, bool, error) {
	if cc != nil {
		// Before the AfterFunc: an abort it runs comes after, and wins.
		pc.conn.SetDeadline(cc.deadline)
		pc.timed = true
	}
	// pc.abort is pc's own: a connection goes back to the pool only when
	// stop reports the call's AfterFunc did not run and never will. The
	// server's watch of the caller's request, when ctx ends with it, does
	// what AfterFunc does without its allocations (cancelwatch).
	var stop func() bool
	if w := cancelwatch.From(ctx); w != nil && w.Watch(pc.abort) {
		pc.watch, stop = w, pc.unwatch
	} else {
		stop = context.AfterFunc(ctx, pc.abort)
	}
	fail := func(op string, err error) (*http.Response, bool, error) {
		stop()
		// Taken without the peek: a close that came before any byte of
		// the call was acknowledged is what the peek would have seen.
		notSent := pc.unpeeked && pc.read == 0 && errors.Is(err, io.EOF) && pc.peek.unacked(pc.sent)
		pc.conn.Close()
		if ctx.Err() != nil {
			return nil, false, context.Cause(ctx)
		}
		if pc.timed && errors.Is(err, os.ErrDeadlineExceeded) {
			// The call's deadline, kept by the connection: what an
			// armed context's cut would return, and never retried.
			return nil, false, context.DeadlineExceeded
		}
		retry := pc.reused && pc.read == 0 && (pc.written == 0 || notSent || replayable(req))
		return nil, retry, fmt.Errorf("upstream %s: %w", op, err)
	}
	// The head and a held body leave in one write(2): a body the
	// connection's buffer would split goes through a buffer that holds
	// both (the head is rarely over headRoom).
	bw := pc.bw
	if bodySize > int64(pc.bw.Size()-headRoom) {
		bw = bigWriters.Get().(*bufio.Writer)
		bw.Reset(pc)
		defer func() { bw.Reset(nil); bigWriters.Put(bw) }()
	}
	wrote, err := writeRequest(bw, req)
	if !wrote {
		err = req.Write(bw)
	}
	if err == nil {
		err = bw.Flush()
	}
	if err != nil {
		bw.Reset(pc)
		return fail("write", err)
	}
	// As net/http's reader does: a close before the first byte is io.EOF
	// (ReadResponse would say io.ErrUnexpectedEOF), and the heads up to the
	// final answer's are bounded.
	pc.limit = pc.maxHead
	var resp *http.Response
	var raw rawBody
	if _, err = pc.br.Peek(1); err == nil {
		resp, raw, err = readHead(pc.br, req)
		for err == nil && resp.StatusCode >= 100 && resp.StatusCode < 200 && resp.StatusCode != http.StatusSwitchingProtocols {
			resp, raw, err = readHead(pc.br, req)
		}
	}
	pc.limit = -1
	if err != nil {
		return fail("read", err)
	}
	reuse := !resp.Close && !req.Close && resp.StatusCode != http.StatusSwitchingProtocols
	if resp.Body == http.NoBody {
		t.release(pc, stop, reuse)
		return resp, false, nil
	}
	b := raw.spare // allocated with resp by parseHead
	if b == nil {
		b = new(h1Body)
	}
	*b = h1Body{t: t, pc: pc, rc: resp.Body, raw: raw, ctx: ctx, stop: stop, reuse: reuse}
	resp.Body = b
	return resp, false, nil
}

// release pools pc when its answer is complete and nothing else was sent
// on it, and closes it otherwise.
func (t *Transport) release(pc *h1Conn, stop func() bool, reuse bool) {
	if stop() && reuse && pc.br.Buffered() == 0 {
		if pc.timed {
			pc.conn.SetDeadline(time.Time{})
			pc.timed = false
		}
		t.put(pc)
		return
	}
	pc.conn.Close()
}

// errBodyClosed is what a read of an answer's body returns after Close, as
// in net/http.
var errBodyClosed = errors.New("http: read on closed response body")

// h1Body is an answer's body on the fast path: its end returns the
// connection to the pool, a Close before its end closes it.
type h1Body struct {
	t     *Transport
	pc    *h1Conn
	rc    io.ReadCloser // net/http's body reader, over pc.br; nil when raw reads it
	raw   rawBody       // the body's reader when parseHead read the head
	ctx   context.Context
	stop  func() bool
	reuse bool

	mu     sync.Mutex
	done   bool
	closed bool
	err    error // what reads return once done
}

func (b *h1Body) Read(p []byte) (int, error) {
	b.mu.Lock()
	if b.closed || b.done {
		err := b.err
		b.mu.Unlock()
		return 0, err
	}
	b.mu.Unlock()
	// Unlocked while it waits, so a Close from another goroutine cuts it
	// off (by closing the connection), as in net/http.
	var n int
	var err error
	if b.rc != nil {
		n, err = b.rc.Read(p)
	} else {
		n, err = b.raw.Read(p)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case b.done: // closed meanwhile: the connection is gone
		if err == nil {
			err = b.err
		}
	case err == io.EOF:
		b.done, b.err = true, io.EOF
		b.t.release(b.pc, b.stop, b.reuse)
	case err != nil:
		if b.ctx.Err() != nil {
			err = context.Cause(b.ctx)
		} else if b.pc.timed && errors.Is(err, os.ErrDeadlineExceeded) {
			err = context.DeadlineExceeded
		}
		b.done, b.err = true, err
		b.stop()
		b.pc.conn.Close()
	}
	return n, err
}

// Close ends the body; before its end, the connection is closed (net/http
// does the same).
func (b *h1Body) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil
	}
	b.closed = true
	if !b.done {
		b.done = true
		b.stop()
		b.pc.conn.Close()
	}
	b.err = errBodyClosed
	return nil
}
