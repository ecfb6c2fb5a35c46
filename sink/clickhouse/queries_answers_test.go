package clickhouse_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/chtest"
	"github.com/toolgate/toolgate/sink"
)

// answerEvents are the events TestDocumentedAnswerQueries seeds for the
// answer checks' queries: a tool that enforces (every verdict, findings of
// one and of two kinds, a withheld answer with no kind), a tool in dry
// run, a tool without answer checks, and a call outside the range.
func answerEvents() []sink.Event {
	prev, this := docTo.Add(-90*time.Minute), docTo.Add(-30*time.Minute)
	var evs []sink.Event
	add := func(n int, tool, answer string, findings []string, redactions int64, when time.Time) {
		for i := 0; i < n; i++ {
			code, reason := "", ""
			if answer == sink.AnswerWithheld {
				code, reason = "policy", "answer_withheld"
			}
			evs = append(evs, sink.Event{
				EventID: fmt.Sprintf("ans-%03d", len(evs)),
				Time:    when.Add(time.Duration(i) * time.Second), Sidecar: "sc-a", Tool: tool,
				ErrorCode: code, Reason: reason, OK: code == "", Refused: code != "",
				Answer: answer, AnswerFindings: findings, Redactions: redactions,
			})
		}
	}
	email, keys := []string{"pii.email"}, []string{"pii.email", "secret.aws_access_key"}
	add(2, "crm_lookup", sink.AnswerRedacted, email, 1, prev) // first: the replayed batch holds these
	add(5, "crm_lookup", sink.AnswerPassed, nil, 0, prev)
	add(1, "crm_lookup", sink.AnswerWithheld, []string{"instruction", "secret.github_token"}, 0, prev)
	add(3, "crm_lookup", sink.AnswerPassed, nil, 0, this)
	add(2, "crm_lookup", sink.AnswerRedacted, keys, 3, this)
	add(1, "crm_lookup", sink.AnswerWithheld, nil, 0, this) // withheld by a policy that named no kind
	add(1, "crm_lookup", sink.AnswerUninspected, nil, 0, this)
	add(4, "wiki_fetch", sink.AnswerPassed, nil, 0, this)
	add(3, "wiki_fetch", sink.AnswerWouldRedact, email, 0, this) // dry run: nothing replaced
	add(1, "wiki_fetch", sink.AnswerWouldWithhold, []string{"instruction"}, 0, this)
	add(6, "docs_edit", "", nil, 0, this)                                        // no answer checks
	add(2, "crm_lookup", sink.AnswerRedacted, email, 5, docTo)                   // outside the range
	add(1, "wiki_fetch", sink.AnswerWouldRedact, email, 0, prev.Add(-time.Hour)) // an hour earlier, in range
	return evs
}

// definitionEvents are the MCP events TestDocumentedAnswerQueries seeds
// for the definition-change queries: tools/list answers from two sidecars
// reporting changes (one tool that later changed in more fields, another
// tool once), calls to a changed tool that were refused (carrying the
// change) and forwarded (record mode), a refusal of another server's tool,
// a tools/list answer with no change, and a change outside the range.
func definitionEvents() []sink.Event {
	prev, this := docTo.Add(-90*time.Minute), docTo.Add(-30*time.Minute)
	var evs []sink.Event
	add := func(n int, sidecar, server, method, tool, agent, reason string, changes []string, when time.Time) {
		for i := 0; i < n; i++ {
			code := ""
			if reason != "" {
				code = "policy"
			}
			evs = append(evs, sink.Event{
				EventID: fmt.Sprintf("def-%03d", len(evs)),
				Time:    when.Add(time.Duration(i) * time.Second), Sidecar: sidecar, Tool: tool, Agent: agent,
				MCPServer: server, RPCMethod: method, ErrorCode: code, Reason: reason, Refused: code != "", OK: code == "",
				DefinitionChanges: changes,
			})
		}
	}
	const issues, pay = "issues.example.com/mcp", "pay.example.com/mcp"
	desc := []string{"create_issue: description"}
	add(2, "sc-a", issues, "tools/list", "", "agent-a", "", desc, prev) // first: the replayed batch holds these
	add(1, "sc-b", issues, "tools/list", "", "agent-b", "", desc, prev.Add(10*time.Minute))
	add(3, "sc-a", issues, "tools/call", "create_issue", "agent-a", "definition_changed", desc, prev.Add(20*time.Minute))
	add(2, "sc-b", issues, "tools/call", "create_issue", "agent-b", "definition_changed", desc, prev.Add(20*time.Minute))
	add(1, "sc-a", issues, "tools/list", "", "agent-a", "", []string{"create_issue: description,inputSchema", "close_issue: annotations"}, this)
	add(2, "sc-a", pay, "tools/call", "pay", "agent-c", "", []string{"pay: inputSchema"}, this) // record mode: forwarded
	add(1, "sc-b", pay, "tools/call", "pay", "agent-c", "definition_changed", nil, this.Add(5*time.Minute))
	add(4, "sc-a", issues, "tools/list", "", "agent-a", "", nil, this)                                 // every definition matched
	add(1, "sc-a", issues, "tools/list", "", "agent-a", "", desc, docTo)                               // outside the range
	add(1, "sc-a", issues, "tools/call", "create_issue", "agent-a", "definition_changed", desc, docTo) // outside the range
	return evs
}

