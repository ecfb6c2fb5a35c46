package upstream

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/http/httputil"
	"net/textproto"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/net/http/httpguts"

	"github.com/toolgate/toolgate/proxy/internal/headtext"
)

// This file is the fast path's own HTTP/1.1 framing: writeRequest writes a
// request's head and held body as Request.Write would, byte for byte, and
// parseHead reads an answer's head from the bytes a connection already
// holds as http.ReadResponse would, into an equal *http.Response. Each
// takes only a conservative subset of messages and says so; anything else
// goes to net/http as before (exchange), which stays the reference of the
// differential tests and fuzzers in raw_test.go. They exist because
// net/http's request writing and answer parsing were most of the
// forwarding CPU and ~20 allocations per call (docs/performance.md).

// maxRawKeys is the most header keys writeRequest writes itself, and
// maxRawLines the most header lines parseHead reads itself: the rest go
// to net/http.
const (
	maxRawKeys  = 32
	maxRawLines = 64
)

// defaultUserAgent is what Request.Write sends when the request has no
// User-Agent header.
const defaultUserAgent = "Go-http-client/1.1"

// writeRequest writes req on bw as req.Write(bw) would: the same bytes, the
// same errors, req.Body read and closed alike. It reports false, having
// written and read nothing, when req is outside what it writes itself (a
// CONNECT, an opaque URL, a Host net/http would rewrite or refuse, a body
// without a known length, a Transfer-Encoding or trailers, a value with a
// line break, many headers, an httptrace.ClientTrace in its context); the
// caller then calls req.Write.
func writeRequest(bw *bufio.Writer, req *http.Request) (bool, error) {
	u := req.URL
	if !rawFraming || u == nil || u.Opaque != "" || len(req.TransferEncoding) > 0 || len(req.Trailer) > 0 {
		return false, nil
	}
	method := req.Method
	if method == "" {
		method = http.MethodGet
	}
	if method == http.MethodConnect || !validMethod(method) {
		return false, nil
	}
	if _, ok := req.Header["Connection"]; ok && req.Close {
		return false, nil // Request.Write reads it for "close"
	}
	if httptrace.ContextClientTrace(req.Context()) != nil {
		return false, nil // Request.Write reports to its hooks
	}
	host := req.Host
	if host == "" {
		host = u.Host
	}
	// Request.Write punycodes a host that is not ASCII, sends an empty
	// Host for one that is not a valid header, and drops an IPv6 zone.
	if !isASCII(host) || !httpguts.ValidHostHeader(host) || (strings.HasPrefix(host, "[") && strings.Contains(host, "%")) {
		return false, nil
	}
	path := u.EscapedPath()
	if path == "" {
		path = "/"
	}
	hasQuery := u.ForceQuery || u.RawQuery != ""
	if hasCTL(path) || (hasQuery && hasCTL(u.RawQuery)) {
		return false, nil
	}
	// The body's length, as Request.Write decides it: a body of unknown
	// length (chunked) or a length without a body is net/http's.
	length := req.ContentLength
	body := req.Body
	if body == nil || body == http.NoBody {
		if length != 0 {
			return false, nil
		}
	} else if length <= 0 {
		return false, nil
	}
	ua, hasUA := defaultUserAgent, false
	if vs, ok := req.Header["User-Agent"]; ok {
		hasUA = true
		ua = ""
		if len(vs) > 0 {
			ua = vs[0]
		}
	}
	var keyArr [maxRawKeys]string
	keys := keyArr[:0]
	for k, vs := range req.Header {
		switch k {
		case "Host", "User-Agent", "Content-Length", "Transfer-Encoding", "Trailer":
			continue
		}
		if len(keys) == maxRawKeys || !httpguts.ValidHeaderFieldName(k) {
			return false, nil
		}
		for _, v := range vs {
			if strings.ContainsAny(v, "\r\n") {
				return false, nil
			}
		}
		keys = append(keys, k)
	}
	if hasUA && strings.ContainsAny(ua, "\r\n") {
		return false, nil
	}
	writeUA := ua != "" // before trimming, as in Request.Write
	ua = textproto.TrimString(ua)

	bw.WriteString(method)
	bw.WriteByte(' ')
	bw.WriteString(path)
	if hasQuery {
		bw.WriteByte('?')
		bw.WriteString(u.RawQuery)
	}
	bw.WriteString(" HTTP/1.1\r\nHost: ")
	bw.WriteString(host)
	bw.WriteString("\r\n")
	if writeUA {
		bw.WriteString("User-Agent: ")
		bw.WriteString(ua)
		bw.WriteString("\r\n")
	}
	if req.Close {
		// Connection is never among the headers of a fast-path call (fast).
		bw.WriteString("Connection: close\r\n")
	}
	if length > 0 || method == http.MethodPost || method == http.MethodPut || method == http.MethodPatch {
		bw.WriteString("Content-Length: ")
		bw.Write(strconv.AppendInt(bw.AvailableBuffer(), length, 10))
		bw.WriteString("\r\n")
	}
	slices.Sort(keys)
	for _, k := range keys {
		for _, v := range req.Header[k] {
			bw.WriteString(k)
			bw.WriteString(": ")
			bw.WriteString(textproto.TrimString(v))
			bw.WriteString("\r\n")
		}
	}
	_, err := bw.WriteString("\r\n")
	if body == nil {
		return true, err
	}
	// The body as Request.Write copies it: length bytes, then the rest
	// read (a longer body is an error), then closed.
	var ncopy int64
	for err == nil && ncopy < length {
		if bw.Available() == 0 {
			if err = bw.Flush(); err != nil {
				break
			}
		}
		buf := bw.AvailableBuffer()[:min(int64(bw.Available()), length-ncopy)]
		n, rerr := body.Read(buf)
		bw.Write(buf[:n])
		ncopy += int64(n)
		if rerr == io.EOF {
			break
		}
		err = rerr
	}
	if err == nil {
		var extra int64
		extra, err = io.Copy(io.Discard, body)
		ncopy += extra
	}
	if cerr := body.Close(); err == nil {
		err = cerr
	}
	if err == nil && ncopy != length {
		err = fmt.Errorf("http: ContentLength=%d with Body length %d", length, ncopy)
	}
	return true, err
}

