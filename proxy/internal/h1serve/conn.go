package h1serve

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/textproto"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http/httpguts"

	"github.com/toolgate/toolgate/proxy/internal/cancelwatch"
	"github.com/toolgate/toolgate/proxy/internal/headtext"
	"github.com/toolgate/toolgate/proxy/internal/rawconn"
)

// maxPostHandlerReadBytes is net/http's bound on the unread request body
// the server reads to keep a connection alive.
const maxPostHandlerReadBytes = 256 << 10

// rstAvoidanceDelay is net/http's wait between closing the write side of
// a connection with unread input and closing it.
const rstAvoidanceDelay = 500 * time.Millisecond

var aLongTimeAgo = time.Unix(1, 0)

// conn is one client connection served by the loop.
type conn struct {
	s          *Server
	rwc        net.Conn
	remoteAddr string
	cr         connReader
	br         *bufio.Reader
	bw         *bufio.Writer
	werr       error
	resBuf     *bufio.Writer // the response's buffer before chunking
	// snapHeader and snapVals hold the header a response was logically
	// written with (conn.snapshot), one response at a time.
	snapHeader http.Header
	snapVals   []string
	// twoWriter says rwc writes two buffers in one system call
	// (writeAfterBuffered); tail and tailN are its buffer after bw's and
	// how much of it was written.
	twoWriter bool
	tail      []byte
	tailN     int
	// values are what the connection's requests' contexts answer with;
	// ended is set once the connection's context ended (cancelCtx), which
	// ends its requests'; watch is the running request's.
	values context.Context
	ended  atomic.Bool
	watch  atomic.Pointer[cancelwatch.Context]
	// writeDeadline: a handler set a write deadline on the connection
	// (response.SetWriteDeadline), cleared when its request ends.
	writeDeadline atomic.Bool
	// readDeadline: the connection may hold a read deadline that
	// readRequest clears once the head is read (armHead).
	readDeadline bool
	lastMethod   string
	state        atomic.Uint64 // http.ConnState<<32 | since (setState)

	// The watch: once a request has run for WatchAfter, the connection
	// is read in the background (when its body has been read) so the
	// request's context ends when the caller goes away. The server's
	// scanner (scan) starts it; a request costs no timer.
	wmu        sync.Mutex
	inHandler  bool   // a request's handler is running
	reqSeq     uint64 // counts the requests handed to the handler
	scanSeq    uint64 // reqSeq at the scanner's last look
	bodyDone   bool   // the body has been read to its end (or there is none)
	watchOnEOF bool   // the watch is due once the body ends
}

func newConn(s *Server, rwc net.Conn) *conn {
	c := &conn{s: s, rwc: rwc}
	c.cr.c = c
	c.cr.rwc = rwc
	_, c.twoWriter = rwc.(rawconn.TwoWriter)
	c.setState(http.StateNew)
	return c
}

// cancelCtx ends the connection's context: the running request's, and
// every later one's as soon as it is made (readRequest).
func (c *conn) cancelCtx() {
	c.ended.Store(true)
	if w := c.watch.Load(); w != nil {
		w.End()
	}
}

// setState records st, and for StateNew the second it began: the one
// state closeIdleConns asks the age of (a connection that sent no request
// in 5 s counts as idle, as net/http's Shutdown has it). Every other state
// records a since of 1, which only says the state is set; reading this
// machine's clock for a request's two changes of state was 0.35% of a
// checked call's CPU.
func (c *conn) setState(st http.ConnState) {
	since := uint64(1)
	if st == http.StateNew {
		since = uint64(time.Now().Unix())
	}
	c.state.Store(uint64(st)<<32 | since)
}

func (c *conn) getState() (http.ConnState, int64) {
	v := c.state.Load()
	return http.ConnState(v >> 32), int64(v & 0xffffffff)
}

// connErrWriter notes the first write error and ends the connection's
// context, as net/http's checkConnErrorWriter.
type connErrWriter struct{ c *conn }

func (w connErrWriter) Write(p []byte) (int, error) {
	var n int
	var err error
	if tail := w.c.tail; tail != nil {
		// writeAfterBuffered's flush: bw's bytes, then tail, at once.
		w.c.tail = nil
		n, err = rawconn.WriteTwo(w.c.rwc, p, tail)
		w.c.tailN = max(n-len(p), 0)
		n = min(n, len(p))
	} else {
		n, err = w.c.rwc.Write(p)
	}
	if err != nil && w.c.werr == nil {
		w.c.werr = err
		w.c.cancelCtx()
	}
	return n, err
}

