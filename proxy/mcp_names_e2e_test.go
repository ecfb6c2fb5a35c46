package proxy_test

import (
	"context"
	"slices"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestMCPUnlistedNames: a route's mcp.tools names a tool the real server
// (the official Go SDK's) does not list. Once a client lists the tools
// through the proxy, the name is reported by UnlistedNames (the sidecar's
// /status) and counted in toolgate_proxy_mcp_unlisted_names; the listed
// tool is not.
func TestMCPUnlistedNames(t *testing.T) {
	t.Parallel()
	_, e, cs := mcpEnv(t, "    mcp: {tools: {create_issue: {}, delete_everything: {}}}\n", nil)
	if got := e.srv.UnlistedNames(); len(got) != 0 {
		t.Fatalf("before any list: %+v", got)
	}
	if _, err := cs.ListTools(context.Background(), &mcp.ListToolsParams{}); err != nil {
		t.Fatal(err)
	}
	got := e.srv.UnlistedNames()
	if len(got) != 1 || got[0].Name != "delete_everything" || got[0].Field != "tools[0].mcp.tools" || !slices.Equal(got[0].Routes, []string{"issues_mcp"}) {
		t.Fatalf("UnlistedNames = %+v; want delete_everything of tools[0].mcp.tools on issues_mcp", got)
	}
	if v := metricValue(t, e.srv, "toolgate_proxy_mcp_unlisted_names", nil); v != 1 {
		t.Errorf("toolgate_proxy_mcp_unlisted_names = %v, want 1", v)
	}
}
