package clickhouse_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/chtest"
	"github.com/toolgate/toolgate/sink"
)

// otherQueryTests names the queries of docs/queries.md that tests other
// than TestDocumentedQueries run on their own seeded events.
var otherQueryTests = []string{"mcp_outcomes", "limit_scope", "answers_over_time", "answer_share_per_tool", "definition_changes", "definition_changed_refusals"}

// mcpEvents are the MCP events TestDocumentedMCPQuery seeds.
func mcpEvents() []sink.Event {
	to := docTo
	at := to.Add(-30 * time.Minute)
	var evs []sink.Event
	add := func(n int, server, tool, protocol, method, outcome string, when time.Time) {
		for i := 0; i < n; i++ {
			evs = append(evs, sink.Event{
				EventID: fmt.Sprintf("%s-%s-%s-%s-%s-%d-%d", server, tool, protocol, method, outcome, when.Unix(), i),
				Time:    when.Add(time.Duration(i) * time.Second), Tool: tool, MCPServer: server, MCPProtocol: protocol,
				RPCMethod: method, Outcome: outcome, OK: outcome == "ok" || outcome == "input_required",
			})
		}
	}
	const issues, pay = "issues.example.com/mcp", "pay.example.com/mcp"
	add(6, issues, "create_issue", "2026-07-28", "tools/call", "ok", at)
	add(3, issues, "create_issue", "2026-07-28", "tools/call", "refused", at)
	add(2, issues, "create_issue", "2026-07-28", "tools/call", "input_required", at)
	add(4, issues, "create_issue", "2025-11-25", "tools/call", "ok", at)
	add(1, issues, "create_issue", "2025-11-25", "tools/call", "tool_error", at)
	add(2, pay, "charge", "2026-07-28", "tools/call", "rpc_error", at)
	add(1, pay, "charge", "2026-07-28", "tools/call", "no_answer", at)
	add(5, issues, "", "2026-07-28", "tools/list", "", at)               // not a tools/call
	add(7, issues, "create_issue", "2026-07-28", "tools/call", "ok", to) // outside the range
	return evs
}

// TestDocumentedMCPQuery runs docs/queries.md's mcp_outcomes, as written,
// on seeded MCP events of both protocol eras (a replayed batch among them,
// and events outside the range and of other methods) and checks the
// counts an analyst reads off it.
func TestDocumentedMCPQuery(t *testing.T) {
	t.Parallel()
	srv := chtest.Shared(t)
	ch, db := openCH(t, srv)
	evs := mcpEvents()
	ctx := context.Background()
	if err := ch.WriteEvents(ctx, evs); err != nil {
		t.Fatal(err)
	}
	if err := ch.WriteEvents(ctx, evs[:9]); err != nil { // a replayed batch
		t.Fatal(err)
	}
	q, ok := docQueries(t)["mcp_outcomes"]
	if !ok {
		t.Fatal("docs/queries.md has no query mcp_outcomes")
	}
	q = docFill(db, q)
	rows, err := srv.TryQuery(q)
	if err != nil {
		t.Fatalf("%v\n%s", err, q)
	}
	want := "[[issues.example.com/mcp create_issue 2026-07-28 11 6 0 0 3 2 0 0.2727] " +
		"[issues.example.com/mcp create_issue 2025-11-25 5 4 1 0 0 0 0 0.2] " +
		"[pay.example.com/mcp charge 2026-07-28 3 0 0 2 0 0 1 1]]"
	if got := fmt.Sprint(rows); got != want {
		t.Errorf("rows:\n got %s\nwant %s", got, want)
	}
}
