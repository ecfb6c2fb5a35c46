package jsonenc

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// compactCases are JSON texts and near misses: space everywhere it may
// and may not be, every escape, numbers at the grammar's edges, the
// nesting bound, and texts cut short.
var compactCases = []string{
	`{"ok":true}`, " { \"a\" : [ 1 , 2.5e+3 , -0 , true , false , null ] }\n",
	"\t\r\n 12 \t", `"a\"b\\c\/\b\f\n\r\t\u00e9\uD834\uDD1E"`, `"  spaces kept  "`,
	`[]`, `{}`, `[ ]`, `{ }`, `[[[[]]]]`, `{"a":{"b":{"c":[{}]}}}`, "\"\xff\xfe raw bytes\"",
	`01`, `-`, `1.`, `.5`, `1e`, `1e+`, `+1`, `0x10`, `-01`, `1.5E-7`, `2E10`,
	`tru`, `nul`, `falsey`, `true false`, `{"a" 1}`, `{"a":1,}`, `[1,]`, `[,1]`, `{,}`,
	`{"a":1`, `[1`, `"open`, `"bad \x escape"`, `"\u12"`, `"\u12G4"`, "\"tab\there\"",
	`{1:2}`, `{"a":}`, ``, `   `, `]`, `}`, `"a" "b"`, "[1]\x00",
	strings.Repeat("[", 10000) + strings.Repeat("]", 10000),
	strings.Repeat("[", 10001) + strings.Repeat("]", 10001),
	strings.Repeat(`{"a":`, 10000) + "1" + strings.Repeat("}", 10000),
	strings.Repeat(`{"a":`, 10001) + "1" + strings.Repeat("}", 10001),
}

// stdCompact is what AppendCompact must do: json.Compact's bytes and
// verdict.
func stdCompact(src []byte) ([]byte, bool) {
	var buf bytes.Buffer
	if err := json.Compact(&buf, src); err != nil {
		return nil, false
	}
	return buf.Bytes(), true
}

func checkCompact(t *testing.T, src []byte) {
	t.Helper()
	want, wantOK := stdCompact(src)
	got, ok := AppendCompact([]byte("kept"), src)
	switch {
	case ok != wantOK:
		t.Fatalf("AppendCompact(%.80q) says valid %v, json.Compact %v", src, ok, wantOK)
	case !ok && string(got) != "kept":
		t.Fatalf("AppendCompact(%.80q) refused it but changed dst to %.80q", src, got)
	case ok && string(got) != "kept"+string(want):
		t.Fatalf("AppendCompact(%.80q) = %.80q, json.Compact %.80q", src, got[4:], want)
	}
}

func TestAppendCompact(t *testing.T) {
	for _, s := range compactCases {
		checkCompact(t, []byte(s))
	}
}

func FuzzAppendCompact(f *testing.F) {
	for _, s := range compactCases {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, src []byte) { checkCompact(t, src) })
}

// BenchmarkCompact compares AppendCompact with json.Compact on an answer
// like the benchmark upstream's (about 200 bytes, some space).
func BenchmarkCompact(b *testing.B) {
	src := []byte(`{"results": [{"id": "P00533", "name": "EGFR", "score": 0.97, "tags": ["kinase", "receptor"]},` +
		` {"id": "P04626", "name": "ERBB2", "score": 0.91, "tags": []}], "total": 2, "next": null}`)
	b.Run("AppendCompact", func(b *testing.B) {
		var dst []byte
		for b.Loop() {
			dst, _ = AppendCompact(dst[:0], src)
		}
	})
	b.Run("json.Compact", func(b *testing.B) {
		var buf bytes.Buffer
		for b.Loop() {
			buf.Reset()
			_ = json.Compact(&buf, src)
		}
	})
}
