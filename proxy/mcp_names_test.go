package proxy

import (
	"log/slog"
	"testing"

	"github.com/toolgate/toolgate/proxy/mcp"
)

// TestNameWatchShared checks names rules outside the proxy give
// (approvals.tools): unlisted while every route that listed lacks them,
// listed as soon as one route lists them, and a route's own names checked
// against that route's list only.
func TestNameWatchShared(t *testing.T) {
	w := &mcpNameWatch{shared: []string{"charge", "refund"}, own: map[string][]string{"a": {"x"}, "b": nil},
		field: map[string]string{"a": "tools[0].mcp.tools", "b": "tools[1].mcp.tools"}, listed: map[string]map[string]bool{}}
	log := slog.New(slog.DiscardHandler)
	list := func(names ...string) []mcp.ListedTool {
		var out []mcp.ListedTool
		for _, n := range names {
			out = append(out, mcp.ListedTool{Name: n})
		}
		return out
	}
	w.observe("a", list("charge", "y"), log)
	got := w.names()
	if len(got) != 2 || got[0].Name != "x" || got[1].Name != "refund" || got[1].Field != "approvals.tools" {
		t.Fatalf("after a's list: %+v; want x (a's own) and refund", got)
	}
	w.observe("b", list("refund", "x"), log)
	got = w.names()
	if len(got) != 1 || got[0].Name != "x" || got[0].Routes[0] != "a" {
		t.Fatalf("after b's list: %+v; want only x (b listing x does not list a's)", got)
	}
	w.observe("a", list("x"), log)
	got = w.names()
	if len(got) != 1 || got[0].Name != "charge" || len(got[0].Routes) != 2 {
		t.Fatalf("after a lists x alone: %+v; want charge, which neither route lists now", got)
	}
}
