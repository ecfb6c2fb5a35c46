package chtest

import (
	"slices"
	"testing"
)

func TestParseTSV(t *testing.T) {
	tests := []struct {
		name string
		body string
		want [][]string
	}{
		{"empty", "", nil},
		{"one empty value", "\n", [][]string{{""}}},
		{"rows", "1\ta\n2\tb\n", [][]string{{"1", "a"}, {"2", "b"}}},
		{"escapes", `a\tb\nc\\d\'e\0f\rg\bh\fi` + "\n", [][]string{{"a\tb\nc\\d'e\x00f\rg\bh\fi"}}},
		{"null", `\N` + "\t" + `\\N` + "\n", [][]string{{`\N`, `\N`}}},
		{"trailing backslash", `x\` + "\n", [][]string{{`x\`}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := parseTSV(tt.body); !slices.EqualFunc(got, tt.want, slices.Equal) {
				t.Errorf("parseTSV(%q) = %q, want %q", tt.body, got, tt.want)
			}
		})
	}
}

func TestIdentifier(t *testing.T) {
	tests := []struct {
		in   string
		n    int
		want string
	}{
		{"TestSink/Flush_batch-2", 40, "testsink_flush_batch_2"},
		{"Ü", 40, "__"},
		{"abcdefghij", 5, "abcde"},
	}
	for _, tt := range tests {
		if got := identifier(tt.in, tt.n); got != tt.want {
			t.Errorf("identifier(%q, %d) = %q, want %q", tt.in, tt.n, got, tt.want)
		}
	}
}
