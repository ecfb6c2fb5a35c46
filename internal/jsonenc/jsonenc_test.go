package jsonenc

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// std is what AppendString must write: encoding/json with HTML characters
// left as they are.
func std(s string) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.Encode(s)
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

var cases = []string{
	"", "plain", "a\"b\\c", "line\nbreak\r\ttab", "\b\f\x00\x01\x1f\x7f",
	"<script>&amp;</script>", "ünïcødé ✓ 𝄞", "\u2028 and \u2029", "bad \xff\xfe utf8 \xc3",
	"trunc \xe2\x80", "\xed\xa0\x80 surrogate", strings.Repeat("x", 300),
}

func TestAppendString(t *testing.T) {
	for _, s := range cases {
		got := AppendString([]byte("kept"), s)
		if want := std(s); string(got) != "kept"+string(want) {
			t.Errorf("AppendString(%q) = %s, want %s", s, got[4:], want)
		}
	}
}

func FuzzAppendString(f *testing.F) {
	for _, s := range cases {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := AppendString(nil, s)
		if want := std(s); !bytes.Equal(got, want) {
			t.Fatalf("AppendString(%q) = %s, want %s", s, got, want)
		}
		var back string
		if err := json.Unmarshal(got, &back); err != nil {
			t.Fatalf("%s does not decode: %v", got, err)
		}
	})
}
