package h1serve

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"net/url"
	"strings"

	"golang.org/x/net/http/httpguts"

	"github.com/toolgate/toolgate/proxy/internal/headtext"
)

// maxHeadLines is the most header lines readHead reads; a head with more
// is left to http.ReadRequest.
const maxHeadLines = 64

// headLine is where one header line's name and value lie in a head.
type headLine struct {
	name, nameEnd, val, valEnd int32
	// canon: the name is already in canonical form (textproto's).
	canon bool
}

// readHead reads a request head from the bytes br already holds, in
// place, when the head is in a subset of HTTP/1.1 whose reading by
// http.ReadRequest is plain; ok is false for any other head, and then
// nothing has been read from br: the caller reads it with
// http.ReadRequest, as before, so every refusal and every error is the
// standard library's.
//
// The subset: a request line of a token method other than CONNECT, a
// target of visible ASCII in origin form ("/...") or absolute form
// ("http://..."), that url.ParseRequestURI takes, and "HTTP/1.1"; then at
// most maxHeadLines lines of a token name, a colon and a value of visible
// ASCII, spaces and tabs; every line ended by CRLF; the whole head in
// br's buffer. Exactly one Host line; at most one Content-Length, of 1 to
// 18 digits; no Transfer-Encoding (a chunked body is read by ReadRequest)
// and no Pragma (ReadRequest adds a Cache-Control for one). Anything else
// (obs-fold, a bare CR or LF, a LF-only line, a space before a colon, a
// control byte or a byte over 0x7e, another version) is not read here.
//
// The Request is the one ReadRequest would give (FuzzRequestHead holds it
// to that), built with few allocations: one string holds the method, the
// target, the header values and the names (in place when already
// canonical); the Request, its body, the backing array of up to 8
// values and a plain target's URL (plainTarget) are hb (the loop's response holds it, so they cost no allocation
// of their own; nil: one allocation); the map is sized once. host is the
// Host line's value (ReadRequest drops the line).
func readHead(br *bufio.Reader, hb *headRequest) (req *http.Request, host string, ok bool) {
	buf, _ := br.Peek(br.Buffered())
	end := bytes.Index(buf, crlfcrlf)
	if end < 0 {
		return nil, "", false
	}
	head := buf[:end+4]

	// The request line: method SP target SP "HTTP/1.1" CRLF.
	i := 0
	for i < len(head) && head[i] != ' ' {
		if !httpguts.IsTokenRune(rune(head[i])) {
			return nil, "", false
		}
		i++
	}
	methodEnd := i
	if methodEnd == 0 || i == len(head) {
		return nil, "", false
	}
	i++
	target := i
	for i < len(head) && head[i] != ' ' {
		if head[i] < 0x21 || head[i] > 0x7e {
			return nil, "", false
		}
		i++
	}
	targetEnd := i
	if targetEnd == target || !bytes.HasPrefix(head[i:], versionCRLF) {
		return nil, "", false
	}
	if t := head[target:targetEnd]; t[0] != '/' && !bytes.HasPrefix(t, []byte("http://")) {
		return nil, "", false
	}
	if string(head[:methodEnd]) == http.MethodConnect {
		return nil, "", false
	}
	i += len(versionCRLF)

	// The header lines, up to the empty line.
	var lines [maxHeadLines]headLine
	n, hostLine, clLine := 0, -1, -1
	extra := 0 // bytes of names to write in canonical form
	for i < end+2 {
		if n == maxHeadLines {
			return nil, "", false
		}
		l := headLine{name: int32(i), canon: true}
		upper := true
		for i < len(head) && head[i] != ':' {
			c := head[i]
			if !httpguts.IsTokenRune(rune(c)) {
				return nil, "", false
			}
			if upper && 'a' <= c && c <= 'z' || !upper && 'A' <= c && c <= 'Z' {
				l.canon = false
			}
			upper = c == '-'
			i++
		}
		l.nameEnd = int32(i)
		if l.nameEnd == l.name || i == len(head) {
			return nil, "", false
		}
		i++ // the colon
		for i < len(head) && (head[i] == ' ' || head[i] == '\t') {
			i++
		}
		l.val = int32(i)
		for i < len(head) && head[i] != '\r' {
			if c := head[i]; c != '\t' && (c < 0x20 || c > 0x7e) {
				return nil, "", false
			}
			i++
		}
		if i+1 >= len(head) || head[i+1] != '\n' {
			return nil, "", false
		}
		l.valEnd = int32(i)
		for l.valEnd > l.val && (head[l.valEnd-1] == ' ' || head[l.valEnd-1] == '\t') {
			l.valEnd--
		}
		i += 2
		name := head[l.name:l.nameEnd]
		switch {
		case headtext.EqualFold(name, "host"):
			if hostLine >= 0 {
				return nil, "", false
			}
			hostLine = n
		case headtext.EqualFold(name, "content-length"):
			if clLine >= 0 || !digits(head[l.val:l.valEnd]) {
				return nil, "", false
			}
			clLine = n
		case headtext.EqualFold(name, "transfer-encoding"), headtext.EqualFold(name, "pragma"):
			return nil, "", false
		}
		if !l.canon {
			extra += len(name)
		}
		lines[n] = l
		n++
	}
	if hostLine < 0 {
		return nil, "", false
	}

	// One string for the head (and the names not in canonical form, after
	// it): every string of the Request is a part of it.
	var sb strings.Builder
	sb.Grow(len(head) + extra)
	sb.Write(head)
	for k := range n {
		l := &lines[k]
		if l.canon {
			continue
		}
		at := sb.Len()
		headtext.WriteCanonical(&sb, head[l.name:l.nameEnd])
		l.name, l.nameEnd = int32(at), int32(sb.Len())
	}
	s := sb.String()

	if hb == nil {
		hb = new(headRequest)
	}
	u := &hb.url
	if !plainTarget(u, s[target:targetEnd]) {
		var err error
		if u, err = url.ParseRequestURI(s[target:targetEnd]); err != nil {
			return nil, "", false
		}
	}
	h := make(http.Header, n-1)
	vals := hb.vals[:]
	if n-1 > len(vals) {
		vals = make([]string, n-1)
	}
	for k := range n {
		l := lines[k]
		if k == hostLine {
			continue
		}
		key, v := s[l.name:l.nameEnd], s[l.val:l.valEnd]
		if vv := h[key]; vv != nil {
			h[key] = append(vv, v)
		} else {
			vv, vals = vals[:1:1], vals[1:]
			vv[0] = v
			h[key] = vv
		}
	}
	host = s[lines[hostLine].val:lines[hostLine].valEnd]

	req = &hb.req
	req.Method = s[:methodEnd]
	req.URL = u
	req.Proto, req.ProtoMajor, req.ProtoMinor = "HTTP/1.1", 1, 1
	req.Header = h
	req.Host = u.Host
	if req.Host == "" {
		req.Host = host
	}
	req.Close = httpguts.HeaderValuesContainsToken(h["Connection"], "close")
	req.RequestURI = s[target:targetEnd]
	req.Body = http.NoBody
	if clLine >= 0 {
		l := lines[clLine]
		cl := parseDigits(s[l.val:l.valEnd])
		req.ContentLength = cl
		if cl > 0 {
			hb.body.src = io.LimitedReader{R: br, N: cl}
			req.Body = &hb.body
		}
	}
	br.Discard(len(head))
	return req, host, true
}

