package mcp

import (
	"log/slog"
	"testing"
)

// TestNameWatchShared checks names rules outside the proxy give
// (approvals.tools): unlisted while every route that listed lacks them,
// listed as soon as one route lists them, and a route's own names checked
// against that route's list only.
func TestNameWatchShared(t *testing.T) {
	w := &NameWatch{shared: []string{"charge", "refund"}, own: map[string][]string{"a": {"x"}, "b": nil},
		field: map[string]string{"a": "tools[0].mcp.tools", "b": "tools[1].mcp.tools"}, listed: map[string]map[string]bool{}}
	log := slog.New(slog.DiscardHandler)
	list := func(names ...string) []ListedTool {
		var out []ListedTool
		for _, n := range names {
			out = append(out, ListedTool{Name: n})
		}
		return out
	}
	w.Observe("a", list("charge", "y"), log)
	got := w.Names()
	if len(got) != 2 || got[0].Name != "x" || got[1].Name != "refund" || got[1].Field != "approvals.tools" {
		t.Fatalf("after a's list: %+v; want x (a's own) and refund", got)
	}
	w.Observe("b", list("refund", "x"), log)
	got = w.Names()
	if len(got) != 1 || got[0].Name != "x" || got[0].Routes[0] != "a" {
		t.Fatalf("after b's list: %+v; want only x (b listing x does not list a's)", got)
	}
	w.Observe("a", list("x"), log)
	got = w.Names()
	if len(got) != 1 || got[0].Name != "charge" || len(got[0].Routes) != 2 {
		t.Fatalf("after a lists x alone: %+v; want charge, which neither route lists now", got)
	}
}
