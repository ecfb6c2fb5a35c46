package conf

import (
	"context"
	"net/url"
	"testing"
)

// TestUpstreamKeySpellings checks that a configured upstream and the calls
// to it are keyed alike whatever their spelling: the configuration's
// spellings give one key, and a call in any spelling gets the key of the
// entry with its port (and, on its scheme's default port, the port-less
// one).
func TestUpstreamKeySpellings(t *testing.T) {
	for _, tc := range []struct {
		name     string
		config   []string // one upstream, spelt several ways
		calls    []string // URLs of calls to it
		portless bool     // config names no port: calls on default ports
	}{
		{"loopback with a port",
			[]string{"localhost:8080", "127.0.0.1:8080", "LOCALHOST.:8080", "127.1:8080", "[::ffff:127.0.0.1]:8080", "[::1]:8080", "0x7f000001:08080", "api.localhost:8080", "127.0.0.2:8080"},
			[]string{"http://localhost:8080/x", "http://127.0.0.1:8080/x", "http://LocalHost.:8080/x", "http://127.1:8080/x", "http://[::ffff:7f00:1]:8080/x", "http://[::1]:8080/x", "http://2130706433:8080/x", "https://localhost:8080/x"},
			false},
		{"a name on its default port",
			[]string{"API.Example.org", "api.example.org."},
			[]string{"https://api.example.org/x", "http://API.EXAMPLE.ORG./x", "https://api.example.org:443/x", "http://api.example.org:0080/x"},
			true},
		{"a name with the default port spelt",
			[]string{"api.example.org:443", "API.example.org.:00443"},
			[]string{"https://api.example.org/x", "https://api.example.org:443/x", "http://api.example.org:443/x"},
			false},
		{"IPv6",
			[]string{"[2001:db8::1]:8443", "[2001:0db8:0:0::1]:8443"},
			[]string{"https://[2001:db8::1]:8443/", "http://[2001:DB8:0::1]:8443/"},
			false},
		{"IPv6 without a port",
			[]string{"[2001:db8::1]", "2001:db8::0:1"},
			[]string{"https://[2001:db8::1]/", "http://[2001:DB8:0::1]:80/"},
			true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want, err := UpstreamKey(tc.config[0])
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range tc.config[1:] {
				if got, err := UpstreamKey(s); err != nil || got != want {
					t.Errorf("UpstreamKey(%q) = %q, %v; want %q", s, got, err, want)
				}
			}
			var cfg Config
			cfg.Aliases = newHostAliases(nil)
			for _, s := range tc.calls {
				u, _ := url.Parse(s)
				cn, ref := cfg.Canonicalize(context.Background(), "GET", u)
				if ref != nil {
					t.Fatalf("%s: refused: %s", s, ref.Detail)
				}
				var b BudgetCall
				SetUpstream(&b, &cn)
				key := hostPortKey(b.Upstream, b.UpstreamPort)
				if tc.portless {
					if !b.UpstreamDefaultPort || hostPortKey(b.Upstream, "") != want {
						t.Errorf("%s: key %q (default port %v); want %q on a default port", s, key, b.UpstreamDefaultPort, want)
					}
				} else if key != want {
					t.Errorf("%s: key %q; want %q", s, key, want)
				}
			}
		})
	}
	for _, bad := range []string{"", "http://a.example", "a.example/x", "a.example:0", "a.example:99999", "1.2.3.256", "[fe80::1%eth0]:80", "a b"} {
		if k, err := UpstreamKey(bad); err == nil {
			t.Errorf("UpstreamKey(%q) = %q; want an error", bad, k)
		}
	}
}

// FuzzUpstreamKey reads any configured host: it never panics, a key reads
// back as itself (one upstream, one key), and a key is never empty.
func FuzzUpstreamKey(f *testing.F) {
	for _, s := range []string{"localhost:8080", "LOCALHOST.:08080", "127.1", "[::ffff:127.0.0.1]:80", "[2001:db8::1]",
		"2001:db8::1", "api.example.org:443", "0x7f000001", "a..b", "[fe80::1%eth0]", "x:", ":80", "1.2.3.256", "api.localhost"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		k, err := UpstreamKey(s)
		if err != nil {
			return
		}
		if k == "" {
			t.Fatalf("UpstreamKey(%q) is empty", s)
		}
		if k2, err := UpstreamKey(k); err != nil || k2 != k {
			t.Fatalf("UpstreamKey(%q) = %q, which reads back as %q, %v", s, k, k2, err)
		}
	})
}
