package h1serve

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"net/textproto"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/http/httpguts"

	"github.com/toolgate/toolgate/proxy/internal/cancelwatch"
	"github.com/toolgate/toolgate/proxy/internal/headtext"
)

// bufferBeforeChunkingSize is net/http's: a handler that finishes within
// this many bytes gets a Content-Length, else the answer is chunked.
const bufferBeforeChunkingSize = 2048

// sniffLen is how many bytes http.DetectContentType considers.
const sniffLen = 512

// response is the http.ResponseWriter of one request. Its buffering is
// net/http's (2 KiB before chunking, then the connection's 4 KiB writer),
// so what reaches the caller, and when, is what net/http sends.
type response struct {
	conn          *conn
	req           *http.Request
	reqBody       io.ReadCloser
	ctx           cancelwatch.Context // the request's context, with its watch
	wroteHeader   bool                // a non-1xx header has been (logically) written
	wantsClose    bool                // the request has Connection: close
	handlerHeader http.Header
	calledHeader  bool
	w             *bufio.Writer // buffers output in chunks to chunkWriter
	cw            chunkWriter

	written       int64 // body bytes written in this response
	contentLength int64 // explicitly-declared Content-Length; or -1
	status        int

	closeAfterReply     bool
	fullDuplex          bool
	requestBodyLimitHit bool
	trailers            []string
	handlerDone         bool

	dateBuf   [len(http.TimeFormat)]byte
	clenBuf   [10]byte
	statusBuf [3]byte

	// bodyStore is reqBody when the request has a body: allocated with
	// the response.
	bodyStore body
	// head is what readHead read the request into, when it did.
	head headRequest
	// discard bounds the read of an unread request body (writeHeader).
	discard io.LimitedReader
}

var (
	crlf       = []byte("\r\n")
	colonSpace = []byte(": ")
)

var (
	suppressedHeaders304    = []string{"Content-Type", "Content-Length", "Transfer-Encoding"}
	suppressedHeadersNoBody = []string{"Content-Length", "Transfer-Encoding"}
	excludedHeadersNoBody   = map[string]bool{"Content-Length": true, "Transfer-Encoding": true}
)

func suppressedHeaders(status int) []string {
	switch {
	case status == 304:
		return suppressedHeaders304
	case !bodyAllowedForStatus(status):
		return suppressedHeadersNoBody
	}
	return nil
}

func bodyAllowedForStatus(status int) bool {
	switch {
	case status >= 100 && status <= 199:
		return false
	case status == 204:
		return false
	case status == 304:
		return false
	}
	return true
}

func (w *response) Header() http.Header {
	if w.handlerHeader == nil {
		// Made on first use: a response written with WriteHeaderFrom
		// never needs it.
		w.handlerHeader = make(http.Header)
	}
	if w.cw.header == nil && w.wroteHeader && !w.cw.wroteHeader {
		// Between logically writing the header and writing it out, keep a
		// snapshot of the state it was written in.
		w.cw.header = w.conn.snapshot(w.handlerHeader)
	}
	w.calledHeader = true
	return w.handlerHeader
}

// maxSnapshotKeys is the most names a header may have for the
// connection to keep its snapshot's map for the next response.
const maxSnapshotKeys = 32

// snapshot returns a copy of h, as h.Clone() makes it, in the
// connection's own map and array: the header a response was logically
// written with. Only the loop reads it (chunkWriter.writeHeader), and
// only while its response is written, one response at a time, so the
// next response reuses them (releaseSnapshot empties them when a response
// ends) rather than allocating a copy of its header.
func (c *conn) snapshot(h http.Header) http.Header {
	if h == nil || len(h) > maxSnapshotKeys {
		return h.Clone()
	}
	nv := 0
	for _, vv := range h {
		nv += len(vv)
	}
	if c.snapHeader == nil {
		c.snapHeader = make(http.Header, len(h))
	}
	clear(c.snapHeader)
	if cap(c.snapVals) < nv || c.snapVals == nil {
		// Never nil: Clone gives an empty, non-nil slice for an empty
		// value list.
		c.snapVals = make([]string, 0, max(nv, 8))
	}
	sv := c.snapVals[:nv]
	for k, vv := range h {
		if vv == nil {
			// Preserve nil values (Clone does).
			c.snapHeader[k] = nil
			continue
		}
		n := copy(sv, vv)
		c.snapHeader[k] = sv[:n:n]
		sv = sv[n:]
	}
	return c.snapHeader
}