// writeAfterBuffered writes what bw holds and then p with one system call
// (writev), where bw.Write would fill bw from p, write it and then write
// the rest of p: an answer's head and a body longer than bw's room leave
// together. It returns the bytes of p written.
func (c *conn) writeAfterBuffered(p []byte) (int, error) {
	c.tail, c.tailN = p, 0
	err := c.bw.Flush()
	c.tail = nil
	return c.tailN, err
}

func (c *conn) finalFlush() {
	if c.bw != nil {
		c.bw.Flush()
	}
}

func (c *conn) close() {
	c.finalFlush()
	c.rwc.Close()
}

type closeWriter interface{ CloseWrite() error }

func (c *conn) closeWriteAndWait() {
	c.finalFlush()
	if tcp, ok := c.rwc.(closeWriter); ok {
		tcp.CloseWrite()
	}
	time.Sleep(rstAvoidanceDelay)
}

func (c *conn) serve(ctx context.Context) {
	if ra := c.rwc.RemoteAddr(); ra != nil {
		c.remoteAddr = ra.String()
	}
	ctx = context.WithValue(ctx, http.LocalAddrContextKey, c.rwc.LocalAddr())
	var inFlight *response
	handedOff := false
	defer func() {
		if err := recover(); err != nil && err != http.ErrAbortHandler {
			const size = 64 << 10
			buf := make([]byte, size)
			buf = buf[:runtime.Stack(buf, false)]
			c.s.logf("http: panic serving %v: %v\n%s", c.remoteAddr, err, buf)
		}
		if inFlight != nil {
			inFlight.endCtx()
			c.endWatch()
			c.cr.abortPendingRead()
			inFlight.reqBody.Close()
		}
		if !handedOff {
			c.close()
		}
		c.s.trackConn(c, false)
	}()

	c.values = ctx
	c.br = bufio.NewReader(&c.cr)
	c.bw = bufio.NewWriterSize(connErrWriter{c}, 4<<10)

	if d := c.s.ReadHeaderTimeout; d > 0 {
		c.rwc.SetReadDeadline(time.Now().Add(d))
	}
	c.readDeadline = true // and whatever the listener may have left
	for {
		w, handoff, err := c.readRequest()
		if w != nil || c.cr.remain != c.s.initialReadLimit() {
			// Unlike net/http, a request found whole in the buffer (after
			// the idle wait's Peek) makes the connection active too, so
			// Shutdown never closes it under a running handler.
			c.setState(http.StateActive)
		}
		if c.s.shutting.Load() {
			return
		}
		if handoff {
			handedOff = c.handOff()
			return
		}
		if err != nil {
			return
		}
		inFlight = w
		c.s.served.Add(1)
		c.startWatch(w)
		c.s.handler().ServeHTTP(w, w.req)
		c.endWatch()
		inFlight = nil
		w.endCtx()
		w.finishRequest()
		c.releaseSnapshot()
		if c.writeDeadline.Swap(false) {
			c.rwc.SetWriteDeadline(time.Time{})
		}
		if !w.shouldReuseConnection() {
			if w.requestBodyLimitHit || w.closedRequestBodyEarly() {
				c.closeWriteAndWait()
			}
			return
		}
		c.setState(http.StateIdle)
		if c.s.shutting.Load() {
			return
		}
		if d := c.s.IdleTimeout; d > 0 {
			c.rwc.SetReadDeadline(time.Now().Add(d))
		} else {
			c.rwc.SetReadDeadline(time.Time{})
		}
		if _, err := c.br.Peek(4); err != nil {
			return
		}
		c.armHead()
	}
}

// armHead replaces the idle wait's read deadline, once the next request
// began to arrive, with ReadHeaderTimeout for the rest of its head; or
// with none when the head is already whole in the buffer (the read that
// ended the wait brought it, as a caller's request almost always comes):
// reading it then waits for nothing, and readRequest need not clear a
// deadline after it. That is one deadline set a request instead of two
// (each a clock read and a change to the poller's timer).
func (c *conn) armHead() {
	if d := c.s.ReadHeaderTimeout; d > 0 && !headBuffered(c.br) {
		c.rwc.SetReadDeadline(time.Now().Add(d))
		c.readDeadline = true
		return
	}
	c.rwc.SetReadDeadline(time.Time{})
	c.readDeadline = false
}