var (
	crlfcrlf    = []byte("\r\n\r\n")
	versionCRLF = []byte(" HTTP/1.1\r\n")
)

// headRequest is a Request read by readHead, its body and the backing
// array of a header of up to 8 values, held together. Each request has
// its own: the handler keeps what it was given.
type headRequest struct {
	req  http.Request
	body headBody
	vals [8]string
	url  url.URL // the Request's URL when plainTarget read it
}

// plainTarget reads into u the URL url.ParseRequestURI makes of t when t
// is of the plainest form, and reports whether it was: a path of bytes
// neither escaped nor unescaped ("/", letters, digits, "-", ".", "_",
// "~"), not starting "//", after nothing (origin form) or after "http://"
// and a host of letters, digits, "." and "-" with an optional port of
// digits (absolute form); no query, no "%". Any other target is left to
// ParseRequestURI. TestPlainTargetSameAsParseRequestURI and
// FuzzPlainTarget hold it to ParseRequestURI.
func plainTarget(u *url.URL, t string) bool {
	var host string
	path := t
	if rest, ok := strings.CutPrefix(t, "http://"); ok {
		slash := strings.IndexByte(rest, '/')
		if slash <= 0 {
			return false
		}
		host, path = rest[:slash], rest[slash:]
		port := false
		for i := 0; i < len(host); i++ {
			c := host[i]
			switch {
			case c == ':':
				if port || i == 0 || i == len(host)-1 {
					return false
				}
				port = true
			case port:
				if c < '0' || c > '9' {
					return false
				}
			case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '.', c == '-':
			default:
				return false
			}
		}
	}
	if len(path) == 0 || path[0] != '/' || strings.HasPrefix(path, "//") {
		return false
	}
	for i := 1; i < len(path); i++ {
		switch c := path[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '/', c == '-', c == '.', c == '_', c == '~':
		default:
			return false
		}
	}
	*u = url.URL{Path: path, Host: host}
	if host != "" {
		u.Scheme = "http"
	}
	return true
}

// headBody is a body of declared length as ReadRequest gives it: the
// bytes, io.EOF with the last of them, io.ErrUnexpectedEOF when the
// stream ends before them. Closing it reads nothing (the loop's body does
// what a server does with an unread rest).
type headBody struct {
	src    io.LimitedReader
	sawEOF bool
}

func (b *headBody) Read(p []byte) (n int, err error) {
	// net/http's body.readLocked, for a body of declared length.
	if b.sawEOF {
		return 0, io.EOF
	}
	n, err = b.src.Read(p)
	if err == io.EOF {
		b.sawEOF = true
		if b.src.N > 0 {
			err = io.ErrUnexpectedEOF
		}
	}
	if err == nil && n > 0 && b.src.N == 0 {
		err = io.EOF
		b.sawEOF = true
	}
	return n, err
}

func (b *headBody) Close() error { return nil }

// digits reports whether b is 1 to 18 decimal digits (a number
// strconv.ParseUint(b, 10, 63) takes).
func digits(b []byte) bool {
	if len(b) == 0 || len(b) > 18 {
		return false
	}
	for _, c := range b {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// parseDigits is the value of a string digits accepted.
func parseDigits(s string) int64 {
	var n int64
	for i := 0; i < len(s); i++ {
		n = n*10 + int64(s[i]-'0')
	}
	return n
}
