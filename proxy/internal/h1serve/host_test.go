package h1serve

import (
	"bufio"
	"bytes"
	"net/textproto"
	"testing"
)

// textprotoHost is recordedHost's reading before scanHost: the whole block
// through textproto's ReadMIMEHeader.
func textprotoHost(hdr []byte) (string, bool) {
	h, err := textproto.NewReader(bufio.NewReader(bytes.NewReader(hdr))).ReadMIMEHeader()
	if err != nil || len(h["Host"]) != 1 {
		return "", false
	}
	return h["Host"][0], true
}

// FuzzHeaderHost holds headerHost (scanHost's plain blocks read in place,
// the others through textproto) to textproto's reading of every block:
// the same Host, or none.
func FuzzHeaderHost(f *testing.F) {
	for _, s := range []string{
		"Host: example.com\r\nUser-Agent: x\r\n\r\n",
		"host:example.com:8080\n\n", "HOST: \t a \t\r\n\r\nbody",
		"Host: a\r\nHost: b\r\n\r\n", "Host: a\r\n b\r\n\r\n", " Host: a\r\n\r\n",
		"Host : a\r\n\r\n", "Host: a\r\n", "X: \x00\r\nHost: a\r\n\r\n", "Host: caf\xc3\xa9\r\n\r\n",
		"Host: a\r\r\n\r\n", "Ho\xc5\xbft: a\r\n\r\n", "Host:\r\n\r\n", ": a\r\nHost: b\r\n\r\n", "\r\n",
		"Host: a\r\nX-Y: b\r\n\tc\r\n\r\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, hdr []byte) {
		got, gotOK := headerHost(hdr)
		want, wantOK := textprotoHost(hdr)
		if got != want || gotOK != wantOK {
			t.Fatalf("headerHost(%q) = %q, %v; textproto: %q, %v", hdr, got, gotOK, want, wantOK)
		}
	})
}

// TestScanHostAllocations checks that a plain header block's Host costs
// one allocation (its value), the reason scanHost exists.
func TestScanHostAllocations(t *testing.T) {
	hdr := []byte("Host: example.com:8080\r\nUser-Agent: Go-http-client/1.1\r\nContent-Length: 150\r\nContent-Type: application/json\r\nAccept-Encoding: gzip\r\n\r\n")
	if n := testing.AllocsPerRun(100, func() { headerHost(hdr) }); n > 1 {
		t.Fatalf("headerHost made %.0f allocations", n)
	}
}