// releaseSnapshot empties the connection's snapshot once its response
// is written, so it keeps none of that response's strings.
func (c *conn) releaseSnapshot() {
	clear(c.snapHeader)
	clear(c.snapVals[:cap(c.snapVals)])
}

func checkWriteHeaderCode(code int) {
	if code < 100 || code > 999 {
		panic(fmt.Sprintf("invalid WriteHeader code %v", code))
	}
}

func (w *response) WriteHeader(code int) {
	if w.wroteHeader {
		w.conn.s.logf("http: superfluous response.WriteHeader call")
		return
	}
	checkWriteHeaderCode(code)
	if code >= 100 && code <= 199 && code != http.StatusSwitchingProtocols {
		writeStatusLine(w.conn.bw, true, code, w.statusBuf[:])
		writeHeaderLines(w.conn.bw, w.handlerHeader, excludedHeadersNoBody)
		w.conn.bw.Write(crlf)
		w.conn.bw.Flush()
		return
	}
	w.wroteHeader = true
	w.status = code
	if w.calledHeader && w.cw.header == nil {
		w.cw.header = w.conn.snapshot(w.handlerHeader)
	}
	if cl := headtext.Get(w.handlerHeader, "Content-Length"); cl != "" {
		v, err := strconv.ParseInt(cl, 10, 64)
		if err == nil && v >= 0 {
			w.contentLength = v
		} else {
			w.conn.s.logf("http: invalid Content-Length of %q", cl)
			w.handlerHeader.Del("Content-Length")
		}
	}
}

// WriteHeaderFrom is WriteHeader(code) with h as the header written, in
// place of what Header() holds: a handler that has the header in hand (a
// proxy's answer from upstream) saves copying it into Header() and the
// connection's copy of that (snapshot), two map copies a response. h is
// read and never changed, and must not change until the response ends;
// Header() still takes trailers' values. Where that shortcut would not
// write what WriteHeader writes (Header() was used, a 1xx code, a
// Content-Length that is not a length), it is WriteHeader after copying h
// into Header().
func (w *response) WriteHeaderFrom(code int, h http.Header) {
	if w.wroteHeader || w.calledHeader || len(w.handlerHeader) > 0 || code < 200 || code > 999 {
		w.copyHeader(code, h)
		return
	}
	w.contentLength = -1
	if cl := headtext.Get(h, "Content-Length"); cl != "" {
		v, err := strconv.ParseInt(cl, 10, 64)
		if err != nil || v < 0 {
			w.copyHeader(code, h)
			return
		}
		w.contentLength = v
	}
	w.wroteHeader = true
	w.status = code
	w.cw.header, w.cw.borrowed = h, true
}

func (w *response) copyHeader(code int, h http.Header) {
	dst := w.Header()
	for k, vs := range h {
		dst[k] = vs
	}
	w.WriteHeader(code)
}

func (w *response) bodyAllowed() bool {
	if !w.wroteHeader {
		panic("net/http: bodyAllowed called before the header was written")
	}
	return bodyAllowedForStatus(w.status)
}

func (w *response) Write(data []byte) (int, error) { return w.write(len(data), data, "") }

func (w *response) WriteString(data string) (int, error) { return w.write(len(data), nil, data) }

func (w *response) write(lenData int, dataB []byte, dataS string) (int, error) {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	if lenData == 0 {
		return 0, nil
	}
	if !w.bodyAllowed() {
		return 0, http.ErrBodyNotAllowed
	}
	w.written += int64(lenData)
	if w.contentLength != -1 && w.written > w.contentLength {
		return 0, http.ErrContentLength
	}
	if dataB != nil {
		return w.w.Write(dataB)
	}
	return w.w.WriteString(dataS)
}

