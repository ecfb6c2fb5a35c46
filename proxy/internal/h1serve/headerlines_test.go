package h1serve

import (
	"bufio"
	"bytes"
	"net/http"
	"strings"
	"testing"
	"time"
)

// headerOf reads lines "name:value" (a name may repeat) into a header,
// names as they are (not canonical: a handler may set any key).
func headerOf(spec string) http.Header {
	h := http.Header{}
	for _, line := range strings.Split(spec, "\x00") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		h[k] = append(h[k], v)
	}
	return h
}

func linesOf(h http.Header, exclude map[string]bool) (ours, netHTTP []byte) {
	var a, b bytes.Buffer
	wa, wb := bufio.NewWriter(&a), bufio.NewWriter(&b)
	writeHeaderLines(wa, h, exclude)
	h.WriteSubset(wb, exclude)
	wa.Flush()
	wb.Flush()
	return a.Bytes(), b.Bytes()
}

// TestHeaderLinesAsNetHTTP holds writeHeaderLines to the bytes
// http.Header.WriteSubset writes: sorted names, invalid names dropped,
// CR and LF in values as spaces, values trimmed, excluded names left out,
// and a header too large for the stack handed to WriteSubset itself.
func TestHeaderLinesAsNetHTTP(t *testing.T) {
	big := make([]string, 0, smallHeader+3)
	for i := range smallHeader + 3 {
		big = append(big, "X-K"+string(rune('a'+i))+": v")
	}
	for _, spec := range []string{
		"",
		"Content-Type:application/json",
		"Content-Type:application/json\x00X-Trace-Id:abc\x00Cache-Control:no-store\x00Content-Length:12",
		"B:1\x00A:2\x00B:3\x00a:lower\x00Z:last",
		"X-Multi:one\x00X-Multi:two\x00X-Multi:three",
		"X-Newline:a\r\nInjected: yes\x00X-Lf:a\nb\x00X-Cr:a\rb",
		"X-Space:  padded \t\x00X-Empty:",
		"Bad Name:dropped\x00Ok:kept\x00Bad\x01:x\x00:empty name",
		"Trailer:X-T\x00Trailer:X-U",
		strings.Join(big, "\x00"),
	} {
		h := headerOf(spec)
		for _, exclude := range []map[string]bool{nil, {"Content-Length": true, "B": true}, excludedHeadersNoBody} {
			ours, want := linesOf(h, exclude)
			if !bytes.Equal(ours, want) {
				t.Errorf("header %q exclude %v:\nours %q\nnet/http %q", spec, exclude, ours, want)
			}
		}
	}
}

// FuzzHeaderLines compares the two on any header a handler could set.
func FuzzHeaderLines(f *testing.F) {
	f.Add("Content-Type:text/plain\x00B:1\x00A:2", "B")
	f.Add("X:a\r\nb\x00 Y : z ", "Y")
	f.Fuzz(func(t *testing.T, spec, excluded string) {
		h := headerOf(spec)
		exclude := map[string]bool{excluded: true}
		ours, want := linesOf(h, exclude)
		if !bytes.Equal(ours, want) {
			t.Fatalf("header %q exclude %q:\nours %q\nnet/http %q", spec, excluded, ours, want)
		}
	})
}

// TestDateCache: the cached Date is what formatting the clock gives, in
// the second it is asked for.
func TestDateCache(t *testing.T) {
	var c dateCache
	for i := 0; i < 3; i++ {
		for {
			before := time.Now().UTC().Format(http.TimeFormat)
			got := string(c.appendNow(nil))
			after := time.Now().UTC().Format(http.TimeFormat)
			if before != after {
				continue // the second turned meanwhile
			}
			if got != before {
				t.Fatalf("Date %q, want %q", got, before)
			}
			break
		}
		if i < 2 {
			time.Sleep(time.Second) // the next second's value, not the cached one
		}
	}
	if got := string(c.appendNow([]byte("x"))); !strings.HasPrefix(got, "x") || len(got) != 1+len(http.TimeFormat) {
		t.Fatalf("appendNow appended %q", got)
	}
}
