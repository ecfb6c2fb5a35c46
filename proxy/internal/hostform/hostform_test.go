package hostform_test

import (
	"testing"

	"github.com/toolgate/toolgate/proxy/internal/hostform"
)

func TestParseIPv4(t *testing.T) {
	tests := []struct{ in, want string }{
		{"127.0.0.1", "127.0.0.1"},
		{"127.1", "127.0.0.1"},
		{"0x7f.1", "127.0.0.1"},
		{"0x7f000001", "127.0.0.1"},
		{"2130706433", "127.0.0.1"},
		{"017700000001", "127.0.0.1"},
		{"0177.0.0.1", "127.0.0.1"},
		{"169.254.43518", "169.254.169.254"},
		{"1.2.3.4.5", ""},
		{"256.1.1.1", ""},
		{"1.2.3.256", ""},
		{"08.1.1.1", ""}, // 8 is no octal digit
		{"1..2", ""},
		{"+1.2.3.4", ""},
	}
	for _, tt := range tests {
		a, ok := hostform.ParseIPv4(tt.in)
		if got := map[bool]string{true: a.String(), false: ""}[ok]; got != tt.want {
			t.Errorf("ParseIPv4(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	for s, want := range map[string]bool{"1": true, "0x": true, "0x1F": true, "0x1g": false, "1e2": false, "": false, "a1": false} {
		if got := hostform.NumericLabel(s); got != want {
			t.Errorf("NumericLabel(%q) = %v, want %v", s, got, want)
		}
	}
}
