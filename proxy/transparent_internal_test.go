package proxy

import (
	"testing"

	"github.com/toolgate/toolgate/proxy/internal/conf"
)

func TestRouting(t *testing.T) {
	tools := []*conf.Tool{{Host: "api.example.com"}, {Host: "pinned.example", Port: "8443"}}
	for _, tc := range []struct {
		host, port string
		want       bool
	}{
		{"api.example.com", "443", true},
		{"API.example.com", "80", true},
		{"pinned.example", "8443", true},
		{"pinned.example", "443", false},
		{"other.example", "443", false},
	} {
		if got := conf.HasRoutes(tools, tc.host, tc.port); got != tc.want {
			t.Errorf("hasRoutes(%s, %s) = %v, want %v", tc.host, tc.port, got, tc.want)
		}
	}
	if !conf.HasRoutes([]*conf.Tool{{}}, "anything", "1") {
		t.Error("a tool without a host matches every host")
	}
	for _, tc := range []struct{ host, port, def, want string }{
		{"a.example", "443", "443", "a.example"},
		{"a.example", "8443", "443", "a.example:8443"},
		{"::1", "443", "443", "[::1]"},
		{"::1", "80", "443", "[::1]:80"},
		{"a.example", "", "80", "a.example"},
	} {
		if got := conf.JoinAuthority(tc.host, tc.port, tc.def); got != tc.want {
			t.Errorf("joinAuthority(%s, %s, %s) = %s, want %s", tc.host, tc.port, tc.def, got, tc.want)
		}
	}
}
