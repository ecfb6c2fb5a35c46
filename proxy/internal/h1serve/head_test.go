package h1serve

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"testing"
)

// headSeeds are request heads for the differential of readHead and
// http.ReadRequest: ordinary ones readHead reads, and the classics of
// request smuggling and odd framing it must leave to ReadRequest.
var headSeeds = []struct {
	name string
	raw  string
	fast bool // readHead reads it
}{
	{"get", "GET / HTTP/1.1\r\nHost: a\r\n\r\n", true},
	{"post", "POST /call?x=1 HTTP/1.1\r\nHost: tool.local:8080\r\nContent-Type: application/json\r\nContent-Length: 11\r\n\r\n{\"a\":\"b\"}\r\nGET / HTTP/1.1\r\n", true},
	{"post short body", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 10\r\n\r\nabc", true},
	{"post no body yet", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 10\r\n\r\n", true},
	{"cl zero", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\nGET", true},
	{"cl leading zeros", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 0003\r\n\r\nabcdef", true},
	{"cl spaces around", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: \t 3 \t\r\n\r\nabcdef", true},
	{"names not canonical", "POST / HTTP/1.1\r\nhost: a\r\ncontent-length: 2\r\nX-FOO-bar: 1\r\nx-foo-BAR: 2\r\nuser-agent:ua\r\n\r\nab", true},
	{"repeated names", "GET / HTTP/1.1\r\nHost: a\r\nX-A: 1\r\nX-B: 2\r\nX-A: 3\r\nX-A: 4\r\n\r\n", true},
	{"empty value", "GET / HTTP/1.1\r\nHost: a\r\nX-Empty:\r\nX-Blank:   \r\n\r\n", true},
	{"value tabs", "GET / HTTP/1.1\r\nHost: a\r\nX-T:\tv\t w\t\r\n\r\n", true},
	{"connection close", "GET / HTTP/1.1\r\nHost: a\r\nConnection: keep-alive, Close\r\n\r\n", true},
	{"connection twice", "GET / HTTP/1.1\r\nHost: a\r\nConnection: x\r\nConnection: close\r\n\r\n", true},
	{"trailer without chunked", "POST / HTTP/1.1\r\nHost: a\r\nTrailer: X-T\r\nContent-Length: 1\r\n\r\nz", true},
	{"expect", "POST / HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 1\r\n\r\nz", true},
	{"absolute", "GET http://tool.local:9/p?q=1 HTTP/1.1\r\nHost: other\r\n\r\n", true},
	{"absolute userinfo", "GET http://user:pw@tool.local/p HTTP/1.1\r\nHost: tool.local\r\n\r\n", true},
	{"absolute no path", "GET http://tool.local HTTP/1.1\r\nHost: tool.local\r\n\r\n", true},
	{"absolute empty host", "GET http:///p HTTP/1.1\r\nHost: h\r\n\r\n", true},
	{"absolute ipv6", "GET http://[::1]:80/p HTTP/1.1\r\nHost: h\r\n\r\n", true},
	{"fragment", "GET /a#frag HTTP/1.1\r\nHost: a\r\n\r\n", true},
	{"escapes", "GET /a%20b/%2F/%zz?x=%41 HTTP/1.1\r\nHost: a\r\n\r\n", false},
	{"good escapes", "GET /a%20b/%2F/c?x=%41&y=%zz HTTP/1.1\r\nHost: a\r\n\r\n", true},
	{"double slash", "GET //x/y HTTP/1.1\r\nHost: a\r\n\r\n", true},
	{"extension method", "PURGE /x HTTP/1.1\r\nHost: a\r\n\r\n", true},
	{"host empty", "GET / HTTP/1.1\r\nHost:\r\n\r\n", true},
	{"host odd", "GET / HTTP/1.1\r\nHost: a b\r\n\r\n", true},

	{"cl and te", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", false},
	{"te and cl", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nContent-Length: 4\r\n\r\n0\r\n\r\n", false},
	{"te chunked", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n", false},
	{"te xchunked", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: xchunked\r\nContent-Length: 3\r\n\r\nabc", false},
	{"te twice", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: identity\r\n\r\n0\r\n\r\n", false},
	{"te list", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n", false},
	{"te space before colon", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding : chunked\r\nContent-Length: 3\r\n\r\nabc", false},
	{"duplicate cl same", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\nabc", false},
	{"duplicate cl differ", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd", false},
	{"cl list", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3, 3\r\n\r\nabc", false},
	{"cl plus", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: +3\r\n\r\nabc", false},
	{"cl minus", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: -3\r\n\r\nabc", false},
	{"cl inner space", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1 2\r\n\r\nabc", false},
	{"cl hex", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 0x3\r\n\r\nabc", false},
	{"cl empty", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length:\r\n\r\nabc", false},
	{"cl huge", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 99999999999999999999\r\n\r\nabc", false},
	{"obs-fold", "GET / HTTP/1.1\r\nHost: a\r\nX-A: 1\r\n 2\r\n\r\n", false},
	{"obs-fold cl", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length:\r\n 3\r\n\r\nabc", false},
	{"lf only", "GET / HTTP/1.1\nHost: a\n\n", false},
	{"lf only header", "GET / HTTP/1.1\r\nHost: a\nX-A: 1\r\n\r\n", false},
	{"bare cr", "GET / HTTP/1.1\r\nHost: a\rX-A: 1\r\n\r\n", false},
	{"space before colon", "GET / HTTP/1.1\r\nHost : a\r\n\r\n", false},
	{"nul in value", "GET / HTTP/1.1\r\nHost: a\r\nX-A: 1\x002\r\n\r\n", false},
	{"high byte in value", "GET / HTTP/1.1\r\nHost: a\r\nX-A: caf\xc3\xa9\r\n\r\n", false},
	{"two hosts", "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", false},
	{"no host", "GET / HTTP/1.1\r\nX-A: 1\r\n\r\n", false},
	{"absolute no host header", "GET http://a/ HTTP/1.1\r\n\r\n", false},
	{"http10", "GET / HTTP/1.0\r\nHost: a\r\n\r\n", false},
	{"http2 preface", "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", false},
	{"connect", "CONNECT a:443 HTTP/1.1\r\nHost: a:443\r\n\r\n", false},
	{"asterisk", "OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n", false},
	{"https absolute", "GET https://a/ HTTP/1.1\r\nHost: a\r\n\r\n", false},
	{"upper scheme", "GET HTTP://a/ HTTP/1.1\r\nHost: a\r\n\r\n", false},
	{"pragma", "GET / HTTP/1.1\r\nHost: a\r\nPragma: no-cache\r\n\r\n", false},
	{"two spaces", "GET  / HTTP/1.1\r\nHost: a\r\n\r\n", false},
	{"space in target", "GET /a b HTTP/1.1\r\nHost: a\r\n\r\n", false},
	{"version tail", "GET / HTTP/1.1 x\r\nHost: a\r\n\r\n", false},
	{"lower version", "GET / http/1.1\r\nHost: a\r\n\r\n", false},
	{"leading crlf", "\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n", false},
	{"first line space", "GET / HTTP/1.1\r\n Host: a\r\n\r\n", false},
	{"bad name", "GET / HTTP/1.1\r\nHost: a\r\nX(A): 1\r\n\r\n", false},
	{"no colon", "GET / HTTP/1.1\r\nHost: a\r\nXA\r\n\r\n", false},
	{"partial", "GET / HTTP/1.1\r\nHost: a\r\n", false},
	{"many lines", "GET / HTTP/1.1\r\nHost: a\r\n" + strings.Repeat("X: v\r\n", maxHeadLines) + "\r\n", false},
}

// fastRead reads raw's head with readHead, from a reader holding raw's
// first bytes as the loop's does.
func fastRead(raw []byte) (*http.Request, string, *bufio.Reader, bool) {
	br := bufio.NewReader(bytes.NewReader(raw))
	br.Peek(1)
	req, host, ok := readHead(br, nil)
	return req, host, br, ok
}

// readSteps reads r to its end or first error with a small buffer and
// returns every (n, bytes, err) read, so bodies compare read by read.
func readSteps(r io.Reader) []string {
	var steps []string
	p := make([]byte, 3)
	for range 1 << 16 {
		n, err := r.Read(p)
		steps = append(steps, fmt.Sprintf("%d %q %v", n, p[:n], err))
		if err != nil {
			break
		}
	}
	return steps
}

// checkHead holds readHead to http.ReadRequest on raw: when readHead
// reads it, ReadRequest reads the same request (every field the loop and
// its handlers see), the same Host line, the same body read by read, and
// leaves the same bytes after it.
func checkHead(t *testing.T, raw []byte) bool {
	t.Helper()
	got, host, gbr, ok := fastRead(raw)
	if !ok {
		return false
	}
	wbr := bufio.NewReader(bytes.NewReader(raw))
	want, err := http.ReadRequest(wbr)
	if err != nil {
		t.Fatalf("readHead read %q, ReadRequest refused it: %v", raw, err)
	}
	if i := bytes.IndexByte(raw, '\n'); true {
		if wantHost, ok := textprotoHost(raw[i+1:]); !ok || host != wantHost {
			t.Errorf("%q: Host line %q, textproto's %q (%v)", raw, host, wantHost, ok)
		}
	}
	fields := []struct {
		name      string
		got, want any
	}{
		{"Method", got.Method, want.Method},
		{"URL", got.URL, want.URL},
		{"URL.String", got.URL.String(), want.URL.String()},
		{"Proto", got.Proto, want.Proto},
		{"ProtoMajor", got.ProtoMajor, want.ProtoMajor},
		{"ProtoMinor", got.ProtoMinor, want.ProtoMinor},
		{"Header", got.Header, want.Header},
		{"Host", got.Host, want.Host},
		{"ContentLength", got.ContentLength, want.ContentLength},
		{"TransferEncoding", got.TransferEncoding, want.TransferEncoding},
		{"Close", got.Close, want.Close},
		{"RequestURI", got.RequestURI, want.RequestURI},
		{"Trailer", got.Trailer, want.Trailer},
		{"Form", got.Form, want.Form},
		{"RemoteAddr", got.RemoteAddr, want.RemoteAddr},
		{"NoBody", got.Body == http.NoBody, want.Body == http.NoBody},
		{"nil Body", got.Body == nil, want.Body == nil},
	}
	for _, f := range fields {
		if !reflect.DeepEqual(f.got, f.want) {
			t.Errorf("%q: %s = %#v, ReadRequest's %#v", raw, f.name, f.got, f.want)
		}
	}
	// servable does not check again the names and values readHead took.
	if !validHeader(got.Header) {
		t.Errorf("%q: readHead took a header net/http's server refuses: %q", raw, got.Header)
	}
	if g, w := readSteps(got.Body), readSteps(want.Body); !reflect.DeepEqual(g, w) {
		t.Errorf("%q: body read as %q, ReadRequest's as %q", raw, g, w)
	}
	grest, _ := io.ReadAll(gbr)
	wrest, _ := io.ReadAll(wbr)
	if !bytes.Equal(grest, wrest) {
		t.Errorf("%q: left %q after the request, ReadRequest %q", raw, grest, wrest)
	}
	return true
}

// TestReadHeadSameAsReadRequest runs the differential on the seeds and
// requires readHead to read exactly those it should: the ordinary heads,
// and none of the smuggling classics and odd framings.
func TestReadHeadSameAsReadRequest(t *testing.T) {
	for _, tc := range headSeeds {
		t.Run(tc.name, func(t *testing.T) {
			if fast := checkHead(t, []byte(tc.raw)); fast != tc.fast {
				t.Errorf("readHead read it: %v, want %v", fast, tc.fast)
			}
		})
	}
	// The loop's own differential cases hold too.
	for _, tc := range diffCases {
		checkHead(t, []byte(tc.raw))
	}
}

// TestReadHeadConsumesNothingWhenDeclining checks a head readHead leaves
// is still whole in the reader for ReadRequest.
func TestReadHeadConsumesNothingWhenDeclining(t *testing.T) {
	for _, tc := range headSeeds {
		if tc.fast {
			continue
		}
		_, _, br, ok := fastRead([]byte(tc.raw))
		if ok {
			continue // reported by TestReadHeadSameAsReadRequest
		}
		rest, _ := io.ReadAll(br)
		if string(rest) != tc.raw {
			t.Errorf("%s: reader holds %q after readHead declined, want all of %q", tc.name, rest, tc.raw)
		}
	}
}

// FuzzRequestHead is the differential over arbitrary bytes: whatever
// readHead reads, ReadRequest reads alike.
func FuzzRequestHead(f *testing.F) {
	for _, tc := range headSeeds {
		f.Add([]byte(tc.raw))
	}
	for _, tc := range diffCases {
		if len(tc.raw) < 8<<10 {
			f.Add([]byte(tc.raw))
		}
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		checkHead(t, raw)
	})
}

// TestReadHeadAllocations bounds what reading a typical POST head
// costs: the head's string, the header map (two), the URL, the Request
// with its body and its header's values. (http.ReadRequest takes 15.)
func TestReadHeadAllocations(t *testing.T) {
	raw := []byte("POST /tools/search HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nUser-Agent: python-requests/2.31.0\r\n" +
		"Accept-Encoding: gzip, deflate\r\nAccept: */*\r\nConnection: keep-alive\r\n" +
		"Content-Type: application/json\r\nContent-Length: 27\r\n\r\n{\"query\":\"weather\",\"k\":3}\r\n")
	r := bytes.NewReader(raw)
	br := bufio.NewReader(r)
	read := func() *http.Request {
		r.Reset(raw)
		br.Reset(r)
		br.Peek(1)
		req, _, ok := readHead(br, nil)
		if !ok {
			t.Fatal("readHead declined a typical POST head")
		}
		return req
	}
	fast := testing.AllocsPerRun(200, func() { read() })
	std := testing.AllocsPerRun(200, func() {
		r.Reset(raw)
		br.Reset(r)
		if _, err := http.ReadRequest(br); err != nil {
			t.Fatal(err)
		}
	})
	t.Logf("allocations per head: readHead %v, http.ReadRequest %v", fast, std)
	if fast > 4 {
		t.Errorf("readHead: %v allocations for a typical POST head, want at most 4", fast)
	}
}

// plainTargetSeeds are targets plainTarget reads and targets it leaves to
// url.ParseRequestURI.
var plainTargetSeeds = []string{
	"/", "/a/b", "/bench/policy", "/a-b.c_d~e/", "//a", "/a?b", "/a?", "/a%20", "/a#b", "/a;b", "/a:b", "*",
	"http://a/b", "http://a:80/b", "http://A.B:8080/x.y_z~", "http://a:/b", "http://:80/b", "http://a",
	"http://a:b/c", "http://1.2.3.4:5/", "http://[::1]:80/", "http://a..b/c", "http://-a/", "http://a@b/c",
	"http://a:1:2/c", "HTTP://a/b", "https://a/b", "http://a/b?c", "http://a//b", "http://a:080/",
}

// TestPlainTargetSameAsParseRequestURI checks that what plainTarget reads
// is the URL url.ParseRequestURI makes of it.
func TestPlainTargetSameAsParseRequestURI(t *testing.T) {
	read := 0
	for _, target := range plainTargetSeeds {
		if checkPlainTarget(t, target) {
			read++
		}
	}
	if read < 8 {
		t.Errorf("plainTarget read %d of the seeds, want the plain ones", read)
	}
}

func FuzzPlainTarget(f *testing.F) {
	for _, s := range plainTargetSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, target string) { checkPlainTarget(t, target) })
}

func checkPlainTarget(t *testing.T, target string) bool {
	t.Helper()
	var got url.URL
	if !plainTarget(&got, target) {
		return false
	}
	want, err := url.ParseRequestURI(target)
	if err != nil {
		t.Errorf("plainTarget read %q, ParseRequestURI refused it: %v", target, err)
		return true
	}
	if !reflect.DeepEqual(&got, want) {
		t.Errorf("plainTarget(%q) = %#v, ParseRequestURI's %#v", target, got, *want)
	}
	return true
}