// writerOnly hides ReadFrom from io.Copy.
type writerOnly struct{ io.Writer }

var copyBufPool = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// ReadFrom is net/http's: the first sniffLen bytes go through the
// buffers, then a connection that can read from src does.
func (w *response) ReadFrom(src io.Reader) (n int64, err error) {
	bp := copyBufPool.Get().(*[]byte)
	defer copyBufPool.Put(bp)
	buf := *bp
	rf, ok := w.conn.rwc.(io.ReaderFrom)
	if !ok {
		return io.CopyBuffer(writerOnly{w}, src, buf)
	}
	if !w.cw.wroteHeader {
		n0, err := io.CopyBuffer(writerOnly{w}, io.LimitReader(src, sniffLen), buf)
		n += n0
		if err != nil || n0 < sniffLen {
			return n, err
		}
	}
	w.w.Flush()
	w.cw.flush()
	if !w.cw.chunking && w.bodyAllowed() && w.req.Method != http.MethodHead {
		n0, err := rf.ReadFrom(src)
		n += n0
		w.written += n0
		return n, err
	}
	n0, err := io.CopyBuffer(writerOnly{w}, src, buf)
	n += n0
	return n, err
}

// Flush sends what was written so far (http.Flusher).
func (w *response) Flush() { w.FlushError() }

// FlushError is Flush that reports the error (http.ResponseController).
func (w *response) FlushError() error {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	err := w.w.Flush()
	e2 := w.cw.flush()
	if err == nil {
		err = e2
	}
	return err
}

// SetReadDeadline sets the connection's read deadline
// (http.ResponseController).
func (w *response) SetReadDeadline(t time.Time) error { return w.conn.rwc.SetReadDeadline(t) }

// SetWriteDeadline sets the connection's write deadline
// (http.ResponseController).
func (w *response) SetWriteDeadline(t time.Time) error {
	w.conn.writeDeadline.Store(true)
	return w.conn.rwc.SetWriteDeadline(t)
}

