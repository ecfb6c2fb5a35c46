package budget

import (
	"context"
	"strings"
	"testing"
)

// TestUpstreamEntryApplies checks which upstreams entry a call meets: the
// one with its host and port, else on its scheme's default port the
// port-less one; and that two entries for one upstream are refused.
func TestUpstreamEntryApplies(t *testing.T) {
	cfg := Config{Upstreams: []Upstream{
		{Host: "api.example.org", Rate: 1, Burst: 1},
		{Host: "api.example.org:8443", Rate: 1, Burst: 1},
	}}
	if err := cfg.Validate(nil, nil); err != nil {
		t.Fatal(err)
	}
	e := New(&cfg, nil)
	for _, tc := range []struct {
		host, port string
		onDefault  bool
		want       string // the entry's host; "" none
	}{
		{"api.example.org", "443", true, "api.example.org"},
		{"api.example.org", "80", true, "api.example.org"},
		{"api.example.org", "8443", false, "api.example.org:8443"},
		{"api.example.org", "8080", false, ""},
		{"api.example.org", "443", false, ""}, // https on 443 is default; http on 443 is not
		{"other.example.org", "443", true, ""},
	} {
		up := e.upstreamOf(&Call{Upstream: tc.host, UpstreamPort: tc.port, UpstreamDefaultPort: tc.onDefault})
		got := ""
		if up != nil {
			got = up.host
		}
		if got != tc.want {
			t.Errorf("%s:%s (default %v): entry %q; want %q", tc.host, tc.port, tc.onDefault, got, tc.want)
		}
	}
	// A call the port-less entry covers is limited by it.
	c := &Call{Upstream: "api.example.org", UpstreamPort: "443", UpstreamDefaultPort: true}
	if v := e.Admit(context.Background(), c); v.Refused {
		t.Fatal(v)
	}
	if v := e.Admit(context.Background(), &Call{Upstream: "api.example.org", UpstreamPort: "80", UpstreamDefaultPort: true}); !v.Refused {
		t.Error("the second call within the burst of 1 passed")
	}

	key := func(s string) (string, error) { return strings.TrimSuffix(strings.ToLower(s), "."), nil }
	for _, bad := range [][]string{
		{"api.example.org", "API.example.org."},
		{"api.example.org", "api.example.org:443"},
		{"api.example.org:80", "api.example.org"},
	} {
		cfg := Config{Upstreams: []Upstream{{Host: bad[0], Rate: 1}, {Host: bad[1], Rate: 1}}}
		if err := cfg.Validate(nil, key); err == nil {
			t.Errorf("%q and %q both accepted", bad[0], bad[1])
		}
	}
}
