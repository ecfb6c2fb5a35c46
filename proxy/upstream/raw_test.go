package upstream

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"
)

// writeRequest and parseHead are checked against net/http itself: a
// request writeRequest writes must be the bytes req.Write writes, and an
// answer parseHead takes must be the *http.Response (and body, and what
// follows it) http.ReadResponse reads from the same bytes. The fuzzers'
// seeds run in go test; TestParseHeadTakes shows which seeds the fast
// parser takes, so the differential is not empty.

// headSeeds are answers, each with the request method it answers, and
// whether parseHead takes it.
var headSeeds = []struct {
	name   string
	method string
	raw    string
	takes  bool
}{
	{"plain", "GET", "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 11\r\n\r\n{\"ok\":true}", true},
	{"no reason", "GET", "HTTP/1.1 200\r\nContent-Length: 2\r\n\r\nhi", true},
	{"empty reason", "GET", "HTTP/1.1 404 \r\nContent-Length: 0\r\n\r\n", true},
	{"reason with obs-text", "GET", "HTTP/1.1 200 \xc3\xa9t\xc3\xa9\r\nContent-Length: 0\r\n\r\n", true},
	{"next answer after", "GET", "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhiHTTP/1.1 200 OK\r\n", true},
	{"keys canonical, values trimmed", "GET", "HTTP/1.1 200 OK\r\ncontent-length:  3 \t\r\nx-a-b: \t v \r\nX-EMPTY:\r\nwww-authenticate: Basic\r\n\r\nabc", true},
	{"repeated keys in any case", "GET", "HTTP/1.1 200 OK\r\nSet-Cookie: a=1\r\nX-One: 1\r\nset-cookie: b=2\r\nSET-COOKIE: c=3\r\nContent-Length: 0\r\n\r\n", true},
	{"chunked", "GET", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n", true},
	{"chunked with trailers", "GET", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\nX-Sum: 42\r\nx-more: a\r\n\r\n", true},
	{"chunked cut short", "GET", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhel", true},
	{"chunked bad size", "GET", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n", true},
	{"chunked trailer cut", "GET", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nX-A", true},
	{"length cut short", "GET", "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc", true},
	{"length leading zeros", "GET", "HTTP/1.1 200 OK\r\nContent-Length: 003\r\n\r\nabcdef", true},
	{"to the end", "GET", "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nall of it", true},
	{"1.0 to the end", "GET", "HTTP/1.0 200 OK\r\n\r\nall of it", true},
	{"1.0 keep-alive", "GET", "HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 2\r\n\r\nhi", true},
	{"1.0 close kept in header", "GET", "HTTP/1.0 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nhi", true},
	{"1.1 close removed from header", "GET", "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nhi", true},
	{"1.1 keep-alive, upgrade", "GET", "HTTP/1.1 200 OK\r\nConnection: keep-alive, Upgrade\r\nKeep-Alive: timeout=5\r\nContent-Length: 2\r\n\r\nhi", true},
	{"head with length", "HEAD", "HTTP/1.1 200 OK\r\nContent-Length: 1234\r\n\r\n", true},
	{"head without length", "HEAD", "HTTP/1.1 200 OK\r\n\r\n", true},
	{"head chunked", "HEAD", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", true},
	{"204 with length", "GET", "HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\n", true},
	{"304", "GET", "HTTP/1.1 304 Not Modified\r\nETag: \"x\"\r\n\r\n", true},
	{"304 chunked", "GET", "HTTP/1.1 304 Not Modified\r\nTransfer-Encoding: chunked\r\n\r\n", true},
	{"100 continue", "POST", "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", true},
	{"101", "GET", "HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\nConnection: Upgrade\r\n\r\n", true},
	{"pragma with cache-control", "GET", "HTTP/1.1 200 OK\r\nPragma: no-cache\r\nCache-Control: max-age=0\r\nContent-Length: 0\r\n\r\n", true},
	{"trailer header, not chunked", "GET", "HTTP/1.1 200 OK\r\nTrailer: X-Sum\r\nContent-Length: 0\r\n\r\n", true},
	{"500 no body", "GET", "HTTP/1.1 500 Internal Server Error\r\nContent-Length: 0\r\n\r\n", true},

	{"pragma alone", "GET", "HTTP/1.1 200 OK\r\nPragma: no-cache\r\nContent-Length: 0\r\n\r\n", false},
	{"chunked with trailer header", "GET", "HTTP/1.1 200 OK\r\nTrailer: X-Sum\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nX-Sum: 1\r\n\r\n", false},
	{"chunked and length", "GET", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n0\r\n\r\n", false},
	{"Chunked", "GET", "HTTP/1.1 200 OK\r\nTransfer-Encoding: Chunked\r\n\r\n0\r\n\r\n", false},
	{"gzip, chunked", "GET", "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n", false},
	{"1.0 chunked", "GET", "HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", false},
	{"two lengths", "GET", "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\nhi", false},
	{"signed length", "GET", "HTTP/1.1 200 OK\r\nContent-Length: +2\r\n\r\nhi", false},
	{"empty length", "GET", "HTTP/1.1 200 OK\r\nContent-Length:\r\n\r\nhi", false},
	{"obs-fold", "GET", "HTTP/1.1 200 OK\r\nX-A: 1\r\n 2\r\nContent-Length: 0\r\n\r\n", false},
	{"bare LF", "GET", "HTTP/1.1 200 OK\nContent-Length: 0\n\n", false},
	{"bare LF in headers", "GET", "HTTP/1.1 200 OK\r\nContent-Length: 0\n\r\n", false},
	{"bare CR in value", "GET", "HTTP/1.1 200 OK\r\nX-A: a\rb\r\nContent-Length: 0\r\n\r\n", false},
	{"NUL in value", "GET", "HTTP/1.1 200 OK\r\nX-A: a\x00b\r\nContent-Length: 0\r\n\r\n", false},
	{"space before colon", "GET", "HTTP/1.1 200 OK\r\nX-A : 1\r\nContent-Length: 0\r\n\r\n", false},
	{"no colon", "GET", "HTTP/1.1 200 OK\r\nX-A\r\nContent-Length: 0\r\n\r\n", false},
	{"HTTP/2.0", "GET", "HTTP/2.0 200 OK\r\nContent-Length: 0\r\n\r\n", false},
	{"two spaces", "GET", "HTTP/1.1  200 OK\r\nContent-Length: 0\r\n\r\n", false},
	{"code 99", "GET", "HTTP/1.1 099 X\r\nContent-Length: 0\r\n\r\n", false},
	{"code 600", "GET", "HTTP/1.1 600 X\r\nContent-Length: 0\r\n\r\n", false},
	{"code with letters", "GET", "HTTP/1.1 2OO OK\r\nContent-Length: 0\r\n\r\n", false},
	{"head incomplete", "GET", "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n", false},
	{"nothing", "GET", "", false},
}

// readBoth reads the head of raw with fastHead (the fast parser alone) and
// with http.ReadResponse, each from its own reader over raw (a connection
// reader's size: 4 KiB).
func readBoth(raw []byte, req *http.Request) (fast *http.Response, fastBody io.Reader, fbr *bufio.Reader, want *http.Response, wbr *bufio.Reader, werr error) {
	fbr = bufio.NewReaderSize(bytes.NewReader(raw), 4<<10)
	fbr.Peek(1)
	resp, body, ok := fastHead(fbr, req)
	if ok {
		fast = resp
		fastBody = http.NoBody
		if resp.Body == nil {
			fastBody = &body
		}
	}
	wbr = bufio.NewReaderSize(bytes.NewReader(raw), 4<<10)
	want, werr = http.ReadResponse(wbr, req)
	return
}

// sameAnswer says how fast differs from want, after reading each body with
// read; "" when they are the same: the head, the body and its error, the
// trailers, and the bytes left after the body.
func sameAnswer(fast *http.Response, fastBody io.Reader, fbr *bufio.Reader, want *http.Response, wbr *bufio.Reader, read func(io.Reader) ([]byte, error)) string {
	type head struct {
		Status               string
		StatusCode           int
		Proto                string
		ProtoMajor, ProtoMin int
		Header               http.Header
		ContentLength        int64
		TransferEncoding     []string
		Close, Uncompressed  bool
		Trailer              http.Header
		Request              *http.Request
		NoBody               bool
	}
	of := func(r *http.Response, noBody bool) head {
		return head{r.Status, r.StatusCode, r.Proto, r.ProtoMajor, r.ProtoMinor, r.Header, r.ContentLength,
			r.TransferEncoding, r.Close, r.Uncompressed, r.Trailer, r.Request, noBody}
	}
	if f, w := of(fast, fastBody == http.NoBody), of(want, want.Body == http.NoBody); !reflect.DeepEqual(f, w) {
		return fmt.Sprintf("head:\n fast %+v\n want %+v", f, w)
	}
	fb, ferr := read(fastBody)
	wb, werr := read(want.Body)
	if !bytes.Equal(fb, wb) || fmt.Sprint(ferr) != fmt.Sprint(werr) {
		return fmt.Sprintf("body:\n fast %q, %v\n want %q, %v", fb, ferr, wb, werr)
	}
	if !reflect.DeepEqual(fast.Trailer, want.Trailer) {
		return fmt.Sprintf("trailer after the body:\n fast %v\n want %v", fast.Trailer, want.Trailer)
	}
	if ferr == nil {
		// What a reused connection would read next.
		fr, _ := io.ReadAll(fbr)
		wr, _ := io.ReadAll(wbr)
		if !bytes.Equal(fr, wr) {
			return fmt.Sprintf("after the body:\n fast %q\n want %q", fr, wr)
		}
	}
	return ""
}

func readAllOneByte(r io.Reader) ([]byte, error) { return io.ReadAll(iotest.OneByteReader(r)) }

// checkHead fails t when parseHead takes raw and reads it otherwise than
// http.ReadResponse, and reports whether it took it.
func checkHead(t *testing.T, method string, raw []byte) bool {
	t.Helper()
	req := &http.Request{Method: method, URL: &url.URL{Scheme: "http", Host: "up", Path: "/"}, Header: http.Header{}}
	took := false
	for _, read := range []func(io.Reader) ([]byte, error){io.ReadAll, readAllOneByte} {
		fast, fastBody, fbr, want, wbr, werr := readBoth(raw, req)
		if fast == nil {
			return false
		}
		took = true
		if werr != nil {
			t.Fatalf("%q: parseHead took what http.ReadResponse refuses (%v)", raw, werr)
		}
		if d := sameAnswer(fast, fastBody, fbr, want, wbr, read); d != "" {
			t.Fatalf("%q: %s", raw, d)
		}
	}
	return took
}

func TestParseHeadTakes(t *testing.T) {
	for _, s := range headSeeds {
		t.Run(s.name, func(t *testing.T) {
			if took := checkHead(t, s.method, []byte(s.raw)); took != s.takes {
				t.Errorf("parseHead took it: %v, want %v", took, s.takes)
			}
		})
	}
}

// FuzzAnswerHead: whatever the bytes, an answer parseHead takes is read
// as http.ReadResponse reads it.
func FuzzAnswerHead(f *testing.F) {
	for _, s := range headSeeds {
		f.Add(s.method == "HEAD", []byte(s.raw))
	}
	f.Fuzz(func(t *testing.T, head bool, raw []byte) {
		method := "GET"
		if head {
			method = "HEAD"
		}
		checkHead(t, method, raw)
	})
}

// requestSeed is a request of FuzzRequestWrite: header lines are
// "name: value" split on "\n"; a body of length != declared is sent with
// the declared length.
type requestSeed struct {
	method, host, path, rawPath, query string
	headers                            string
	body                               string
	declared                           int64 // -1: len(body)
	close                              bool
}

var requestSeeds = []requestSeed{
	{"GET", "127.0.0.1:8080", "/v1/tools", "", "", "Accept: application/json", "", -1, false},
	{"POST", "127.0.0.1:8080", "/v1/tools/search", "", "q=1&b=%20", "Content-Type: application/json\nUser-Agent: agent/1.0\nX-B: 2\nX-A: 1\nx-lower: l\nX-Multi: a\nX-Multi: b", `{"q":"cats"}`, -1, false},
	{"", "example.com", "", "", "", "", "", -1, false},
	{"POST", "example.com", "/empty", "", "", "", "", -1, false},
	{"PUT", "example.com", "/p", "", "", "User-Agent:", "", -1, true},
	{"DELETE", "example.com", "/d", "", "", "User-Agent:   spaced  \nX-Trim: \t both \t", "", -1, false},
	{"PATCH", "[::1]:80", "/a b/ü", "", "x=ü", "Host: other\nContent-Length: 99\nTransfer-Encoding: chunked\nTrailer: X", "abc", -1, false},
	{"POST", "h", "/esc", "/%65sc", "", "", "abc", 5, false},
	{"POST", "h", "/long", "", "", "", "abcdef", 3, false},
	{"POST", "h", "/big", "", "", "", strings.Repeat("0123456789", 1000), -1, false},
	{"GET", "h", "/del\x7f", "", "", "", "", -1, false},           // escaped
	{"GET", "h", "/ua", "", "", "User-Agent: \t ", "", -1, false}, // a blank line of its own
	{"GET", "h", "/q", "", "a\nb", "", "", -1, false},
	{"GET", "h\x00", "/", "", "", "", "", -1, false},
	{"GET", "[fe80::1%25en0]:80", "/", "", "", "", "", -1, false},
	{"CONNECT", "h:443", "", "", "", "", "", -1, false},
	{"G T", "h", "/", "", "", "", "", -1, false},
	{"GET", "h", "/", "", "", "X-Break: a\r\nX-Evil: 1", "", -1, false},
	{"GET", "h", "/", "", "", "Bad Name: 1", "", -1, false},
	{"GET", "h", "/", "", "", "Connection: keep-alive", "", -1, true},
}

// newSeedRequest builds the request of s; ok is false when s does not
// make one.
func newSeedRequest(s requestSeed) (*http.Request, bool) {
	h := http.Header{}
	for line := range strings.SplitSeq(s.headers, "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			h[k] = append(h[k], v)
		}
	}
	req := &http.Request{
		Method: s.method, Header: h, Close: s.close,
		URL: &url.URL{Scheme: "http", Host: s.host, Path: s.path, RawPath: s.rawPath, RawQuery: s.query},
	}
	if s.declared < 0 {
		s.declared = int64(len(s.body))
	}
	if s.body != "" || s.declared != 0 {
		req.Body = io.NopCloser(strings.NewReader(s.body))
		req.ContentLength = s.declared
	}
	return req, true
}

// closeCounter counts a body's Close calls.
type closeCounter struct {
	io.Reader
	closes int
}

func (c *closeCounter) Close() error { c.closes++; return nil }

// checkWrite fails t when writeRequest writes s's request otherwise than
// req.Write, or writes anything when it does not take it; it reports
// whether it took it.
func checkWrite(t *testing.T, s requestSeed) bool {
	t.Helper()
	fastReq, _ := newSeedRequest(s)
	wantReq, _ := newSeedRequest(s)
	var fastCC, wantCC *closeCounter
	if fastReq.Body != nil {
		fastCC = &closeCounter{Reader: fastReq.Body}
		fastReq.Body = fastCC
		wantCC = &closeCounter{Reader: wantReq.Body}
		wantReq.Body = wantCC
	}
	var fast, want bytes.Buffer
	fbw := bufio.NewWriterSize(&fast, 4<<10)
	took, ferr := writeRequest(fbw, fastReq)
	fbw.Flush()
	if !took {
		if fast.Len() > 0 || (fastCC != nil && fastCC.closes > 0) {
			t.Fatalf("%+v: writeRequest did not take it but wrote %q (body closed %d times)", s, fast.Bytes(), fastCC.closes)
		}
		return false
	}
	wbw := bufio.NewWriterSize(&want, 4<<10)
	werr := wantReq.Write(wbw)
	wbw.Flush()
	if fmt.Sprint(ferr) != fmt.Sprint(werr) {
		t.Fatalf("%+v: writeRequest: %v, req.Write: %v", s, ferr, werr)
	}
	if !bytes.Equal(fast.Bytes(), want.Bytes()) {
		t.Fatalf("%+v:\n writeRequest %q\n req.Write    %q", s, fast.Bytes(), want.Bytes())
	}
	if fastCC != nil && fastCC.closes != wantCC.closes {
		t.Fatalf("%+v: body closed %d times, req.Write %d", s, fastCC.closes, wantCC.closes)
	}
	return true
}

func TestWriteRequestTakes(t *testing.T) {
	took := 0
	for _, s := range requestSeeds {
		if checkWrite(t, s) {
			took++
		}
	}
	// The first twelve seeds are what writeRequest writes itself, the
	// rest go to req.Write.
	if took != 12 {
		t.Errorf("writeRequest took %d of the seeds, want 12", took)
	}
}

// FuzzRequestWrite: whatever the request, one writeRequest takes is
// written as req.Write writes it.
func FuzzRequestWrite(f *testing.F) {
	for _, s := range requestSeeds {
		f.Add(s.method, s.host, s.path, s.rawPath, s.query, s.headers, s.body, s.declared, s.close)
	}
	f.Fuzz(func(t *testing.T, method, host, path, rawPath, query, headers, body string, declared int64, close bool) {
		if declared > 1<<20 {
			return
		}
		checkWrite(t, requestSeed{method, host, path, rawPath, query, headers, body, declared, close})
	})
}

// cannedUpstream answers every request on its connections with answer,
// allocating nothing per call, so that AllocsPerRun counts the client's
// allocations alone. It reads requests without bodies.
func cannedUpstream(t *testing.T, answer string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				buf := make([]byte, 4<<10)
				have := 0
				for {
					n, err := c.Read(buf[have:])
					if err != nil {
						return
					}
					have += n
					for {
						i := bytes.Index(buf[:have], []byte("\r\n\r\n"))
						if i < 0 {
							break
						}
						if _, err := io.WriteString(c, answer); err != nil {
							return
						}
						have = copy(buf, buf[i+4:have])
					}
					if have == len(buf) {
						return
					}
				}
			}()
		}
	}()
	return "http://" + ln.Addr().String() + "/v1/tool"
}

// maxCallAllocs is the most allocations a plain call through the fast
// path makes (RoundTrip, its body read to the end and closed): 19 with
// net/http's framing (Go 1.26).
const maxCallAllocs = 7

func TestUpstreamCallAllocs(t *testing.T) {
	u := cannedUpstream(t, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nDate: Wed, 02 Dec 2026 01:00:00 GMT\r\nContent-Length: 11\r\n\r\n{\"ok\":true}")
	_, fast := transports(t)
	req, err := http.NewRequest("GET", u, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "agent/1.0")
	buf := make([]byte, 64)
	call := func() {
		resp, err := fast.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		for err == nil {
			_, err = resp.Body.Read(buf)
		}
		if !errors.Is(err, io.EOF) {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	call() // the connection
	allocs := testing.AllocsPerRun(200, call)
	rawFraming = false
	std := testing.AllocsPerRun(200, call)
	rawFraming = true
	t.Logf("allocations per call: %.0f (net/http's framing: %.0f)", allocs, std)
	if allocs > maxCallAllocs {
		t.Errorf("a call allocates %.0f times, want at most %d", allocs, maxCallAllocs)
	}
}

// BenchmarkFraming writes a checked call's request and reads its answer
// (head and body) in memory, with writeRequest and parseHead ("raw") and
// with net/http's Request.Write and http.ReadResponse ("net"):
// go test -run '^$' -bench BenchmarkFraming -benchmem -count 5 ./proxy/upstream/
func BenchmarkFraming(b *testing.B) {
	body := []byte(`{"query":"cats","limit":5}`)
	answer := []byte("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nDate: Wed, 02 Dec 2026 01:00:00 GMT\r\nContent-Length: 200\r\n\r\n" + strings.Repeat("x", 200))
	u, _ := url.Parse("http://127.0.0.1:8080/v1/tools/search")
	h := http.Header{"Content-Type": {"application/json"}, "Accept": {"application/json"}, "User-Agent": {"agent/1.0"}, "X-Request-Id": {"4b3c"}}
	bw := bufio.NewWriterSize(io.Discard, 4<<10)
	src := bytes.NewReader(answer)
	br := bufio.NewReaderSize(src, 4<<10)
	buf := make([]byte, 512)
	for _, raw := range []bool{false, true} {
		name := "net"
		if raw {
			name = "raw"
		}
		b.Run(name, func(b *testing.B) {
			rawFraming = raw
			defer func() { rawFraming = true }()
			b.ReportAllocs()
			for b.Loop() {
				held := bytes.NewReader(body)
				req := &http.Request{Method: "POST", URL: u, Header: h, Body: io.NopCloser(held), ContentLength: int64(len(body))}
				ok, err := writeRequest(bw, req)
				if !ok {
					err = req.Write(bw)
				}
				if err != nil {
					b.Fatal(err)
				}
				bw.Flush()
				src.Reset(answer)
				br.Reset(src)
				br.Peek(1)
				resp, rb, err := readHead(br, req)
				if err != nil {
					b.Fatal(err)
				}
				var r io.Reader = resp.Body
				if resp.Body == nil {
					r = &rb
				}
				for err == nil {
					_, err = r.Read(buf)
				}
			}
		})
	}
}

// TestHostPort checks hostPort is the address net.JoinHostPort makes of a
// URL's host and port (80 when it names none), for hosts that need
// brackets, have none, or carry a zone.
func TestHostPort(t *testing.T) {
	for _, host := range []string{
		"a.example:8080", "a.example", "A.Example:80", "a.example:", "127.0.0.1:1",
		"[::1]:80", "[::1]", "[fe80::1%en0]:8080", "a:b:80", ":80", "", "[::1]x:80",
	} {
		u := &url.URL{Scheme: "http", Host: host}
		want := net.JoinHostPort(u.Hostname(), portOr(u.Port(), "80"))
		if got := hostPort(u); got != want {
			t.Errorf("hostPort(%q) = %q, want %q", host, got, want)
		}
	}
}