// TestDocumentedAnswerQueries runs docs/queries.md's queries of the answer
// checks and of changed MCP tool definitions, as written, on seeded events
// (a replayed batch among them, and events outside the range), and checks
// what an analyst reads off each.
func TestDocumentedAnswerQueries(t *testing.T) {
	t.Parallel()
	srv := chtest.Shared(t)
	ch, db := openCH(t, srv)
	ans, defs := answerEvents(), definitionEvents()
	ctx := context.Background()
	for _, b := range [][]sink.Event{ans, ans[:3], defs, defs[:3]} { // two replays
		if err := ch.WriteEvents(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	queries := docQueries(t)
	tests := []struct {
		name string
		want string // rows as fmt.Sprint prints them
	}{
		{"answers_over_time", "[" +
			"[2026-11-20 09:00:00 wiki_fetch would_redact pii.email 1] " +
			"[2026-11-20 10:00:00 crm_lookup redacted pii.email 2] " +
			"[2026-11-20 10:00:00 crm_lookup withheld instruction 1] " +
			"[2026-11-20 10:00:00 crm_lookup withheld secret.github_token 1] " +
			"[2026-11-20 11:00:00 crm_lookup redacted pii.email 2] " +
			"[2026-11-20 11:00:00 crm_lookup redacted secret.aws_access_key 2] " +
			"[2026-11-20 11:00:00 crm_lookup withheld  1] " +
			"[2026-11-20 11:00:00 wiki_fetch would_redact pii.email 3] " +
			"[2026-11-20 11:00:00 wiki_fetch would_withhold instruction 1]]"},
		// crm_lookup: 15 checked, 4 redacted and 2 withheld, 2*1 + 2*3
		// values replaced; wiki_fetch: 9 checked, 4 + 1 in dry run.
		{"answer_share_per_tool", "[" +
			"[wiki_fetch 9 4 0 0 4 1 0 0 0 0.5556] " +
			"[crm_lookup 15 8 4 2 0 0 1 8 0.4 0]]"},
		{"definition_changes", "[" +
			"[pay.example.com/mcp pay inputSchema 0 2 1 2026-11-20 11:30:00 2026-11-20 11:30:01] " +
			"[issues.example.com/mcp close_issue annotations 1 0 1 2026-11-20 11:30:00 2026-11-20 11:30:00] " +
			"[issues.example.com/mcp create_issue description,inputSchema 1 0 1 2026-11-20 11:30:00 2026-11-20 11:30:00] " +
			"[issues.example.com/mcp create_issue description 3 5 2 2026-11-20 10:30:00 2026-11-20 10:50:02]]"},
		{"definition_changed_refusals", "[" +
			"[issues.example.com/mcp create_issue 5 2 2026-11-20 10:50:00 2026-11-20 10:50:02] " +
			"[pay.example.com/mcp pay 1 1 2026-11-20 11:35:00 2026-11-20 11:35:00]]"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { checkDocQuery(t, srv, db, queries, tc.name, tc.want) })
	}
}
