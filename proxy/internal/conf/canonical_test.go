package conf

import (
	"context"
	"encoding/hex"
	"net/netip"
	"net/url"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/proxy/canonical"
)

// TestHostAliases checks where a call's host is placed among the hosts
// tools name: loopback names are one host, and an IP literal of a named
// tool host's address is that host.
func TestHostAliases(t *testing.T) {
	tools := func(hosts ...string) []*Tool {
		var ts []*Tool
		for _, h := range hosts {
			ts = append(ts, &Tool{Host: h})
		}
		return ts
	}
	isTool := func(ts []*Tool) func(string) bool {
		return func(h string) bool {
			for _, t := range ts {
				if t.Host == h {
					return true
				}
			}
			return false
		}
	}
	fixed := func(ctx context.Context, host string) ([]netip.Addr, error) {
		switch host {
		case "api.example.com":
			return []netip.Addr{netip.MustParseAddr("192.0.2.10"), netip.MustParseAddr("2001:db8::10")}, nil
		case "cdn.example.com":
			return []netip.Addr{netip.MustParseAddr("192.0.2.10")}, nil
		}
		return nil, context.DeadlineExceeded
	}
	cases := []struct {
		name  string
		tools []string
		in    string
		want  string // "" means ambiguous
	}{
		{"loopback literal to localhost", []string{"localhost"}, "127.0.0.1", "localhost"},
		{"other loopback address", []string{"localhost"}, "127.0.0.2", "localhost"},
		{"ipv6 loopback", []string{"localhost"}, "::1", "localhost"},
		{"localhost to a literal tool host", []string{"127.0.0.1"}, "localhost", "127.0.0.1"},
		{"sub.localhost", []string{"127.0.0.1"}, "a.localhost", "127.0.0.1"},
		{"exact wins", []string{"localhost", "127.0.0.1"}, "127.0.0.1", "127.0.0.1"},
		{"two loopback tool hosts", []string{"localhost", "127.0.0.1"}, "127.0.0.2", ""},
		{"no loopback tool host", []string{"api.example.com"}, "127.0.0.1", "127.0.0.1"},
		{"ip of a named tool host", []string{"api.example.com"}, "192.0.2.10", "api.example.com"},
		{"ipv6 of a named tool host", []string{"api.example.com"}, "2001:db8::10", "api.example.com"},
		{"ip of two tool hosts", []string{"api.example.com", "cdn.example.com"}, "192.0.2.10", ""},
		{"other ip", []string{"api.example.com"}, "192.0.2.11", "192.0.2.11"},
		{"names are not resolved", []string{"api.example.com"}, "other.example.com", "other.example.com"},
		{"unresolvable tool host claims nothing", []string{"nxdomain.example"}, "192.0.2.10", "192.0.2.10"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ts := tools(tc.tools...)
			a := newHostAliases(ts)
			a.Lookup = fixed
			got, ok := a.Place(context.Background(), tc.in, isTool(ts))
			if tc.want == "" {
				if ok {
					t.Fatalf("place(%q) = %q, want ambiguous", tc.in, got)
				}
				return
			}
			if !ok || got != tc.want {
				t.Fatalf("place(%q) = %q, %v; want %q", tc.in, got, ok, tc.want)
			}
		})
	}
}

// FuzzCanonPath checks the path canonicaliser on any input: it never
// panics, its result is a fixed point, and the result holds no dot
// segments, no empty segments and no escapes of unreserved characters.
func FuzzCanonPath(f *testing.F) {
	for _, s := range []string{"/v1/tools", "/v1/%74ools", "//v1/tools", "/v1/./tools", "/v1/x/../tools",
		"/v1/%2e/tools", "/v1/tools/", "/v1%2Ftools", "/a%c3%a9", "/%2E%2E/%2e", "/a/b/../../..", "/~%7E%7e", "/a%20b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		c, _, ok := canonical.Path(p)
		if !ok {
			return
		}
		c2, tr2, ok2 := canonical.Path(c)
		if !ok2 || c2 != c || tr2 {
			t.Fatalf("canonPath(%q) = %q, but canonPath of that = %q, %v, %v", p, c, c2, tr2, ok2)
		}
		if c != "/" && strings.HasSuffix(c, "/") {
			t.Fatalf("canonPath(%q) = %q ends in '/'", p, c)
		}
		if strings.Contains(c, "//") {
			t.Fatalf("canonPath(%q) = %q holds //", p, c)
		}
		for _, seg := range strings.Split(c[1:], "/") {
			if seg == "." || seg == ".." {
				t.Fatalf("canonPath(%q) = %q holds a dot segment", p, c)
			}
		}
		for i := 0; i+2 < len(c); i++ {
			if c[i] == '%' {
				if d, _ := hex.DecodeString(c[i+1 : i+3]); canonical.Unreserved(d[0]) || c[i+1] >= 'a' || c[i+2] >= 'a' {
					t.Fatalf("canonPath(%q) = %q holds %s", p, c, c[i:i+3])
				}
			}
		}
		// What goes upstream reads back as the same canonical path.
		cn := Canon{Scheme: "http", Host: "h", Port: "80", Path: c}
		u := cn.URL(nil, "")
		back, _, ok3 := canonical.Path(u.EscapedPath())
		if !ok3 || back != c {
			t.Fatalf("canonPath(%q) = %q goes upstream as %q, read back as %q", p, c, u.EscapedPath(), back)
		}
		if _, err := url.Parse("http://h" + u.EscapedPath()); err != nil {
			t.Fatalf("canonPath(%q) = %q is not a valid URL path: %v", p, c, err)
		}
	})
}