// hasCTL is net/http's test of a request-URI: a control byte or DEL.
func hasCTL(s string) bool {
	for i := 0; i < len(s); i++ {
		if b := s[i]; b < ' ' || b == 0x7f {
			return true
		}
	}
	return false
}

// What a body is framed by.
const (
	bodyLength  = iota // Content-Length
	bodyChunked        // Transfer-Encoding: chunked
	bodyToEOF          // the connection's end
)

// rawBody reads an answer's body from its connection's reader by the
// framing parseHead found, as net/http's body does: io.ErrUnexpectedEOF
// for a Content-Length body cut short, io.EOF with the last bytes, a
// chunked body through httputil's chunked reader (net/http's own) and its
// trailers into the answer's Trailer.
type rawBody struct {
	// spare is the h1Body allocated with the answer (parsedAnswer), for
	// the transport to read the body through.
	spare *h1Body
	br    *bufio.Reader
	resp  *http.Response // receives a chunked body's trailers
	mode  int
	n     int64     // bytes left of a Content-Length body
	cr    io.Reader // the chunked reader
	ended bool
	after error // what reads return once ended: io.EOF, or ErrBodyReadAfterClose after a bad trailer
}

func (b *rawBody) Read(p []byte) (int, error) {
	if b.ended {
		return 0, b.after
	}
	switch b.mode {
	case bodyLength:
		if b.n <= 0 {
			b.ended, b.after = true, io.EOF
			return 0, io.EOF
		}
		if int64(len(p)) > b.n {
			p = p[:b.n]
		}
		n, err := b.br.Read(p)
		b.n -= int64(n)
		switch {
		case err == io.EOF:
			b.ended, b.after = true, io.EOF
			if b.n > 0 {
				err = io.ErrUnexpectedEOF
			}
		case err == nil && n > 0 && b.n == 0:
			b.ended, b.after, err = true, io.EOF, io.EOF
		}
		return n, err
	case bodyChunked:
		n, err := b.cr.Read(p)
		if err == io.EOF {
			b.ended, b.after = true, io.EOF
			if terr := b.readTrailer(); terr != nil {
				err, b.after = terr, http.ErrBodyReadAfterClose
			}
		}
		return n, err
	default:
		n, err := b.br.Read(p)
		if err == io.EOF {
			b.ended, b.after = true, io.EOF
		}
		return n, err
	}
}

