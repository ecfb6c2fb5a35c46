package proxy

import (
	"context"
	"net/netip"
	"slices"
	"testing"

	"github.com/toolgate/toolgate/proxy/internal/conf"
)

// TestEgressRoutedAs checks when a call routed as a tool's host (by its
// Host header or SNI) but dialled at another address keeps the tool-host
// exemption: only when the address is one of that host's own, so a Host
// header or SNI naming a tool cannot carry a call to a metadata or
// private address (the transparent listener and sniffed CONNECTs).
func TestEgressRoutedAs(t *testing.T) {
	cfg := &conf.Config{Tools: []conf.ToolConfig{
		{Name: "local", Match: conf.MatchConfig{Host: "localhost:8080", Method: "POST", Path: "/v1/tools"}},
		{Name: "named", Match: conf.MatchConfig{Host: "tool.test", Method: "POST", Path: "/v1/tools"}},
		{Name: "literal", Match: conf.MatchConfig{Host: "10.9.9.9", Method: "POST", Path: "/v1/tools"}},
	}}
	if err := cfg.Validate(t.TempDir()); err != nil {
		t.Fatal(err)
	}
	cfg.Aliases.Lookup = func(_ context.Context, h string) ([]netip.Addr, error) {
		if h == "tool.test" {
			return []netip.Addr{netip.MustParseAddr("10.0.0.5")}, nil
		}
		return nil, nil
	}
	for _, tc := range []struct {
		routed, addr string
		want         bool
	}{
		{"tool.test", "tool.test:443", true},         // dialled as routed
		{"localhost", "127.0.0.1:8080", true},        // a loopback tool host, a loopback address
		{"localhost", "169.254.169.254:80", false},   // a loopback tool host, the metadata address
		{"tool.test", "10.0.0.5:443", true},          // an address the tool host resolves to
		{"tool.test", "[::ffff:10.0.0.5]:443", true}, // the same, IPv4-mapped
		{"tool.test", "10.0.0.6:443", false},         // a private address it does not resolve to
		{"tool.test", "169.254.169.254:443", false},  // the metadata address
		{"tool.test", "93.184.215.14:443", false},    // public: the guard lets it through on its own
		{"10.9.9.9", "10.9.9.9:443", true},           // an IP tool host, its own address
		{"10.9.9.9", "10.9.9.8:443", false},          // ... and another
		{"other.test", "10.0.0.5:443", false},        // not a tool host
		{"other.test", "other.test:443", true},       // dialled as routed: the guard checks it by name
		{"tool.test", "other.test:443", false},       // another name: checked as itself
	} {
		if got := cfg.EgressRoutedAs(t.Context(), tc.routed, tc.addr); got != tc.want {
			t.Errorf("egressRoutedAs(%s, %s) = %v, want %v", tc.routed, tc.addr, got, tc.want)
		}
	}
	hs := cfg.EgressToolHosts()
	for _, want := range []string{"localhost:8080", "tool.test", "10.9.9.9"} {
		if !slices.Contains(hs, want) {
			t.Errorf("egressToolHosts() = %q, want %q among them", hs, want)
		}
	}
}
