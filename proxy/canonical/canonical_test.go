package canonical

import (
	"net/netip"
	"strings"
	"testing"
	"time"
)

func TestCanonHost(t *testing.T) {
	cases := []struct {
		in, want string // want "" means refused as ambiguous
	}{
		{"localhost", "localhost"},
		{"LocalHost", "localhost"},
		{"localhost.", "localhost"},
		{"api.Example.COM.", "api.example.com"},
		{"127.0.0.1", "127.0.0.1"},
		{"127.1", "127.0.0.1"},
		{"127.0.1", "127.0.0.1"},
		{"0x7f000001", "127.0.0.1"},
		{"0X7F.1", "127.0.0.1"},
		{"2130706433", "127.0.0.1"},
		{"0177.0.0.1", "127.0.0.1"},
		{"017700000001", "127.0.0.1"},
		{"127.0.0.1.", "127.0.0.1"},
		{"[::ffff:127.0.0.1]", "127.0.0.1"},
		{"::ffff:7f00:1", "127.0.0.1"},
		{"[::1]", "::1"},
		{"[0:0:0:0:0:0:0:1]", "::1"},
		{"[2001:DB8::1]", "2001:db8::1"},
		{"my_host-1.internal", "my_host-1.internal"},
		{"1.2.3.256", ""},
		{"127.0.0.0x100", ""},
		{"4294967296", ""},
		{"1.2.3.4.5", ""},
		{"08.1.1.1", ""}, // an octal part with an 8
		{"[fe80::1%25eth0]", ""},
		{"", ""},
		{".", ""},
		{"a..b", ""},
		{"0..", ""},
		{"localhost..", ""},
		{"loc%61lhost", ""},
		{"exa mple.com", ""},
		{"ex\u00e4mple.com", ""},
		{"[127.0.0.1]", ""},
	}
	for _, tc := range cases {
		got, ok := Host(tc.in)
		if tc.want == "" {
			if ok {
				t.Errorf("canonHost(%q) = %q, want it refused as ambiguous", tc.in, got)
			}
			continue
		}
		if !ok || got != tc.want {
			t.Errorf("canonHost(%q) = %q, %v; want %q", tc.in, got, ok, tc.want)
		}
	}
}

func TestCanonPath(t *testing.T) {
	cases := []struct {
		in       string
		want     string // "" means refused as ambiguous
		trailing bool
	}{
		{"/v1/tools", "/v1/tools", false},
		{"", "/", false},
		{"/", "/", false},
		{"/v1/%74ools", "/v1/tools", false},
		{"/v1/tool%73", "/v1/tools", false},
		{"/%76%31/%74%6F%6f%6c%73", "/v1/tools", false},
		{"//v1/tools", "/v1/tools", false},
		{"/v1//tools", "/v1/tools", false},
		{"/v1/./tools", "/v1/tools", false},
		{"/v1/x/../tools", "/v1/tools", false},
		{"/v1/%2e/tools", "/v1/tools", false},
		{"/v1/%2E%2e/v1/tools", "/v1/tools", false},
		{"/v1/x/%2e%2e/tools", "/v1/tools", false},
		{"/../../v1/tools", "/v1/tools", false},
		{"/v1/tools/", "/v1/tools", true},
		{"/v1/tools//", "/v1/tools", true},
		{"/v1/tools/.", "/v1/tools", true},
		{"/v1/tools/x/..", "/v1/tools", true},
		{"/v1/docs/a:batchUpdate", "/v1/docs/a:batchUpdate", false},
		{"/v1/docs/a%3AbatchUpdate", "/v1/docs/a:batchUpdate", false},
		{"/v1/a%20b", "/v1/a%20b", false},
		{"/v1/a%c3%a9", "/v1/a%C3%A9", false},
		{"/v1/a%3fb", "/v1/a%3Fb", false},
		{"/v1/a%3bb", "/v1/a%3Bb", false},
		{"/v1/...", "/v1/...", false},
		{"/v1%2Ftools", "", false},
		{"/v1%2ftools", "", false},
		{"/v1%5Ctools", "", false},
		{"/v1\\tools", "", false},
		{"/v1/%252e/tools", "", false},
		{"/v1/tools;x=1", "", false},
		{"/v1/tools%00", "", false},
		{"/v1/tools%0a", "", false},
		{"/v1/tools%7f", "", false},
		{"/v1/tools%", "", false},
		{"/v1/tools%2", "", false},
		{"/v1/tools%zz", "", false},
		{"v1/tools", "", false},
	}
	for _, tc := range cases {
		got, trailing, ok := Path(tc.in)
		if tc.want == "" {
			if ok {
				t.Errorf("canonPath(%q) = %q, want it refused as ambiguous", tc.in, got)
			}
			continue
		}
		if !ok || got != tc.want || trailing != tc.trailing {
			t.Errorf("canonPath(%q) = %q, trailing %v, ok %v; want %q, trailing %v", tc.in, got, trailing, ok, tc.want, tc.trailing)
		}
	}
}

// TestCanonPathLinear checks a path of the largest size a request line can
// carry, made of dot segments, is put in canonical form in linear time.
func TestCanonPathLinear(t *testing.T) {
	p := strings.Repeat("/a", 1<<18) + strings.Repeat("/..", 1<<18) + "/x"
	start := time.Now()
	got, _, ok := Path(p)
	if !ok || got != "/x" {
		t.Fatalf("canonPath = %q, %v; want /x", got, ok)
	}
	// Linear work is a few milliseconds; quadratic work would be minutes.
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("canonPath of %d bytes took %v", len(p), d)
	}
}

func TestCanonPort(t *testing.T) {
	for _, tc := range []struct{ in, scheme, want string }{
		{"", "http", "80"}, {"", "https", "443"}, {"8080", "http", "8080"},
		{"080", "http", "80"}, {"0000443", "https", "443"},
		{"0", "http", ""}, {"65536", "http", ""}, {"+80", "http", ""}, {"8o", "http", ""},
	} {
		got, ok := Port(tc.in, tc.scheme)
		if (tc.want == "") == ok || got != tc.want {
			t.Errorf("canonPort(%q, %s) = %q, %v; want %q", tc.in, tc.scheme, got, ok, tc.want)
		}
	}
}

// FuzzCanonHost checks the host canonicaliser: never panics, a fixed
// point, and the hosts it takes as an address's canonical spelling without
// parsing them (dottedQuad) are exactly those netip spells the same.
func FuzzCanonHost(f *testing.F) {
	for _, s := range []string{"localhost", "127.1", "0x7f000001", "2130706433", "[::ffff:127.0.0.1]", "API.example.com.", "1.2.3.256",
		"127.0.0.1", "255.255.255.255", "0.0.0.0", "010.0.0.1", "1.2.3.4.5", "1.2.3", "1..2.3", "256.1.1.1", "1.2.3.04", "1.2.3.4."} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, h string) {
		a, err := netip.ParseAddr(h)
		if want := err == nil && a.Is4() && a.String() == h; dottedQuad(h) != want {
			t.Fatalf("dottedQuad(%q) = %v; netip spells it %v (err %v)", h, !want, a, err)
		}
		c, ok := Host(h)
		if !ok {
			return
		}
		c2, ok2 := Host(c)
		if !ok2 || c2 != c {
			t.Fatalf("canonHost(%q) = %q, but canonHost of that = %q, %v", h, c, c2, ok2)
		}
	})
}