// errTrailerEOF is net/http's error for a trailer cut short.
var errTrailerEOF = errors.New("http: unexpected EOF reading trailer")

// readTrailer reads the trailer after a chunked body's last chunk, as
// net/http's body does: bounded by the reader's buffer.
func (b *rawBody) readTrailer() error {
	buf, err := b.br.Peek(2)
	if bytes.Equal(buf, []byte("\r\n")) {
		b.br.Discard(2)
		return nil
	}
	if len(buf) < 2 {
		return errTrailerEOF
	}
	if err != nil {
		return err
	}
	if !seeUpcomingDoubleCRLF(b.br) {
		return errors.New("http: suspiciously long trailer after chunked body")
	}
	hdr, err := textproto.NewReader(b.br).ReadMIMEHeader()
	if err != nil {
		if err == io.EOF {
			return errTrailerEOF
		}
		return err
	}
	if b.resp.Trailer == nil {
		b.resp.Trailer = http.Header(hdr)
	} else {
		for k, v := range hdr {
			b.resp.Trailer[k] = v
		}
	}
	return nil
}

func seeUpcomingDoubleCRLF(r *bufio.Reader) bool {
	for peekSize := 4; ; peekSize++ {
		// Peek fails once r's buffer is full.
		buf, err := r.Peek(peekSize)
		if bytes.HasSuffix(buf, []byte("\r\n\r\n")) {
			return true
		}
		if err != nil {
			return false
		}
	}
}

// readHead reads an answer's head from br: with parseHead from the bytes
// br holds already, else with http.ReadResponse as before. When resp.Body
// is nil, body reads the answer's body.
func readHead(br *bufio.Reader, req *http.Request) (resp *http.Response, body rawBody, err error) {
	if resp, body, ok := fastHead(br, req); ok {
		return resp, body, nil
	}
	resp, err = http.ReadResponse(br, req)
	return resp, rawBody{}, err
}

// fastHead is readHead's own parse: it consumes the head from br and
// reports true when parseHead took it, and reads nothing otherwise.
func fastHead(br *bufio.Reader, req *http.Request) (*http.Response, rawBody, bool) {
	if !rawFraming {
		return nil, rawBody{}, false
	}
	buf, _ := br.Peek(br.Buffered())
	resp, body, n, ok := parseHead(buf, req)
	if !ok {
		return nil, rawBody{}, false
	}
	br.Discard(n)
	body.br = br
	if body.mode == bodyChunked {
		body.cr = httputil.NewChunkedReader(br)
	}
	return resp, body, true
}

// rawFraming turns writeRequest and parseHead on; tests turn it off to
// measure net/http's framing beside them.
var rawFraming = true

// headLine is one header line of a head: its name and trimmed value, as
// offsets into the head.
type headLine struct{ k0, k1, v0, v1 int }