// headBuffered reports whether br's buffer holds a request head's end
// (an empty line; readHead and net/http take a bare LF for CRLF) after
// the head's first line began, so that the head is read without another
// read from the connection. Empty lines before it (which readRequest
// skips after a POST) do not count: a caller could send them and then
// hold the head back with no deadline.
func headBuffered(br *bufio.Reader) bool {
	b, _ := br.Peek(br.Buffered())
	b = bytes.TrimLeft(b, "\r\n")
	return bytes.Contains(b, []byte("\n\r\n")) || bytes.Contains(b, []byte("\n\n"))
}

// handOff gives the connection, with the bytes read since the request
// began, to the fallback net/http server. It reports whether it did.
func (c *conn) handOff() bool {
	c.s.trackConn(c, false)
	c.s.handedOff.Add(1)
	replay := c.cr.rec
	c.cr.rec = nil
	return c.s.handoff.Push(&replayConn{Conn: c.rwc, replay: replay})
}

// readRequest reads the next request. handoff says the connection goes to
// net/http (the request is not one the loop serves, or it could not be
// parsed: net/http answers it as it would have); err is a network error
// that ends the connection without an answer, as net/http ends it.
func (c *conn) readRequest() (w *response, handoff bool, err error) {
	c.cr.setReadLimit(c.s.initialReadLimit())
	if c.lastMethod == "POST" {
		// RFC 7230 section 3 tolerance for old buggy clients, as net/http.
		peek, _ := c.br.Peek(4)
		c.br.Discard(numLeadingCRorLF(peek))
	}
	c.cr.startRecording(c.br)
	if c.br.Buffered() == 0 {
		// The first request of a connection: its first read, for readHead.
		// An error here is the one ReadRequest's first read would meet.
		if _, err := c.br.Peek(1); err != nil {
			return c.readError(err)
		}
	}
	// The response holds what readHead reads into (the Request, its body,
	// its header's values): one allocation for both.
	w = &response{conn: c, contentLength: -1}
	req, host, fast := readHead(c.br, &w.head)
	if !fast {
		req, err = http.ReadRequest(c.br)
		if err != nil {
			return c.readError(err)
		}
	}
	if !c.servable(req, host, fast) {
		return nil, true, nil
	}
	c.cr.stopRecording()
	c.lastMethod = req.Method
	c.cr.setInfiniteReadLimit()

	// The request's context is its watch (cancelwatch): what runs under
	// the request can be told when it ends without context.AfterFunc.
	// It has the connection's values and ends when the request does or
	// the connection's context ends (cancelCtx), not as a context made
	// under a connection's context, which cost a registration there a
	// request. cancelCtx sets ended before it loads the watch: one of the
	// two sees the other.
	w.ctx.Init(c.values)
	c.watch.Store(&w.ctx)
	if c.ended.Load() {
		w.ctx.End()
	}
	// The request keeps its identity: its body merges the trailers into
	// this *Request (a copy made by WithContext would never see them).
	*req = *req.WithContext(&w.ctx)
	req.RemoteAddr = c.remoteAddr
	w.req = req
	// net/http's test: the parsed Close, or a loose "close" token in the
	// first Connection header ("x close" counts).
	w.wantsClose = req.Close || hasToken(headtext.Get(req.Header, "Connection"), "close")
	if req.Body != nil && req.Body != http.NoBody {
		b := &w.bodyStore
		b.rc, b.c, b.cl = req.Body, c, req.ContentLength
		req.Body = b
	}
	w.reqBody = req.Body
	if w.reqBody == nil {
		w.reqBody = http.NoBody
	}
	if c.readDeadline {
		c.rwc.SetReadDeadline(time.Time{})
		c.readDeadline = false
	}
	w.cw.res = w
	// One response at a time per connection: its buffer is reused.
	if c.resBuf == nil {
		c.resBuf = bufio.NewWriterSize(&w.cw, bufferBeforeChunkingSize)
	} else {
		c.resBuf.Reset(&w.cw)
	}
	w.w = c.resBuf
	return w, false, nil
}

// readError is readRequest's answer to a request that could not be read:
// a hand-off to net/http, or err when it ends the connection.
func (c *conn) readError(err error) (w *response, handoff bool, _ error) {
	if c.cr.hitReadLimit() {
		return nil, true, nil
	}
	if isCommonNetReadError(err) {
		c.cr.stopRecording()
		return nil, false, err
	}
	return nil, true, nil
}

