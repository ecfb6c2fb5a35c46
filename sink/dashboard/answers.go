package dashboard

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"
)

// The panels of the answer side: what the answer checks did with the tools'
// answers (docs/answers.md), and the MCP tool definitions that differed
// from their pins, with the calls refused for them (docs/mcp.md). Like the
// other panels they run on ClickHouse 18.16 and count distinct event ids.

// AnswerRow is one line of the answers panel: what the answer checks did
// with one tool's answers in range. The verdicts are the event's answer
// values (sink.Answer*); Checked is every answer with a verdict.
type AnswerRow struct {
	Tool          string `json:"tool"`
	Checked       uint64 `json:"checked"`
	Passed        uint64 `json:"passed"`
	Redacted      uint64 `json:"redacted"`
	Withheld      uint64 `json:"withheld"`
	WouldRedact   uint64 `json:"would_redact"`
	WouldWithhold uint64 `json:"would_withhold"`
	Uninspected   uint64 `json:"uninspected"`
	// Redactions is how many values the checks replaced, over every
	// answer (each event's redactions, once).
	Redactions uint64 `json:"redactions"`
	// EnforcedShare is (Redacted+Withheld)/Checked; DryRunShare is
	// (WouldRedact+WouldWithhold)/Checked: what enforcing would change.
	EnforcedShare float64 `json:"enforced_share"`
	DryRunShare   float64 `json:"dry_run_share"`
	// Findings are the kinds the checks found in the tool's answers (never
	// the values), most answers first, at most MaxFindings.
	Findings []Finding `json:"findings"`
}

// Finding is a kind of what the answer checks found (secret.github_token,
// pii.email, instruction, answer_schema, a policy's name) and in how many
// answers.
type Finding struct {
	Kind    string `json:"kind"`
	Answers uint64 `json:"answers"`
}

// MaxFindings bounds the finding kinds the answers panel lists per tool.
const MaxFindings = 5

// DefinitionRow is one line of the definition changes panel: an MCP
// server's tool whose definition differed from its pin, and the calls
// refused because of it.
type DefinitionRow struct {
	Server string `json:"mcp_server"`
	Tool   string `json:"tool"`
	// Fields are the fields that changed (description, inputSchema, ...),
	// over every change reported in range, sorted; never their values.
	// Empty when the range holds refusals but no report of the change.
	Fields []string `json:"fields"`
	// Listings and Calls are the tools/list answers and the tools/call
	// events that reported the change.
	Listings uint64 `json:"listings"`
	Calls    uint64 `json:"calls"`
	// FirstSeen and LastSeen are the first and the last report in range;
	// zero when none.
	FirstSeen time.Time `json:"first_seen"`
	LastSeen  time.Time `json:"last_seen"`
	// Refused is the calls to the tool refused with reason
	// definition_changed; LastRefused the last of them (zero when none).
	Refused     uint64    `json:"refused"`
	LastRefused time.Time `json:"last_refused"`
}

// ReasonDefinitionChanged is the reason of a call refused because its
// tool's definition differs from its pin.
const ReasonDefinitionChanged = "definition_changed"

// maxDefinitions bounds the definition changes panel.
const maxDefinitions = 200

// answersSQL counts each tool's answers by verdict (distinct ids, as the
// other panels count).
const answersSQL = `/* dashboard: answers */ SELECT tool,
    toUInt64(uniqExact(cityHash64(event_id))) AS checked,
    toUInt64(uniqExactIf(cityHash64(event_id), answer = 'passed')), toUInt64(uniqExactIf(cityHash64(event_id), answer = 'redacted')),
    toUInt64(uniqExactIf(cityHash64(event_id), answer = 'withheld')), toUInt64(uniqExactIf(cityHash64(event_id), answer = 'would_redact')),
    toUInt64(uniqExactIf(cityHash64(event_id), answer = 'would_withhold')), toUInt64(uniqExactIf(cityHash64(event_id), answer = 'uninspected'))
FROM {db}.events
PREWHERE answer != ''
WHERE %s
GROUP BY tool
ORDER BY checked DESC, tool
LIMIT 200`

