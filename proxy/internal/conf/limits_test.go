package conf

import (
	"testing"
	"unicode/utf8"
)

func TestBoundCallerID(t *testing.T) {
	tests := []struct {
		name string
		in   string
		max  int
		want string
	}{
		{"short", "writer-agent", 16, "writer-agent"},
		{"exactly the bound", "0123456789abcdef", 16, "0123456789abcdef"},
		{"cut", "0123456789abcdefX", 16, "0123456789abcdef...[truncated]"},
		{"cut before a split rune", "0123456789abcdeé", 16, "0123456789abcde...[truncated]"},
		{"no bound", "0123456789abcdefX", 0, "0123456789abcdefX"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := BoundCallerID(tc.in, tc.max)
			if got != tc.want {
				t.Errorf("boundCallerID(%q, %d) = %q, want %q", tc.in, tc.max, got, tc.want)
			}
			if !utf8.ValidString(got) {
				t.Errorf("%q is not valid UTF-8", got)
			}
		})
	}
}

func TestLimitsValidate(t *testing.T) {
	var l LimitsConfig
	if err := l.validate(); err != nil {
		t.Fatal(err)
	}
	want := LimitsConfig{MaxConns: DefaultMaxConns, ReadHeaderTimeout: DefaultReadHeaderTimeout, BodyTimeout: DefaultBodyTimeout,
		IdleTimeout: DefaultIdleTimeout, MaxJSONDepth: DefaultMaxJSONDepth, MaxCallerIDBytes: DefaultMaxCallerIDBytes}
	if l != want {
		t.Errorf("defaults = %+v, want %+v", l, want)
	}
	for _, bad := range []LimitsConfig{{MaxConns: -1}, {BodyTimeout: -1}, {MaxJSONDepth: -2}} {
		if err := bad.validate(); err == nil {
			t.Errorf("%+v: no error", bad)
		}
	}
}