// servable reports whether the loop serves req; everything else goes to
// net/http. It repeats the checks net/http's server makes after parsing
// (Host present and valid, header names and values valid) and refuses
// what the loop does not implement: any version but HTTP/1.1, CONNECT,
// a request for "*", Expect, Upgrade, more than one Connection header.
// fast says readHead read req, and host is then its Host line's value.
func (c *conn) servable(req *http.Request, host string, fast bool) bool {
	if req.ProtoMajor != 1 || req.ProtoMinor != 1 || req.Method == http.MethodConnect || req.RequestURI == "*" {
		return false // "*": net/http answers OPTIONS * itself
	}
	h := req.Header
	if _, ok := h["Expect"]; ok {
		return false
	}
	if _, ok := h["Upgrade"]; ok {
		return false
	}
	if len(h["Connection"]) > 1 {
		return false
	}
	// readHead takes only token names and values of visible ASCII and
	// tabs, a part of what these accept (checkHead holds it there).
	if !fast && !validHeader(h) {
		return false
	}
	// ReadRequest drops the Host header. In origin form req.Host is its
	// value (empty: missing or empty, which net/http tells apart); in
	// absolute form it is the URL's, so the header is read again from
	// the bytes (textproto, as ReadRequest reads it).
	switch {
	case fast:
		// readHead kept the Host line's value.
	case req.URL.Host == "":
		host = req.Host
	default:
		var ok bool
		if host, ok = c.cr.recordedHost(); !ok {
			return false
		}
	}
	return host != "" && httpguts.ValidHostHeader(host) && httpguts.ValidHeaderFieldValue(host)
}

// validHeader reports whether every name in h is a token and every
// value a valid field value, as net/http's server requires.
func validHeader(h http.Header) bool {
	for k, vv := range h {
		if !httpguts.ValidHeaderFieldName(k) {
			return false
		}
		for _, v := range vv {
			if !httpguts.ValidHeaderFieldValue(v) {
				return false
			}
		}
	}
	return true
}

func numLeadingCRorLF(v []byte) (n int) {
	for _, b := range v {
		if b == '\r' || b == '\n' {
			n++
			continue
		}
		break
	}
	return
}

// isCommonNetReadError is net/http's: errors after which the server
// closes without an answer.
func isCommonNetReadError(err error) bool {
	if err == io.EOF {
		return true
	}
	if neterr, ok := err.(net.Error); ok && neterr.Timeout() {
		return true
	}
	if oe, ok := err.(*net.OpError); ok && oe.Op == "read" {
		return true
	}
	return false
}

// connReader reads the connection under the request reader: it bounds a
// header's bytes, records them so a hand-off can replay them, and does
// the read in the background that watches for the caller going away.
type connReader struct {
	c   *conn
	rwc net.Conn

	remain    int64
	recording bool
	rec       []byte

	mu      sync.Mutex
	cond    *sync.Cond
	hasByte bool
	byteBuf [1]byte
	inRead  bool
	aborted bool
}

const maxInt64 = 1<<63 - 1

func (cr *connReader) setReadLimit(n int64)  { cr.remain = n }
func (cr *connReader) setInfiniteReadLimit() { cr.remain = maxInt64 }
func (cr *connReader) hitReadLimit() bool    { return cr.remain <= 0 }

// startRecording starts recording the bytes of a request: those already
// buffered in br, then every byte read from the connection.
func (cr *connReader) startRecording(br *bufio.Reader) {
	buffered, _ := br.Peek(br.Buffered())
	cr.rec = append(cr.rec[:0], buffered...)
	cr.recording = true
}

func (cr *connReader) stopRecording() {
	cr.recording = false
	if cap(cr.rec) > 16<<10 {
		cr.rec = nil
	} else {
		cr.rec = cr.rec[:0]
	}
}

// recordedHost returns the Host header of the request just recorded, and
// false when there is not exactly one.
func (cr *connReader) recordedHost() (string, bool) {
	// The request line ends at the first '\n' (as textproto's ReadLine
	// reads it); the header is read from there.
	i := bytes.IndexByte(cr.rec, '\n')
	if i < 0 {
		return "", false
	}
	return headerHost(cr.rec[i+1:])
}