// parseHead parses the answer head at the start of buf, the bytes a
// connection's reader holds (it reads nothing), into the *http.Response
// http.ReadResponse(br, req) would return for them, and body's framing
// (when resp.Body is not http.NoBody, the caller reads the body through
// body). n is the head's length. It accepts only what it is sure of: an
// HTTP/1.1 or 1.0 status line with a code from 100 to 599 and a reason of
// header-value bytes, at most maxRawLines header lines of a name of token
// characters, a colon and a value of valid bytes, each ended by CRLF (no
// bare LF, no obs-fold), at most one Content-Length of at most 18 digits,
// Transfer-Encoding only as one "chunked" on HTTP/1.1 without a
// Content-Length or a Trailer header, no Pragma: no-cache without
// Cache-Control; and a head complete in buf. ok is false otherwise, and
// the caller reads the head with http.ReadResponse.
func parseHead(buf []byte, req *http.Request) (resp *http.Response, body rawBody, n int, ok bool) {
	// The status line.
	eol := bytes.IndexByte(buf, '\n')
	if eol < 13 || buf[eol-1] != '\r' {
		return nil, body, 0, false
	}
	line := buf[:eol-1]
	var minor int
	switch {
	case bytes.HasPrefix(line, []byte("HTTP/1.1 ")):
		minor = 1
	case bytes.HasPrefix(line, []byte("HTTP/1.0 ")):
	default:
		return nil, body, 0, false
	}
	c0, c1, c2 := line[9], line[10], line[11]
	if c0 < '1' || c0 > '5' || c1 < '0' || c1 > '9' || c2 < '0' || c2 > '9' || (len(line) > 12 && line[12] != ' ') {
		return nil, body, 0, false
	}
	code := int(c0-'0')*100 + int(c1-'0')*10 + int(c2-'0')
	for _, c := range line[12:] {
		if !validValueByte(c) {
			return nil, body, 0, false
		}
	}
	// The header lines.
	var lineArr [maxRawLines]headLine
	lines := lineArr[:0]
	size := len(line) - 9 // the status, then each name and value
	pos := eol + 1
	for {
		if len(buf)-pos < 2 {
			return nil, body, 0, false
		}
		if buf[pos] == '\r' && buf[pos+1] == '\n' {
			n = pos + 2
			break
		}
		eol := bytes.IndexByte(buf[pos:], '\n')
		if eol < 1 || buf[pos+eol-1] != '\r' || len(lines) == maxRawLines {
			return nil, body, 0, false
		}
		end := pos + eol - 1
		k1 := pos
		for k1 < end && validHeaderFieldByte(buf[k1]) {
			k1++
		}
		if k1 == pos || k1 == end || buf[k1] != ':' {
			return nil, body, 0, false
		}
		v0, v1 := k1+1, end
		for _, c := range buf[v0:v1] {
			if !validValueByte(c) {
				return nil, body, 0, false
			}
		}
		for v0 < v1 && (buf[v0] == ' ' || buf[v0] == '\t') {
			v0++
		}
		for v1 > v0 && (buf[v1-1] == ' ' || buf[v1-1] == '\t') {
			v1--
		}
		lines = append(lines, headLine{pos, k1, v0, v1})
		size += k1 - pos + v1 - v0
		pos += eol + 1
	}

	// One string holds the status and every name (canonical) and value;
	// one array every value; the map is sized once.
	var sb strings.Builder
	sb.Grow(size)
	sb.Write(line[9:])
	var first [maxRawLines]uint8 // the line of each line's key's first use
	keys := 0
	for i, l := range lines {
		first[i] = uint8(i)
		for j := range i {
			if first[j] == uint8(j) && headtext.EqualFold(buf[lines[j].k0:lines[j].k1], buf[l.k0:l.k1]) {
				first[i] = uint8(j)
				break
			}
		}
		if first[i] == uint8(i) {
			keys++
		}
		headtext.WriteCanonical(&sb, buf[l.k0:l.k1])
		sb.Write(buf[l.v0:l.v1])
	}
	s := sb.String()
	a := new(parsedAnswer)
	h := make(http.Header, keys)
	vals := a.vals[:]
	if len(lines) > len(vals) {
		vals = make([]string, len(lines))
	}
	at := len(line) - 9
	next := 0 // in vals
	var keyAt [maxRawLines]int
	for i, l := range lines {
		keyAt[i] = at
		at += l.k1 - l.k0 + l.v1 - l.v0
	}
	for i, l := range lines {
		if first[i] != uint8(i) {
			continue
		}
		start := next
		for j := i; j < len(lines); j++ {
			if first[j] == uint8(i) {
				lj := lines[j]
				v := keyAt[j] + lj.k1 - lj.k0
				vals[next] = s[v : v+lj.v1-lj.v0]
				next++
			}
		}
		h[s[keyAt[i]:keyAt[i]+l.k1-l.k0]] = vals[start:next:next]
	}

	// What ReadResponse makes of them (fixPragmaCacheControl, readTransfer).
	if p := h["Pragma"]; len(p) > 0 && p[0] == "no-cache" {
		if _, cc := h["Cache-Control"]; !cc {
			return nil, body, 0, false
		}
	}
	chunked := false
	if te, has := h["Transfer-Encoding"]; has {
		_, cl := h["Content-Length"]
		_, tr := h["Trailer"]
		if minor == 0 || len(te) != 1 || te[0] != "chunked" || cl || tr {
			return nil, body, 0, false
		}
		chunked = true
		delete(h, "Transfer-Encoding")
	}
	var length int64 = -1
	if cl, has := h["Content-Length"]; has {
		if len(cl) != 1 || len(cl[0]) == 0 || len(cl[0]) > 18 {
			return nil, body, 0, false
		}
		length = 0
		for _, c := range []byte(cl[0]) {
			if c < '0' || c > '9' {
				return nil, body, 0, false
			}
			length = length*10 + int64(c-'0')
		}
	}
	conn := h["Connection"]
	hasClose := httpguts.HeaderValuesContainsToken(conn, "close")
	closing := hasClose
	if minor == 0 {
		closing = hasClose || !httpguts.HeaderValuesContainsToken(conn, "keep-alive")
	} else if hasClose {
		delete(h, "Connection")
	}
	head := req != nil && req.Method == http.MethodHead
	allowed := code >= 200 && code != 204 && code != 304
	real := length
	switch {
	case head || !allowed:
		real = 0
	case chunked:
		real = -1
	}
	resp = &a.resp
	*resp = http.Response{
		Status: s[:len(line)-9], StatusCode: code,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: minor,
		Header: h, ContentLength: real, Request: req,
	}
	if minor == 0 {
		resp.Proto = "HTTP/1.0"
	}
	if head {
		resp.ContentLength = length
	}
	if chunked {
		resp.TransferEncoding = []string{"chunked"}
	}
	if real == -1 && !chunked && allowed {
		closing = true
	}
	resp.Close = closing
	body = rawBody{resp: resp, spare: &a.body}
	switch {
	case chunked:
		if head || !allowed {
			resp.Body = http.NoBody
		} else {
			body.mode = bodyChunked
		}
	case real == 0:
		resp.Body = http.NoBody
	case real > 0:
		body.mode, body.n = bodyLength, real
	case closing:
		body.mode = bodyToEOF
	default:
		resp.Body = http.NoBody
	}
	return resp, body, n, true
}

// parsedAnswer is what parseHead allocates for an answer: the Response,
// the backing array of a header of up to 8 values, and the body the
// transport reads it through, in one allocation. Each answer has its own.
type parsedAnswer struct {
	resp http.Response
	vals [8]string
	body h1Body
}

// validValueByte is textproto's rule for a header value's bytes: visible
// ASCII, space, tab, and any byte from 0x80.
func validValueByte(c byte) bool {
	return c >= 0x80 || (c >= 0x20 && c != 0x7f) || c == '\t'
}

// validHeaderFieldByte is textproto's rule for a header name's bytes: a
// token character.
func validHeaderFieldByte(c byte) bool {
	return c < 0x80 && httpguts.IsTokenRune(rune(c))
}