// BodyBuffered reports whether the rest of the request's body, of a
// declared length, is already in the connection's buffer: reading it
// makes no system call, so no read deadline can matter to it.
func (w *response) BodyBuffered() bool {
	b, ok := w.reqBody.(*body)
	if !ok {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.cl >= 0 && !b.closed && b.cl-b.read <= int64(w.conn.br.Buffered())
}

// EnableFullDuplex lets the handler read the body while it answers
// (http.ResponseController).
func (w *response) EnableFullDuplex() error {
	w.fullDuplex = true
	return nil
}

func (w *response) finishRequest() {
	w.handlerDone = true
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	w.w.Flush()
	w.cw.close()
	w.conn.bw.Flush()
	w.conn.cr.abortPendingRead()
	if b, ok := w.reqBody.(*body); ok && w.fullDuplex {
		// A full-duplex handler may leave its body unread; net/http then
		// reads its end while starting its read in the background, and
		// what follows races. The loop closes such a connection.
		b.mu.Lock()
		if !b.sawEOF {
			w.closeAfterReply = true
		}
		b.mu.Unlock()
	}
	// Close the body (bounded) so the connection's reader can be reused.
	w.reqBody.Close()
	if w.req.MultipartForm != nil {
		w.req.MultipartForm.RemoveAll()
	}
}

// endCtx ends the request's context and its watch.
func (w *response) endCtx() {
	w.ctx.End()
}

func (w *response) shouldReuseConnection() bool {
	if w.closeAfterReply {
		return false
	}
	if w.req.Method != http.MethodHead && w.contentLength != -1 && w.bodyAllowed() && w.contentLength != w.written {
		return false
	}
	if w.conn.werr != nil {
		return false
	}
	if b, ok := w.reqBody.(*body); ok {
		// Unlike net/http, never when the body's framing failed, even if
		// the handler replaced r.Body (net/http then reads on from where
		// a bad trailer left off).
		b.mu.Lock()
		failed := b.failed
		b.mu.Unlock()
		if failed {
			return false
		}
	}
	return !w.closedRequestBodyEarly()
}

func (w *response) closedRequestBodyEarly() bool {
	b, ok := w.req.Body.(*body)
	if !ok {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.earlyClose
}

func (w *response) requestTooLarge() {
	w.closeAfterReply = true
	w.requestBodyLimitHit = true
	if !w.wroteHeader {
		w.Header().Set("Connection", "close")
	}
}

func (w *response) declareTrailer(k string) {
	k = http.CanonicalHeaderKey(k)
	if !httpguts.ValidTrailerHeader(k) {
		return
	}
	w.trailers = append(w.trailers, k)
}

func (w *response) finalTrailers() http.Header {
	var t http.Header
	for k, vv := range w.handlerHeader {
		if kk, found := strings.CutPrefix(k, http.TrailerPrefix); found {
			if t == nil {
				t = make(http.Header)
			}
			t[kk] = vv
		}
	}
	for _, k := range w.trailers {
		if t == nil {
			t = make(http.Header)
		}
		for _, v := range w.handlerHeader[k] {
			t.Add(k, v)
		}
	}
	return t
}

func writeStatusLine(bw *bufio.Writer, is11 bool, code int, scratch []byte) {
	if is11 {
		bw.WriteString("HTTP/1.1 ")
	} else {
		bw.WriteString("HTTP/1.0 ")
	}
	if text := http.StatusText(code); text != "" {
		bw.Write(strconv.AppendInt(scratch[:0], int64(code), 10))
		bw.WriteByte(' ')
		bw.WriteString(text)
		bw.WriteString("\r\n")
	} else {
		fmt.Fprintf(bw, "%03d status code %d\r\n", code, code)
	}
}

// chunkWriter writes the header when the first body bytes (or the end)
// come, and chunk-frames the body when the answer is chunked.
type chunkWriter struct {
	res         *response
	header      http.Header // the header as logically written, when it differs from handlerHeader
	borrowed    bool        // header is the handler's (WriteHeaderFrom): never changed
	wroteHeader bool
	chunking    bool
}

func (cw *chunkWriter) Write(p []byte) (n int, err error) {
	if !cw.wroteHeader {
		cw.writeHeader(p)
	}
	if cw.res.req.Method == http.MethodHead {
		return len(p), nil
	}
	bw := cw.res.conn.bw
	if cw.chunking {
		_, err = fmt.Fprintf(bw, "%x\r\n", len(p))
		if err != nil {
			cw.res.conn.rwc.Close()
			return
		}
	}
	if !cw.chunking && bw.Buffered() > 0 && len(p) > bw.Available() && cw.res.conn.twoWriter {
		n, err = cw.res.conn.writeAfterBuffered(p)
	} else {
		n, err = bw.Write(p)
	}
	if cw.chunking && err == nil {
		_, err = bw.Write(crlf)
	}
	if err != nil {
		cw.res.conn.rwc.Close()
	}
	return
}

func (cw *chunkWriter) flush() error {
	if !cw.wroteHeader {
		cw.writeHeader(nil)
	}
	return cw.res.conn.bw.Flush()
}

func (cw *chunkWriter) close() {
	if !cw.wroteHeader {
		cw.writeHeader(nil)
	}
	if cw.chunking {
		bw := cw.res.conn.bw
		bw.WriteString("0\r\n")
		if trailers := cw.res.finalTrailers(); trailers != nil {
			trailers.Write(bw)
		}
		bw.WriteString("\r\n")
	}
}

// extraHeader holds the headers writeHeader adds, written after the
// handler's in net/http's order.
type extraHeader struct {
	contentType      string
	connection       string
	transferEncoding string
	date             []byte
	contentLength    []byte
}

var extraHeaderKeys = [][]byte{[]byte("Content-Type"), []byte("Connection"), []byte("Transfer-Encoding")}

var (
	headerContentLength = []byte("Content-Length: ")
	headerDate          = []byte("Date: ")
)

func (h extraHeader) Write(w *bufio.Writer) {
	if h.date != nil {
		w.Write(headerDate)
		w.Write(h.date)
		w.Write(crlf)
	}
	if h.contentLength != nil {
		w.Write(headerContentLength)
		w.Write(h.contentLength)
		w.Write(crlf)
	}
	for i, v := range []string{h.contentType, h.connection, h.transferEncoding} {
		if v != "" {
			w.Write(extraHeaderKeys[i])
			w.Write(colonSpace)
			w.WriteString(v)
			w.Write(crlf)
		}
	}
}

// writeHeader decides the answer's framing as net/http's server does
// (Content-Length when the handler finished within the buffer, else
// chunked; Content-Type sniffed from p; Date; Connection: close; the
// unread request body) and writes the header out. Only HTTP/1.1 requests
// reach it.
func (cw *chunkWriter) writeHeader(p []byte) {
	if cw.wroteHeader {
		return
	}
	cw.wroteHeader = true

	w := cw.res
	keepAlivesEnabled := !w.conn.s.shutting.Load()
	isHEAD := w.req.Method == http.MethodHead

	header := cw.header
	owned := header != nil && !cw.borrowed
	if header == nil {
		header = w.handlerHeader
	}
	var excludeHeader map[string]bool
	delHeader := func(key string) {
		if owned {
			header.Del(key)
			return
		}
		if _, ok := header[key]; !ok {
			return
		}
		if excludeHeader == nil {
			excludeHeader = make(map[string]bool)
		}
		excludeHeader[key] = true
	}
	var setHeader extraHeader

	// The "Trailer:" prefixed keys are not sent in the header.
	trailers := false
	for k := range cw.header {
		if strings.HasPrefix(k, http.TrailerPrefix) {
			if excludeHeader == nil {
				excludeHeader = make(map[string]bool)
			}
			excludeHeader[k] = true
			trailers = true
		}
	}
	for _, v := range cw.header["Trailer"] {
		trailers = true
		foreachHeaderElement(v, cw.res.declareTrailer)
	}

	te := headtext.Get(header, "Transfer-Encoding")
	hasTE := te != ""

	// A handler done within the buffer, with no length of its own, gets
	// one (not for HEAD with nothing written, nor 1xx/204/304, nor with
	// trailers or a Transfer-Encoding).
	if w.handlerDone && !trailers && !hasTE && bodyAllowedForStatus(w.status) && !hasHeader(header, "Content-Length") && (!isHEAD || len(p) > 0) {
		w.contentLength = int64(len(p))
		setHeader.contentLength = strconv.AppendInt(cw.res.clenBuf[:0], int64(len(p)), 10)
	}

	hasCL := w.contentLength != -1

	if w.wantsClose {
		w.closeAfterReply = true
	}
	if headtext.Get(header, "Connection") == "close" || !keepAlivesEnabled {
		w.closeAfterReply = true
	}

	// The unread request body: discarded up to maxPostHandlerReadBytes
	// so the connection can be reused, else the connection is closed.
	if w.req.ContentLength != 0 && !w.closeAfterReply && !w.fullDuplex {
		var discard, tooBig bool
		switch bdy := w.req.Body.(type) {
		case *body:
			bdy.mu.Lock()
			switch {
			case bdy.closed || bdy.failed:
				if !bdy.sawEOF {
					w.closeAfterReply = true
				}
			case bdy.sawEOF:
				// Read to its end (a checked call's body always is):
				// the copy below would find nothing, and its Close is
				// finishRequest's.
			case bdy.unreadDataSizeLocked() >= maxPostHandlerReadBytes:
				tooBig = true
			default:
				discard = true
			}
			bdy.mu.Unlock()
		default:
			discard = true
		}
		if discard {
			// io.CopyN, with its LimitedReader the response's own.
			const n = maxPostHandlerReadBytes + 1
			w.discard = io.LimitedReader{R: w.reqBody, N: n}
			written, err := io.Copy(io.Discard, &w.discard)
			w.discard.R = nil
			if written == n {
				err = nil
			} else if err == nil {
				err = io.EOF
			}
			switch err {
			case nil:
				tooBig = true
			case http.ErrBodyReadAfterClose:
			case io.EOF:
				if err := w.reqBody.Close(); err != nil {
					w.closeAfterReply = true
				}
			default:
				// A read timeout or broken framing: what remains must
				// not be read as another request.
				w.closeAfterReply = true
			}
		}
		if tooBig {
			w.requestTooLarge()
			delHeader("Connection")
			setHeader.connection = "close"
		}
	}

	code := w.status
	if bodyAllowedForStatus(code) {
		_, haveType := header["Content-Type"]
		// A Content-Encoding means the body is not what it looks like.
		hasCE := len(headtext.Get(header, "Content-Encoding")) > 0
		if !hasCE && !haveType && !hasTE && len(p) > 0 {
			setHeader.contentType = http.DetectContentType(p)
		}
	} else {
		for _, k := range suppressedHeaders(code) {
			delHeader(k)
		}
	}

	if !hasHeader(header, "Date") {
		setHeader.date = dates.appendNow(cw.res.dateBuf[:0])
	}

	if hasCL && hasTE && te != "identity" {
		w.conn.s.logf("http: WriteHeader called with both Transfer-Encoding of %q and a Content-Length of %d", te, w.contentLength)
		delHeader("Content-Length")
		hasCL = false
	}

	switch {
	case w.req.Method == http.MethodHead || !bodyAllowedForStatus(code) || code == http.StatusNoContent:
		delHeader("Transfer-Encoding")
	case hasCL:
		delHeader("Transfer-Encoding")
	case hasTE && te == "identity":
		// No length and no chunking: the end of the connection ends it.
		cw.chunking = false
		w.closeAfterReply = true
		delHeader("Transfer-Encoding")
	default:
		cw.chunking = true
		setHeader.transferEncoding = "chunked"
		if hasTE && te == "chunked" {
			delHeader("Transfer-Encoding")
		}
	}
	if cw.chunking {
		delHeader("Content-Length")
	}

	delConnectionHeader := w.closeAfterReply &&
		(!keepAlivesEnabled || !hasToken(headtext.Get(cw.header, "Connection"), "close")) &&
		!isProtocolSwitchResponse(w.status, header)
	if delConnectionHeader {
		delHeader("Connection")
		setHeader.connection = "close"
	}

	bw := w.conn.bw
	writeStatusLine(bw, true, code, w.statusBuf[:])
	writeHeaderLines(bw, cw.header, excludeHeader)
	setHeader.Write(bw)
	bw.Write(crlf)
}

// hasHeader reports whether h has key (canonical) with any value, as
// net/http's Header.has.
func hasHeader(h http.Header, key string) bool {
	_, ok := h[key]
	return ok
}

func isProtocolSwitchResponse(code int, h http.Header) bool {
	return code == http.StatusSwitchingProtocols && h.Get("Upgrade") != "" &&
		httpguts.HeaderValuesContainsToken(h["Connection"], "Upgrade")
}

// foreachHeaderElement splits v as a #rule list and calls fn for each
// non-empty element.
func foreachHeaderElement(v string, fn func(string)) {
	v = textproto.TrimString(v)
	if v == "" {
		return
	}
	if !strings.Contains(v, ",") {
		fn(v)
		return
	}
	for f := range strings.SplitSeq(v, ",") {
		if f = textproto.TrimString(f); f != "" {
			fn(f)
		}
	}
}

// hasToken reports whether token appears in v, case-insensitively, on
// token boundaries (net/http's loose check).
func hasToken(v, token string) bool {
	if len(token) > len(v) || token == "" {
		return false
	}
	if v == token {
		return true
	}
	for sp := 0; sp <= len(v)-len(token); sp++ {
		if b := v[sp]; b != token[0] && b|0x20 != token[0] {
			continue
		}
		if sp > 0 && !isTokenBoundary(v[sp-1]) {
			continue
		}
		if endPos := sp + len(token); endPos != len(v) && !isTokenBoundary(v[endPos]) {
			continue
		}
		if headtext.EqualFold(v[sp:sp+len(token)], token) {
			return true
		}
	}
	return false
}

func isTokenBoundary(b byte) bool { return b == ' ' || b == ',' || b == '\t' }