// headerHost returns the one Host field of the header block at the start
// of hdr, as textproto's ReadMIMEHeader reads it, and false when there is
// not exactly one or the block does not parse. A block of plain lines
// (scanHost) is read in place; any other goes through textproto.
func headerHost(hdr []byte) (string, bool) {
	if host, ok, plain := scanHost(hdr); plain {
		return host, ok
	}
	hr := hostReaders.Get().(*hostReader)
	defer hostReaders.Put(hr)
	hr.r.Reset(hdr)
	hr.br.Reset(&hr.r)
	defer hr.r.Reset(nil)
	tp := textproto.NewReader(&hr.br)
	h, err := tp.ReadMIMEHeader()
	if err != nil || len(h["Host"]) != 1 {
		return "", false
	}
	return h["Host"][0], true
}

// scanHost reads the Host field of a header block of plain lines: each a
// name of token characters, a colon and a value of visible ASCII, spaces
// and tabs, ended by CRLF or LF, the block ended by an empty line. Such a
// block is what textproto reads without its special cases (continuation
// lines, malformed lines, bytes it refuses or that need care), so the
// result is textproto's: the value trimmed of spaces and tabs, found under
// any spelling of the name. plain is false for any other block, whose
// reading is left to textproto. FuzzHeaderHost holds it to textproto.
func scanHost(hdr []byte) (host string, ok, plain bool) {
	var val []byte
	n := 0
	for {
		nl := bytes.IndexByte(hdr, '\n')
		if nl < 0 {
			return "", false, false
		}
		line := hdr[:nl]
		hdr = hdr[nl+1:]
		if len(line) > 0 && line[len(line)-1] == '\r' {
			line = line[:len(line)-1]
		}
		if len(line) == 0 {
			break
		}
		colon := bytes.IndexByte(line, ':')
		if colon <= 0 {
			return "", false, false
		}
		for _, c := range line[:colon] {
			if !httpguts.IsTokenRune(rune(c)) {
				return "", false, false
			}
		}
		v := line[colon+1:]
		for _, c := range v {
			if c != '\t' && (c < 0x20 || c > 0x7e) {
				return "", false, false
			}
		}
		if k := line[:colon]; len(k) == 4 && k[0]|0x20 == 'h' && k[1]|0x20 == 'o' && k[2]|0x20 == 's' && k[3]|0x20 == 't' {
			n++
			val = bytes.Trim(v, " \t")
		}
	}
	if n != 1 {
		return "", false, true
	}
	return string(val), true, true
}

// hostReader is what recordedHost parses with: a buffered reader over a
// reader of the recorded bytes, kept together so neither is allocated.
type hostReader struct {
	br bufio.Reader
	r  bytes.Reader
}

// hostReaders holds the readers recordedHost parses with.
var hostReaders = sync.Pool{New: func() any {
	hr := &hostReader{}
	hr.br = *bufio.NewReaderSize(nil, 1024)
	return hr
}}

func (cr *connReader) lock() {
	cr.mu.Lock()
	if cr.cond == nil {
		cr.cond = sync.NewCond(&cr.mu)
	}
}

func (cr *connReader) Read(p []byte) (n int, err error) {
	cr.lock()
	if cr.inRead {
		cr.mu.Unlock()
		panic("invalid concurrent Body.Read call")
	}
	if cr.hitReadLimit() {
		cr.mu.Unlock()
		return 0, io.EOF
	}
	if len(p) == 0 {
		cr.mu.Unlock()
		return 0, nil
	}
	if int64(len(p)) > cr.remain {
		p = p[:cr.remain]
	}
	if cr.hasByte {
		p[0] = cr.byteBuf[0]
		cr.hasByte = false
		cr.mu.Unlock()
		cr.note(p[:1])
		return 1, nil
	}
	cr.inRead = true
	cr.mu.Unlock()
	n, err = cr.rwc.Read(p)

	cr.mu.Lock()
	cr.inRead = false
	if err != nil {
		cr.c.cancelCtx()
	}
	cr.remain -= int64(n)
	cr.mu.Unlock()
	cr.cond.Broadcast()
	cr.note(p[:n])
	return n, err
}

func (cr *connReader) note(p []byte) {
	if cr.recording {
		cr.rec = append(cr.rec, p...)
	}
}

// startBackgroundRead starts the one-byte read that notices the caller
// going away (or keeps the first byte of a pipelined request). It runs
// only when the request's body has been read, so nothing else reads the
// connection; should something be reading, it does nothing (it is
// called from a timer, where a panic would end the process).
func (cr *connReader) startBackgroundRead() {
	cr.lock()
	defer cr.mu.Unlock()
	if cr.inRead || cr.hasByte {
		return
	}
	cr.inRead = true
	cr.rwc.SetReadDeadline(time.Time{})
	go cr.backgroundRead()
}

