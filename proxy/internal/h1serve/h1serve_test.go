package h1serve

import (
	"bytes"
	"io"
	"log"
	"net"
	"strings"
	"testing"
)

const testMaxHeader = 4096

// diffCases are raw request streams: ordinary, pipelined and hostile.
var diffCases = []struct{ name, raw string }{
	{"get", "GET /hello HTTP/1.1\r\nHost: a.test\r\n\r\n"},
	{"echo request", "GET /x/y?q=1&r=%20 HTTP/1.1\r\nHost: a.test\r\nUser-Agent: t\r\nX-Two: 1\r\nX-Two: 2\r\n\r\n"},
	{"pipelined", "GET /hello HTTP/1.1\r\nHost: a\r\n\r\nGET /json HTTP/1.1\r\nHost: a\r\n\r\nGET /big HTTP/1.1\r\nHost: a\r\n\r\nGET /empty HTTP/1.1\r\nHost: a\r\n\r\n"},
	{"pipelined close", "GET /hello HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\nGET /json HTTP/1.1\r\nHost: a\r\n\r\n"},
	{"handler close", "GET /close HTTP/1.1\r\nHost: a\r\n\r\nGET /json HTTP/1.1\r\nHost: a\r\n\r\n"},
	{"head", "HEAD /hello HTTP/1.1\r\nHost: a\r\n\r\nHEAD /empty HTTP/1.1\r\nHost: a\r\n\r\nHEAD /big HTTP/1.1\r\nHost: a\r\n\r\nHEAD /cl HTTP/1.1\r\nHost: a\r\n\r\nHEAD /json HTTP/1.1\r\nHost: a\r\n\r\n"},
	{"http10", "GET /hello HTTP/1.0\r\n\r\n"},
	{"http10 keep-alive", "GET /cl HTTP/1.0\r\nConnection: keep-alive\r\n\r\nGET /hello HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"},
	{"http09", "GET /hello\r\n\r\n"},
	{"http2 version", "GET /hello HTTP/2.0\r\nHost: a\r\n\r\n"},
	{"pri", "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"},
	{"http12", "GET /hello HTTP/1.2\r\nHost: a\r\n\r\n"},
	{"statuses", "GET /204 HTTP/1.1\r\nHost: a\r\n\r\nGET /304 HTTP/1.1\r\nHost: a\r\n\r\nGET /103 HTTP/1.1\r\nHost: a\r\n\r\nGET /status-999 HTTP/1.1\r\nHost: a\r\n\r\nGET /header-after HTTP/1.1\r\nHost: a\r\n\r\n"},
	{"bad status", "GET /status-bad HTTP/1.1\r\nHost: a\r\n\r\n"},
	{"sniff", "GET /html HTTP/1.1\r\nHost: a\r\n\r\nGET /gzip HTTP/1.1\r\nHost: a\r\n\r\nGET /dated HTTP/1.1\r\nHost: a\r\n\r\nGET /writestring HTTP/1.1\r\nHost: a\r\n\r\n"},
	{"lengths written at once", "GET /big-cl HTTP/1.1\r\nHost: a\r\n\r\nGET /big-cl-3 HTTP/1.1\r\nHost: a\r\n\r\nGET /huge-cl HTTP/1.1\r\nHost: a\r\n\r\nHEAD /big-cl-3 HTTP/1.1\r\nHost: a\r\n\r\nGET /hello HTTP/1.1\r\nHost: a\r\n\r\n"},
	{"lengths", "GET /cl HTTP/1.1\r\nHost: a\r\n\r\nGET /big-cl HTTP/1.1\r\nHost: a\r\n\r\nGET /cl-bad HTTP/1.1\r\nHost: a\r\n\r\nGET /te-chunked HTTP/1.1\r\nHost: a\r\n\r\nGET /cl-long HTTP/1.1\r\nHost: a\r\n\r\nGET /cl-short HTTP/1.1\r\nHost: a\r\n\r\nGET /hello HTTP/1.1\r\nHost: a\r\n\r\n"},
	{"identity", "GET /identity HTTP/1.1\r\nHost: a\r\n\r\nGET /hello HTTP/1.1\r\nHost: a\r\n\r\n"},
	{"flush", "GET /flush HTTP/1.1\r\nHost: a\r\n\r\nGET /sse HTTP/1.1\r\nHost: a\r\n\r\nHEAD /flush HTTP/1.1\r\nHost: a\r\n\r\n"},
	{"trailers", "GET /trailer HTTP/1.1\r\nHost: a\r\n\r\nGET /trailer-prefix HTTP/1.1\r\nHost: a\r\n\r\n"},
	{"panic", "GET /panic HTTP/1.1\r\nHost: a\r\n\r\nGET /hello HTTP/1.1\r\nHost: a\r\n\r\n"},
	{"panic small", "GET /panic-small HTTP/1.1\r\nHost: a\r\n\r\n"},
	{"panic big", "GET /panic-big HTTP/1.1\r\nHost: a\r\n\r\n"},
	{"abort", "GET /abort HTTP/1.1\r\nHost: a\r\n\r\n"},
	{"ctx", "GET /ctx HTTP/1.1\r\nHost: a\r\n\r\n"},
	{"post echo", "POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: 11\r\n\r\nhello worldGET /hello HTTP/1.1\r\nHost: a\r\n\r\n"},
	{"post echo typed", "POST /echo-typed HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello"},
	{"post echo big", "POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: 3000\r\n\r\n" + strings.Repeat("<html>", 500)},
	{"chunked", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\nGET /hello HTTP/1.1\r\nHost: a\r\n\r\n"},
	{"chunked trailers", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nTrailer: X-T\r\n\r\n3\r\nabc\r\n0\r\nX-T: v\r\n\r\n"},
	{"chunked undeclared trailer", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nX-Late: v\r\n0:\r\n\r\n"},
	{"chunked ext", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n3;ext=1\r\nabc\r\n0\r\n\r\n"},
	{"chunked bad size", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n0\r\n\r\nGET /hello HTTP/1.1\r\nHost: a\r\n\r\n"},
	{"chunked bad crlf", "POST /noread HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcX0\r\n\r\nGET /hello HTTP/1.1\r\nHost: a\r\n\r\n"},
	{"chunked long trailer", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n0;000\r\n00000"},
	{"chunked bad trailer then request", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nBad Trailer\r\n\r\nGET /hello HTTP/1.1\r\nHost: a\r\n\r\n"},
	{"fullduplex bare lf", "POST /fullduplex HTTP/1.1\nHost:0\nContent-Length:1\n\n000000000"},
	{"chunked bare lf", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n3\nabc\n0\n\n"},
	{"cl and te", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\nGET /hello HTTP/1.1\r\nHost: a\r\n\r\n"},
	{"te and cl", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nContent-Length: 100\r\n\r\n0\r\n\r\n"},
	{"te twice", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"},
	{"te list", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n"},
	{"te gzip", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip\r\n\r\nabc"},
	{"te identity", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: identity\r\nContent-Length: 3\r\n\r\nabc"},
	{"te space", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding : chunked\r\n\r\n0\r\n\r\n"},
	{"te obs", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: \r\n chunked\r\n\r\n0\r\n\r\n"},
	{"cl twice differ", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd"},
	{"cl twice same", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\nabc"},
	{"cl list", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3, 3\r\n\r\nabc"},
	{"cl negative", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: -1\r\n\r\nabc"},
	{"cl plus", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: +3\r\n\r\nabc"},
	{"cl huge", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 99999999999999999999\r\n\r\nabc"},
	{"cl short body", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 10\r\n\r\nabc"},
	{"cl short noread", "POST /noread HTTP/1.1\r\nHost: a\r\nContent-Length: 10\r\n\r\nabc"},
	{"obs fold", "GET / HTTP/1.1\r\nHost: a\r\nX-A: one\r\n two\r\n\r\n"},
	{"bare lf", "GET / HTTP/1.1\nHost: a\nX-A: b\n\nGET /hello HTTP/1.1\nHost: a\n\n"},
	{"bare cr", "GET / HTTP/1.1\rHost: a\r\n\r\n"},
	{"missing host", "GET /hello HTTP/1.1\r\n\r\n"},
	{"empty host", "GET /hello HTTP/1.1\r\nHost:\r\n\r\n"},
	{"two hosts", "GET /hello HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n"},
	{"bad host", "GET /hello HTTP/1.1\r\nHost: a b\r\n\r\n"},
	{"host slash", "GET /hello HTTP/1.1\r\nHost: a/b\r\n\r\n"},
	{"absolute", "GET http://up.test:8080/p?q=1 HTTP/1.1\r\nHost: up.test:8080\r\n\r\n"},
	{"absolute other host", "GET http://up.test/p HTTP/1.1\r\nHost: other.test\r\n\r\n"},
	{"absolute no host", "GET http://up.test/p HTTP/1.1\r\n\r\n"},
	{"absolute empty host", "GET http://up.test/p HTTP/1.1\r\nHost: \r\n\r\n"},
	{"absolute bad host", "GET http://up.test/p HTTP/1.1\r\nHost: a\x01b\r\n\r\n"},
	{"absolute two hosts", "GET http://up.test/p HTTP/1.1\r\nHost: a\r\nHost: a\r\n\r\n"},
	{"absolute lower host", "GET http://up.test/p HTTP/1.1\r\nhost: up.test\r\n\r\n"},
	{"authority only", "GET up.test:80 HTTP/1.1\r\nHost: up.test\r\n\r\n"},
	{"star", "OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n"},
	{"double slash", "GET //evil.test/p HTTP/1.1\r\nHost: a\r\n\r\n"},
	{"bad header name", "GET / HTTP/1.1\r\nHost: a\r\nX A: b\r\n\r\n"},
	{"bad header name colon", "GET / HTTP/1.1\r\nHost: a\r\n: b\r\n\r\n"},
	{"header no colon", "GET / HTTP/1.1\r\nHost: a\r\nXAB\r\n\r\n"},
	{"header ctl value", "GET / HTTP/1.1\r\nHost: a\r\nX-A: b\x00c\r\n\r\n"},
	{"header del value", "GET / HTTP/1.1\r\nHost: a\r\nX-A: b\x7fc\r\n\r\n"},
	{"header utf8", "GET / HTTP/1.1\r\nHost: a\r\nX-A: caf\xc3\xa9\r\n\r\n"},
	{"header tab", "GET / HTTP/1.1\r\nHost: a\r\nX-A:\tb\t\r\n\r\n"},
	{"method lower", "get /hello HTTP/1.1\r\nHost: a\r\n\r\n"},
	{"method weird", "G@T /hello HTTP/1.1\r\nHost: a\r\n\r\n"},
	{"connect", "CONNECT up.test:443 HTTP/1.1\r\nHost: up.test:443\r\n\r\n"},
	{"expect continue", "POST / HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\nabc"},
	{"expect continue noread", "POST /noread HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\nabc"},
	{"expect other", "POST / HTTP/1.1\r\nHost: a\r\nExpect: 200-ok\r\nContent-Length: 3\r\n\r\nabc"},
	{"upgrade", "GET / HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n"},
	{"upgrade h2c", "GET / HTTP/1.1\r\nHost: a\r\nUpgrade: h2c\r\nConnection: Upgrade, HTTP2-Settings\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n\r\n"},
	{"connection twice", "GET /hello HTTP/1.1\r\nHost: a\r\nConnection: keep-alive\r\nConnection: close\r\n\r\nGET /hello HTTP/1.1\r\nHost: a\r\n\r\n"},
	{"connection list close", "GET /hello HTTP/1.1\r\nHost: a\r\nConnection: keep-alive, close\r\n\r\nGET /hello HTTP/1.1\r\nHost: a\r\n\r\n"},
	{"connection loose close", "GET / HTTP/1.1\nHost:0\nConneCtion:0 Close\n\nGET /hello HTTP/1.1\r\nHost: a\r\n\r\n"},
	{"connection CLOSE", "GET /hello HTTP/1.1\r\nHost: a\r\nConnection: CLOSE\r\n\r\nGET /hello HTTP/1.1\r\nHost: a\r\n\r\n"},
	{"garbage", "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03"},
	{"garbage line", "HELLO\r\n\r\n"},
	{"empty line only", "\r\n\r\n"},
	{"leading crlf after post", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\n\r\nab\r\nGET /hello HTTP/1.1\r\nHost: a\r\n\r\n"},
	{"leading crlf first", "\r\nGET /hello HTTP/1.1\r\nHost: a\r\n\r\n"},
	{"unread small", "POST /noread HTTP/1.1\r\nHost: a\r\nContent-Length: 1000\r\n\r\n" + strings.Repeat("b", 1000) + "GET /hello HTTP/1.1\r\nHost: a\r\n\r\n"},
	{"unread chunked", "POST /noread HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\nGET /hello HTTP/1.1\r\nHost: a\r\n\r\n"},
	{"unread big", "POST /noread HTTP/1.1\r\nHost: a\r\nContent-Length: 300000\r\n\r\n" + strings.Repeat("b", 300000) + "GET /hello HTTP/1.1\r\nHost: a\r\n\r\n"},
	{"unread big chunked", "POST /noread HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n" + strings.Repeat("1000\r\n"+strings.Repeat("c", 4096)+"\r\n", 70) + "0\r\n\r\nGET /hello HTTP/1.1\r\nHost: a\r\n\r\n"},
	{"readsome", "POST /readsome HTTP/1.1\r\nHost: a\r\nContent-Length: 20\r\n\r\n01234567890123456789GET /hello HTTP/1.1\r\nHost: a\r\n\r\n"},
	{"closebody small", "POST /closebody HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nabcdeGET /hello HTTP/1.1\r\nHost: a\r\n\r\n"},
	{"closebody big", "POST /closebody HTTP/1.1\r\nHost: a\r\nContent-Length: 300000\r\n\r\n" + strings.Repeat("b", 300000) + "GET /hello HTTP/1.1\r\nHost: a\r\n\r\n"},
	{"closebody chunked big", "POST /closebody HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n" + strings.Repeat("1000\r\n"+strings.Repeat("c", 4096)+"\r\n", 70) + "0\r\n\r\n"},
	{"replacebody", "POST /replacebody HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nabcdeGET /hello HTTP/1.1\r\nHost: a\r\n\r\n"},
	{"replacebody big", "POST /replacebody HTTP/1.1\r\nHost: a\r\nContent-Length: 300000\r\n\r\n" + strings.Repeat("b", 300000)},
	{"deadline", "POST /deadline HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nabcdeGET /hello HTTP/1.1\r\nHost: a\r\n\r\n"},
	{"fullduplex", "POST /fullduplex HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nabcde"},
	{"header at limit", "GET / HTTP/1.1\r\nHost: a\r\nX-Big: " + strings.Repeat("v", testMaxHeader) + "\r\n\r\n"},
	{"header over limit", "GET / HTTP/1.1\r\nHost: a\r\nX-Big: " + strings.Repeat("v", 3*testMaxHeader) + "\r\n\r\n"},
	{"many headers", "GET / HTTP/1.1\r\nHost: a\r\n" + strings.Repeat("X-H: v\r\n", 1000) + "\r\n"},
	{"long uri", "GET /" + strings.Repeat("p", 3*testMaxHeader) + " HTTP/1.1\r\nHost: a\r\n\r\n"},
	{"partial header", "GET /hello HTTP/1.1\r\nHost: a\r\n"},
	{"partial line", "GET /hel"},
	{"nothing", ""},
	{"second request bad", "GET /hello HTTP/1.1\r\nHost: a\r\n\r\nGET /hello HTTP/1.1\r\nHost: a\r\nX A: b\r\n\r\n"},
	{"second request expect", "GET /hello HTTP/1.1\r\nHost: a\r\n\r\nPOST / HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\nhiGET /json HTTP/1.1\r\nHost: a\r\n\r\n"},
	{"second request http10", "GET /hello HTTP/1.1\r\nHost: a\r\n\r\nGET /hello HTTP/1.0\r\n\r\n"},
	{"smuggle cl te second", "POST /noread HTTP/1.1\r\nHost: a\r\nContent-Length: 44\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /panic HTTP/1.1\r\nHost: a\r\n\r\nGET /hello HTTP/1.1\r\nHost: a\r\n\r\n"},
	{"smuggle te cl", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: xchunked\r\nContent-Length: 4\r\n\r\n5c\r\nGPOST / HTTP/1.1\r\n\r\n0\r\n\r\n"},
	{"nul in uri", "GET /a\x00b HTTP/1.1\r\nHost: a\r\n\r\n"},
	{"space in uri", "GET /a b HTTP/1.1\r\nHost: a\r\n\r\n"},
	{"fragment", "GET /a#frag HTTP/1.1\r\nHost: a\r\n\r\n"},
}

// TestDifferential sends each raw request stream to net/http's server
// and to the loop, both serving the same handler, and requires the same
// bytes back (Date aside).
func TestDifferential(t *testing.T) {
	p := startPair(t, diffHandler(), testMaxHeader)
	for _, tc := range diffCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			std, loop, err := p.compare([]byte(tc.raw))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(std, loop) {
				t.Errorf("answers differ\nnet/http: %q\nloop:     %q", std, loop)
			}
		})
	}
}

// FuzzDifferential is TestDifferential over arbitrary request bytes.
func FuzzDifferential(f *testing.F) {
	for _, tc := range diffCases {
		if len(tc.raw) < 8<<10 {
			f.Add([]byte(tc.raw))
		}
	}
	p := startPair(f, diffHandler(), testMaxHeader)
	f.Fuzz(func(t *testing.T, raw []byte) {
		std, loop, err := p.compare(raw)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(std, loop) {
			t.Errorf("answers differ for %q\nnet/http: %q\nloop:     %q", raw, std, loop)
		}
	})
}

// TestLoopServesOrdinaryRequests checks the loop itself serves ordinary
// HTTP/1.1 (pipelined, HEAD, chunked, absolute form) and hands only the
// rest to net/http.
func TestLoopServesOrdinaryRequests(t *testing.T) {
	quiet := log.New(io.Discard, "", 0)
	s := &Server{Handler: diffHandler(), ErrorLog: quiet}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve(ln)
	defer s.Close()
	raw := "GET /hello HTTP/1.1\r\nHost: a\r\n\r\n" +
		"HEAD /big HTTP/1.1\r\nHost: a\r\n\r\n" +
		"POST /echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n" +
		"GET http://up.test/p HTTP/1.1\r\nHost: up.test\r\n\r\n" +
		"POST /noread HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nabc"
	out, err := exchange(ln.Addr().String(), []byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(out, []byte("HTTP/1.1 200 OK")); n != 5 {
		t.Fatalf("%d answers, want 5: %q", n, out)
	}
	if served, handed := s.Stats(); served != 5 || handed != 0 {
		t.Errorf("served %d, handed off %d; want 5 and 0", served, handed)
	}
	if _, err := exchange(ln.Addr().String(), []byte("GET /hello HTTP/1.0\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	if served, handed := s.Stats(); served != 5 || handed != 1 {
		t.Errorf("after HTTP/1.0: served %d, handed off %d; want 5 and 1", served, handed)
	}
}