// FuzzCanonicalize checks the whole canonical form of a call: never a
// panic, and what goes upstream (the canonical URL and method) is a fixed
// point: put in canonical form again, it routes to the same tool with the
// same host, port and path.
func FuzzCanonicalize(f *testing.F) {
	cfg := &Config{Tools: []ToolConfig{
		{Name: "a", Match: MatchConfig{Host: "localhost", Method: "POST", Path: "/v1/tools"}},
		{Name: "b", Match: MatchConfig{Host: "api.example.com", Path: "/v1/items/{id}/"}},
	}}
	if err := cfg.Validate(f.TempDir()); err != nil {
		f.Fatal(err)
	}
	cfg.Aliases.Lookup = func(context.Context, string) ([]netip.Addr, error) {
		return []netip.Addr{netip.MustParseAddr("192.0.2.10")}, nil
	}
	for _, s := range []string{"http://127.1:8080//v1/./%74ools/", "https://192.0.2.10/v1/items/a%2fb", "http://API.example.com./v1/items/x/../y",
		"http://[::ffff:127.0.0.1]/v1/tools", "http://other.example/a%2Fb/../c", "http://0x7f000001:0080/v1/tools?q=1"} {
		f.Add("post", s)
	}
	ctx := context.Background()
	f.Fuzz(func(t *testing.T, method, raw string) {
		u, err := url.Parse(raw)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || method == "" {
			return
		}
		cn, ref := cfg.Canonicalize(ctx, method, u)
		if ref != nil {
			return
		}
		tl, _ := Route(cfg.Compiled, cn.Method, cn.Host, cn.Port, cn.Path)
		out := cn.URL(tl, u.RawQuery)
		cn2, ref2 := cfg.Canonicalize(ctx, cn.Method, out)
		if ref2 != nil {
			t.Fatalf("%s %s -> %s, refused on a second pass: %s", method, raw, out, ref2.Detail)
		}
		if out.EscapedPath() != cn.Path && out.EscapedPath() != cn.Path+"/" {
			t.Fatalf("%s %s: canonical path %q goes upstream as %q", method, raw, cn.Path, out.EscapedPath())
		}
		if cn2.Method != cn.Method || cn2.Host != cn.Host || cn2.Port != cn.Port || cn2.Path != cn.Path {
			t.Fatalf("%s %s -> %+v -> %s -> %+v: not a fixed point", method, raw, cn, out, cn2)
		}
		if tl2, _ := Route(cfg.Compiled, cn2.Method, cn2.Host, cn2.Port, cn2.Path); tl2 != tl {
			t.Fatalf("%s %s routes differently on a second pass", method, raw)
		}
	})
}

// BenchmarkCanonicalize measures putting one call in canonical form: an
// already canonical call (the common case) and one that needs rewriting.
func BenchmarkCanonicalize(b *testing.B) {
	cfg := &Config{Tools: []ToolConfig{
		{Name: "a", Match: MatchConfig{Host: "api.example.com", Method: "POST", Path: "/v1/tools/{id}"}},
		{Name: "b", Match: MatchConfig{Host: "localhost", Method: "GET", Path: "/esearch"}},
	}}
	if err := cfg.Validate(b.TempDir()); err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct{ name, url string }{
		{"canonical", "https://api.example.com/v1/tools/abc?x=1"},
		{"rewritten", "https://API.example.com.:443//v1/./%74ools/abc/?x=1"},
		{"loopback_alias", "http://0x7f000001:8080/esearch"},
	} {
		u, err := url.Parse(bc.url)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(bc.name, func(b *testing.B) {
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				cn, ref := cfg.Canonicalize(ctx, "post", u)
				if ref != nil {
					b.Fatal(ref.Detail)
				}
				_ = cn.URL(nil, u.RawQuery)
			}
		})
	}
}