func (cr *connReader) backgroundRead() {
	n, err := cr.rwc.Read(cr.byteBuf[:])
	cr.lock()
	if n == 1 {
		cr.hasByte = true
	}
	if ne, ok := err.(net.Error); ok && cr.aborted && ne.Timeout() {
		// The expected error from abortPendingRead.
	} else if err != nil {
		cr.c.cancelCtx()
	}
	cr.aborted = false
	cr.inRead = false
	cr.mu.Unlock()
	cr.cond.Broadcast()
}

// abortPendingRead stops a read in the background and waits for it.
func (cr *connReader) abortPendingRead() {
	cr.lock()
	defer cr.mu.Unlock()
	if !cr.inRead {
		return
	}
	cr.aborted = true
	cr.rwc.SetReadDeadline(aLongTimeAgo)
	for cr.inRead {
		cr.cond.Wait()
	}
	cr.rwc.SetReadDeadline(time.Time{})
}

// startWatch marks w's request as running, for the scanner.
func (c *conn) startWatch(w *response) {
	c.wmu.Lock()
	c.inHandler = true
	c.reqSeq++
	c.bodyDone = w.reqBody == http.NoBody
	c.watchOnEOF = false
	c.wmu.Unlock()
	c.s.ensureScanner()
}

// endWatch marks it done; a read already started is stopped by
// abortPendingRead.
func (c *conn) endWatch() {
	c.wmu.Lock()
	c.inHandler = false
	c.watchOnEOF = false
	c.wmu.Unlock()
}

// look is the scanner's look at the connection: a request it saw
// running at its last look is watched. It reports whether a request is
// running.
func (c *conn) look() bool {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if !c.inHandler {
		return false
	}
	if c.reqSeq == c.scanSeq && !c.watchOnEOF {
		if c.bodyDone {
			c.cr.startBackgroundRead()
		} else {
			c.watchOnEOF = true
		}
	}
	c.scanSeq = c.reqSeq
	return true
}

// bodyEnded is called when the request body has been read to its end.
func (c *conn) bodyEnded() {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.bodyDone = true
	if c.inHandler && c.watchOnEOF {
		c.watchOnEOF = false
		c.cr.startBackgroundRead()
	}
}

// body is a request body as net/http's server gives it to a handler: an
// unread rest is read on Close up to maxPostHandlerReadBytes, never
// without bound.
type body struct {
	rc io.ReadCloser // from http.ReadRequest
	c  *conn
	cl int64 // the request's Content-Length; -1 chunked

	mu         sync.Mutex
	read       int64
	sawEOF     bool
	closed     bool
	earlyClose bool
	// failed: a read failed (broken framing, a bad trailer, a timeout):
	// where the next request starts is unknown, so the connection is not
	// reused. net/http's body closes itself on a bad trailer, which this
	// stands for.
	failed bool
}

func (b *body) Read(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return 0, http.ErrBodyReadAfterClose
	}
	return b.readLocked(p)
}

func (b *body) readLocked(p []byte) (int, error) {
	if b.sawEOF {
		return 0, io.EOF
	}
	n, err := b.rc.Read(p)
	b.read += int64(n)
	if err != nil && err != io.EOF && err != io.ErrUnexpectedEOF {
		// (An unexpected EOF is the caller's stream ending: nothing
		// follows it to misread.)
		b.failed = true
	}
	if err == io.EOF {
		b.sawEOF = true
		b.c.bodyEnded()
	}
	return n, err
}

type bodyLocked struct{ b *body }

func (bl bodyLocked) Read(p []byte) (int, error) {
	if bl.b.closed {
		return 0, http.ErrBodyReadAfterClose
	}
	return bl.b.readLocked(p)
}

// unreadDataSizeLocked is what remains of a body of declared length, or
// -1 when unknown (chunked).
func (b *body) unreadDataSizeLocked() int64 {
	if b.cl >= 0 {
		return b.cl - b.read
	}
	return -1
}

func (b *body) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil
	}
	var err error
	switch {
	case b.sawEOF:
	case b.cl >= 0 && b.cl-b.read > maxPostHandlerReadBytes:
		b.earlyClose = true
	default:
		var n int64
		n, err = io.CopyN(io.Discard, bodyLocked{b}, maxPostHandlerReadBytes)
		if err == io.EOF {
			err = nil
		}
		if n == maxPostHandlerReadBytes {
			b.earlyClose = true
		}
	}
	b.closed = true
	return err
}
