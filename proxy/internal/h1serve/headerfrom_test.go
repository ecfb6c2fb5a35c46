package h1serve

import (
	"bytes"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
)

// headerFromCase is an answer a proxy hands over whole: its status, its
// header, the body's writes, and trailer values set after the body.
type headerFromCase struct {
	status   int
	header   http.Header
	body     []string
	trailers map[string]string
	borrowed bool // the loop writes h itself, with no copy
}

var headerFromCases = map[string]headerFromCase{
	"json":           {200, http.Header{"Content-Type": {"application/json"}, "Content-Length": {"11"}, "X-Up": {"a", "b"}}, []string{`{"ok":true}`}, nil, true},
	"no-length":      {200, http.Header{"Content-Type": {"text/plain"}}, []string{"hello"}, nil, true},
	"chunked-big":    {200, http.Header{"Content-Type": {"text/plain"}}, []string{strings.Repeat("x", 5000), strings.Repeat("y", 3000)}, nil, true},
	"sniffed":        {201, http.Header{"X-Up": {"1"}}, []string{"<html><body>hi</body></html>"}, nil, true},
	"no-content":     {204, http.Header{"Content-Type": {"text/plain"}, "Content-Length": {"0"}, "Transfer-Encoding": {"chunked"}}, nil, nil, true},
	"not-modified":   {304, http.Header{"Etag": {`"v1"`}, "Content-Length": {"12"}, "Content-Type": {"text/plain"}}, nil, nil, true},
	"te-chunked":     {200, http.Header{"Transfer-Encoding": {"chunked"}, "Content-Type": {"text/plain"}}, []string{"ab", "cd"}, nil, true},
	"te-identity":    {200, http.Header{"Transfer-Encoding": {"identity"}}, []string{"till the end"}, nil, true},
	"cl-and-te":      {200, http.Header{"Transfer-Encoding": {"chunked"}, "Content-Length": {"4"}}, []string{"abcd"}, nil, true},
	"close":          {200, http.Header{"Connection": {"close"}, "Content-Length": {"2"}}, []string{"ok"}, nil, true},
	"dated":          {200, http.Header{"Date": {"Mon, 02 Jan 2006 15:04:05 GMT"}, "Content-Length": {"2"}}, []string{"ok"}, nil, true},
	"short-body":     {200, http.Header{"Content-Length": {"10"}}, []string{"abc"}, nil, true},
	"long-body":      {200, http.Header{"Content-Length": {"2"}}, []string{"abcdef"}, nil, true},
	"trailers":       {200, http.Header{"Trailer": {"X-Sum"}, "Content-Type": {"text/plain"}}, []string{"data"}, map[string]string{"X-Sum": "42"}, true},
	"prefix-trailer": {200, http.Header{"Content-Type": {"text/plain"}}, []string{"data"}, map[string]string{http.TrailerPrefix + "X-Late": "7"}, true},
	"bad-length":     {200, http.Header{"Content-Length": {"abc"}}, []string{"hello"}, nil, false},
	"negative":       {502, http.Header{"Content-Length": {"-1"}}, []string{"bad"}, nil, false},
	"empty":          {200, http.Header{}, nil, nil, true},
	"status-only":    {404, nil, []string{"gone"}, nil, true},
}

// TestWriteHeaderFrom: an answer whose header the handler hands over
// (WriteHeaderFrom) leaves the loop byte for byte as net/http writes the
// same header copied into Header() before WriteHeader, whatever its
// framing, for GET and HEAD, with trailers set after the body; and the
// loop writes the handler's header itself except where WriteHeader would
// change it (a Content-Length that is not a length).
func TestWriteHeaderFrom(t *testing.T) {
	type handedHeader struct {
		name string
		h    http.Header
	}
	var mu sync.Mutex
	var wrong []string
	var handed []handedHeader
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := strings.TrimPrefix(r.URL.Path, "/")
		c, ok := headerFromCases[name]
		if !ok {
			http.NotFound(w, r)
			return
		}
		hdr := c.header.Clone()
		if lw, ok := w.(*response); ok {
			lw.WriteHeaderFrom(c.status, hdr)
			if lw.cw.borrowed != c.borrowed {
				mu.Lock()
				wrong = append(wrong, name)
				mu.Unlock()
			}
		} else {
			dst := w.Header()
			for k, vs := range hdr {
				dst[k] = vs
			}
			w.WriteHeader(c.status)
		}
		for _, b := range c.body {
			w.Write([]byte(b))
		}
		for k, v := range c.trailers {
			w.Header().Set(k, v)
		}
		// Checked once the answers are written (the header goes out
		// when the handler returns, or at the first flush).
		mu.Lock()
		handed = append(handed, handedHeader{name, hdr})
		mu.Unlock()
	})
	p := startPair(t, h, testMaxHeader)
	for name := range headerFromCases {
		for _, method := range []string{"GET", "HEAD"} {
			raw := method + " /" + name + " HTTP/1.1\r\nHost: a\r\n\r\n" + "GET /json HTTP/1.1\r\nHost: a\r\n\r\n"
			std, loop, err := p.compare([]byte(raw))
			if err != nil {
				t.Fatalf("%s %s: %v", method, name, err)
			}
			if !bytes.Equal(std, loop) {
				t.Errorf("%s %s: answers differ\nnet/http: %q\nloop:     %q", method, name, std, loop)
			}
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for _, hh := range handed {
		if !maps.EqualFunc(hh.h, headerFromCases[hh.name].header, slices.Equal) {
			wrong = append(wrong, hh.name+" (its header changed)")
		}
	}
	if len(wrong) > 0 {
		t.Errorf("the loop borrowed (or not) against expectation, or changed the handler's header: %v", wrong)
	}
}