// answerRedactionsSQL adds up each tool's redactions, reading each event
// that has some once (a replayed event collapses into the group of its
// id's hash); the inner alias t keeps the tool filter on the column.
const answerRedactionsSQL = `/* dashboard: answer_redactions */ SELECT t, toUInt64(sum(r))
FROM (
    SELECT any(tool) AS t, cityHash64(event_id) AS h, any(redactions) AS r
    FROM {db}.events
    PREWHERE redactions > 0
    WHERE %s
    GROUP BY h
)
GROUP BY t`

// answerFindingsSQL counts the answers each kind was found in, per tool.
const answerFindingsSQL = `/* dashboard: answer_findings */ SELECT tool, finding, toUInt64(uniqExact(cityHash64(event_id))) AS n
FROM {db}.events
ARRAY JOIN answer_findings AS finding
PREWHERE notEmpty(answer_findings)
WHERE %s AND answer != ''
GROUP BY tool, finding
ORDER BY tool, n DESC, finding
LIMIT %d BY tool`

// answers is the answers panel: per tool, the verdicts of the answer
// checks, the values redacted and the kinds found; the tools whose
// answers were changed (or would be) most first. The tool and agent
// filters apply, the error code does not (a withheld answer is a policy
// refusal; the others are no failure at all).
func (s store) answers(ctx context.Context, f Filter) ([]AnswerRow, error) {
	where, args := f.where(false, true)
	var out []AnswerRow
	idx := map[string]int{}
	var r AnswerRow
	rows, err := s.q.query(ctx, s.sql(fmt.Sprintf(answersSQL, where)), args...)
	err = collect(rows, err, func() error {
		r = AnswerRow{}
		if err := rows.Scan(&r.Tool, &r.Checked, &r.Passed, &r.Redacted, &r.Withheld, &r.WouldRedact, &r.WouldWithhold, &r.Uninspected); err != nil {
			return err
		}
		if r.Checked > 0 {
			r.EnforcedShare = float64(r.Redacted+r.Withheld) / float64(r.Checked)
			r.DryRunShare = float64(r.WouldRedact+r.WouldWithhold) / float64(r.Checked)
		}
		idx[r.Tool] = len(out)
		out = append(out, r)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("answers: %w", err)
	}
	if len(out) == 0 {
		return out, nil
	}
	var tool string
	var n uint64
	rows, err = s.q.query(ctx, s.sql(fmt.Sprintf(answerRedactionsSQL, where)), args...)
	err = collect(rows, err, func() error {
		if err := rows.Scan(&tool, &n); err != nil {
			return err
		}
		if i, ok := idx[tool]; ok {
			out[i].Redactions = n
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("answer redactions: %w", err)
	}
	var fd Finding
	rows, err = s.q.query(ctx, s.sql(fmt.Sprintf(answerFindingsSQL, where, MaxFindings)), args...)
	err = collect(rows, err, func() error {
		if err := rows.Scan(&tool, &fd.Kind, &fd.Answers); err != nil {
			return err
		}
		if i, ok := idx[tool]; ok {
			out[i].Findings = append(out[i].Findings, fd)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("answer findings: %w", err)
	}
	changed := func(r AnswerRow) uint64 { return r.Redacted + r.Withheld + r.WouldRedact + r.WouldWithhold }
	// Stable: equals keep the query's order, most checked, then by name.
	sort.SliceStable(out, func(i, j int) bool { return changed(out[i]) > changed(out[j]) })
	return out, nil
}

// definitionsSQL lists each reported change (a "tool: field,field" entry)
// per server; definitions merges them per tool.
const definitionsSQL = `/* dashboard: definitions */ SELECT mcp_server, change,
    toUInt64(uniqExactIf(cityHash64(event_id), rpc_method = 'tools/list')) AS listings,
    toUInt64(uniqExactIf(cityHash64(event_id), rpc_method = 'tools/call')) AS calls,
    toUInt32(min(time)) AS first, toUInt32(max(time)) AS last
FROM {db}.events
ARRAY JOIN definition_changes AS change
PREWHERE notEmpty(definition_changes)
WHERE %s
GROUP BY mcp_server, change
ORDER BY last DESC, mcp_server, change
LIMIT 1000`

// definitionRefusalsSQL counts the calls refused for a changed definition.
const definitionRefusalsSQL = `/* dashboard: definition_refusals */ SELECT mcp_server, tool, toUInt64(uniqExact(cityHash64(event_id))) AS n, toUInt32(max(time)) AS last
FROM {db}.events
PREWHERE reason = '` + ReasonDefinitionChanged + `'
WHERE %s
GROUP BY mcp_server, tool
ORDER BY n DESC, mcp_server, tool
LIMIT 1000`

// splitChange splits a definition_changes entry, "tool: field,field", at
// its last ": " (field names hold none; a tool name might).
func splitChange(c string) (tool string, fields []string) {
	i := strings.LastIndex(c, ": ")
	if i < 0 {
		return c, nil
	}
	for _, f := range strings.Split(c[i+2:], ",") {
		if f = strings.TrimSpace(f); f != "" {
			fields = append(fields, f)
		}
	}
	return c[:i], fields
}

// definitions is the definition changes panel: per MCP server and tool,
// the fields that changed, the reports of the change, and the calls
// refused for it; the most recent first. The agent filter applies; the
// tool filter picks the changed tool (a tools/list event names none); the
// error code does not apply.
func (s store) definitions(ctx context.Context, f Filter) ([]DefinitionRow, error) {
	conds := []string{"time >= toDateTime(?)", "time < toDateTime(?)"}
	args := []any{f.From.Unix(), f.To.Unix()}
	if f.Agent != "" {
		conds, args = append(conds, "agent = ?"), append(args, f.Agent)
	}
	changeConds, changeArgs := conds, args
	if f.Tool != "" {
		// The entry starts with the tool and ": "; splitChange checks the rest.
		changeConds = append(append([]string(nil), conds...), "substring(change, 1, ?) = ?")
		changeArgs = append(append([]any(nil), args...), len(f.Tool)+2, f.Tool+": ")
		conds, args = append(conds, "tool = ?"), append(args, f.Tool)
	}
	type key struct{ server, tool string }
	byKey := map[key]*DefinitionRow{}
	fields := map[key]map[string]bool{}
	row := func(k key) *DefinitionRow {
		r := byKey[k]
		if r == nil {
			r = &DefinitionRow{Server: k.server, Tool: k.tool}
			byKey[k], fields[k] = r, map[string]bool{}
		}
		return r
	}
	var server, change string
	var listings, calls uint64
	var first, last uint32
	rows, err := s.q.query(ctx, s.sql(fmt.Sprintf(definitionsSQL, strings.Join(changeConds, " AND "))), changeArgs...)
	err = collect(rows, err, func() error {
		if err := rows.Scan(&server, &change, &listings, &calls, &first, &last); err != nil {
			return err
		}
		tool, fs := splitChange(change)
		if f.Tool != "" && tool != f.Tool {
			return nil
		}
		k := key{server, tool}
		r := row(k)
		r.Listings += listings
		r.Calls += calls
		ft, lt := time.Unix(int64(first), 0).UTC(), time.Unix(int64(last), 0).UTC()
		if r.FirstSeen.IsZero() || ft.Before(r.FirstSeen) {
			r.FirstSeen = ft
		}
		if lt.After(r.LastSeen) {
			r.LastSeen = lt
		}
		for _, fl := range fs {
			fields[k][fl] = true
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("definition changes: %w", err)
	}
	var tool string
	var n uint64
	rows, err = s.q.query(ctx, s.sql(fmt.Sprintf(definitionRefusalsSQL, strings.Join(conds, " AND "))), args...)
	err = collect(rows, err, func() error {
		if err := rows.Scan(&server, &tool, &n, &last); err != nil {
			return err
		}
		r := row(key{server, tool})
		r.Refused, r.LastRefused = n, time.Unix(int64(last), 0).UTC()
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("definition refusals: %w", err)
	}
	out := make([]DefinitionRow, 0, len(byKey))
	for k, r := range byKey {
		for fl := range fields[k] {
			r.Fields = append(r.Fields, fl)
		}
		sort.Strings(r.Fields)
		out = append(out, *r)
	}
	latest := func(r DefinitionRow) time.Time {
		if r.LastRefused.After(r.LastSeen) {
			return r.LastRefused
		}
		return r.LastSeen
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if la, lb := latest(a), latest(b); !la.Equal(lb) {
			return la.After(lb)
		}
		if a.Server != b.Server {
			return a.Server < b.Server
		}
		return a.Tool < b.Tool
	})
	if len(out) > maxDefinitions {
		out = out[:maxDefinitions]
	}
	return out, nil
}
