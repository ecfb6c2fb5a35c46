package mcp

import (
	"reflect"
	"strings"
	"testing"
)

// sseEvents feeds a stream to a reader in chunks of size n and returns the
// events' data.
func sseEvents(stream string, n, max int) ([]string, int) {
	var got []string
	r := NewSSEReader(max, func(d []byte) { got = append(got, string(d)) })
	for b := []byte(stream); len(b) > 0; {
		k := min(n, len(b))
		r.Feed(b[:k])
		b = b[k:]
	}
	return got, r.Skipped()
}

func TestSSEReader(t *testing.T) {
	for _, tc := range []struct {
		name    string
		stream  string
		max     int
		want    []string
		skipped int
	}{
		{"one event", "event: message\ndata: {\"a\":1}\n\n", 100, []string{`{"a":1}`}, 0},
		{"CRLF and CR line ends", "data: a\r\n\r\ndata: b\r\rdata: c\n\n", 100, []string{"a", "b", "c"}, 0},
		{"multi-line data joined", "data: a\ndata: b\ndata:c\n\n", 100, []string{"a\nb\nc"}, 0},
		{"comments, ids and retry ignored", ": ping\nid: 7\nretry: 100\ndata: x\n\n", 100, []string{"x"}, 0},
		{"no data, no event", "event: message\nid: 1\n\n", 100, nil, 0},
		{"unterminated event dropped", "data: x\n", 100, nil, 0},
		{"too large event skipped, next read", "data: " + strings.Repeat("x", 50) + "\n\ndata: y\n\n", 20, []string{"y"}, 1},
		{"too large over data lines", "data: 0123456789\ndata: 0123456789\ndata: 0123456789\n\ndata: ok\n\n", 25, []string{"ok"}, 1},
		{"field without colon", "data\n\n", 100, nil, 0},
	} {
		for _, n := range []int{1, 2, 3, 7, 1 << 20} {
			got, skipped := sseEvents(tc.stream, n, tc.max)
			if !reflect.DeepEqual(got, tc.want) || skipped != tc.skipped {
				t.Errorf("%s (chunks of %d): %q skipped %d, want %q skipped %d", tc.name, n, got, skipped, tc.want, tc.skipped)
			}
		}
	}
}

// FuzzSSEReader checks that the reader never panics, never hands on more
// than its bound, and reads the same events whatever the chunking.
func FuzzSSEReader(f *testing.F) {
	f.Add([]byte("event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n"), uint8(3))
	f.Add([]byte("data: a\r\n\r\ndata: b\r\r: c\ndata\n\n"), uint8(1))
	f.Add([]byte("data: "+strings.Repeat("z", 300)+"\n\ndata: y\n\n"), uint8(5))
	f.Fuzz(func(t *testing.T, stream []byte, chunk uint8) {
		n := int(chunk)%64 + 1
		const max = 256
		whole, _ := sseEvents(string(stream), len(stream)+1, max)
		parts, _ := sseEvents(string(stream), n, max)
		if !reflect.DeepEqual(whole, parts) {
			t.Fatalf("chunks of %d read %q, whole read %q", n, parts, whole)
		}
		for _, e := range whole {
			if len(e) > max {
				t.Fatalf("event of %d bytes past the bound", len(e))
			}
		}
	})
}
