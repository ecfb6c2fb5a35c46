package dashboard_test

import (
	"fmt"
	"io"
	"net/http"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/chtest"
	"github.com/toolgate/toolgate/sink"
	"github.com/toolgate/toolgate/sink/dashboard"
)

// Values from events that the page must escape: a finding kind (a policy's
// name), a changed tool's name and a field as an MCP server could send them.
const (
	hostileKind  = `<script>alert("kind")</script>`
	hostileTool  = `<img src=x onerror=alert(1)>`
	hostileField = `"><b>field</b>`
)

// answerTools are the tools with answer checks in answerEvents.
var answerTools = []string{"crm_lookup", "wiki_fetch", "mail_read"}

// answerEvents are calls of tools with answer checks: every verdict, on
// three tools and three agents, with findings of one and two kinds (eight
// kinds, more than a row lists) and redaction counts, over the six hours
// before now.
func answerEvents(n int) []sink.Event {
	verdicts := []string{sink.AnswerPassed, sink.AnswerRedacted, sink.AnswerPassed, sink.AnswerWithheld,
		sink.AnswerWouldRedact, sink.AnswerWouldWithhold, sink.AnswerUninspected}
	kinds := [][]string{{"pii.email"}, {"pii.email", "secret.github_token"}, {"instruction"}, {"answer_schema"},
		{hostileKind}, {"secret.aws_access_key", "pii.phone"}, {"policy.crm_guard"}}
	evs := make([]sink.Event, n)
	for i := range evs {
		v := verdicts[i%len(verdicts)]
		e := sink.Event{
			EventID: fmt.Sprintf("answer-%05d", i), Time: now.Add(-time.Duration(i*61%(6*3600)+1) * time.Second),
			Sidecar: sidecars[i%2], Listener: "forward", Tool: answerTools[i%len(answerTools)], Agent: agents[(i/3)%len(agents)],
			TraceID: fmt.Sprintf("atrace-%05d", i), Method: "GET", OK: true, Envelope: true, TotalUS: 60, Answer: v,
		}
		switch v {
		case sink.AnswerPassed, sink.AnswerUninspected:
		default:
			e.AnswerFindings = kinds[(i/len(verdicts))%len(kinds)]
		}
		switch v {
		case sink.AnswerRedacted:
			e.Redactions = int64(1 + i%4)
		case sink.AnswerWithheld:
			e.OK, e.Refused, e.ErrorCode, e.ErrorClass, e.Reason = false, true, "policy", "policy", "answer_withheld"
		}
		evs[i] = e
	}
	return evs
}

const issuesServer, payServer = "issues.example.com/mcp", "pay.example.com/mcp"

// definitionEvents are MCP events about changed tool definitions, over
// the six hours before now: tools/list answers reporting changes (a tool
// that changed in one field, then in two; a tool with a hostile name and
// field), calls to a changed tool refused with the change, a refused
// tool whose change was reported before the range, calls forwarded to a
// changed tool (record mode), and tools/list answers with no change.
func definitionEvents(n int) []sink.Event {
	evs := make([]sink.Event, n)
	for i := range evs {
		e := sink.Event{
			EventID: fmt.Sprintf("definition-%05d", i), Time: now.Add(-time.Duration(i*89%(6*3600)+1) * time.Second),
			Sidecar: sidecars[i%2], Listener: "forward", Agent: agents[(i/3)%len(agents)], Method: "POST",
			MCPServer: issuesServer, RPCMethod: "tools/list", OK: true, Inspected: true,
		}
		switch i % 6 {
		case 0:
			e.DefinitionChanges = []string{"create_issue: description"}
			if i%4 == 0 {
				e.DefinitionChanges = []string{"create_issue: description,inputSchema", "close_issue: annotations"}
			}
		case 1:
			e.RPCMethod, e.Tool, e.Outcome = "tools/call", "create_issue", "refused"
			e.OK, e.Refused, e.ErrorCode, e.ErrorClass, e.Reason = false, true, "policy", "policy", "definition_changed"
			e.DefinitionChanges = []string{"create_issue: description"}
		case 2:
			e.MCPServer, e.RPCMethod, e.Tool, e.Outcome = payServer, "tools/call", "pay", "refused"
			e.OK, e.Refused, e.ErrorCode, e.ErrorClass, e.Reason = false, true, "policy", "policy", "definition_changed"
		case 3:
			e.MCPServer, e.RPCMethod, e.Tool, e.Outcome = payServer, "tools/call", "refund", "ok"
			e.DefinitionChanges = []string{"refund: inputSchema,outputSchema"}
		case 4:
			e.MCPServer = payServer
			e.DefinitionChanges = []string{hostileTool + ": " + hostileField + ",description", "refund: inputSchema,outputSchema"}
		case 5: // every definition matched its pin
		}
		evs[i] = e
	}
	return evs
}

// wantAnswers counts the answers panel in Go from the events.
func wantAnswers(evs []sink.Event, from time.Time, tool, agent string) map[string]dashboard.AnswerRow {
	out := map[string]dashboard.AnswerRow{}
	found := map[string]map[string]uint64{}
	for _, e := range evs {
		if e.Answer == "" || e.Time.Before(from) || !e.Time.Before(now.Add(time.Second)) || tool != "" && e.Tool != tool || agent != "" && e.Agent != agent {
			continue
		}
		r := out[e.Tool]
		r.Tool = e.Tool
		r.Checked++
		switch e.Answer {
		case sink.AnswerPassed:
			r.Passed++
		case sink.AnswerRedacted:
			r.Redacted++
		case sink.AnswerWithheld:
			r.Withheld++
		case sink.AnswerWouldRedact:
			r.WouldRedact++
		case sink.AnswerWouldWithhold:
			r.WouldWithhold++
		case sink.AnswerUninspected:
			r.Uninspected++
		}
		r.Redactions += uint64(e.Redactions)
		out[e.Tool] = r
		if found[e.Tool] == nil {
			found[e.Tool] = map[string]uint64{}
		}
		for _, k := range e.AnswerFindings {
			found[e.Tool][k]++
		}
	}
	for t, r := range out {
		r.EnforcedShare = float64(r.Redacted+r.Withheld) / float64(r.Checked)
		r.DryRunShare = float64(r.WouldRedact+r.WouldWithhold) / float64(r.Checked)
		for k, n := range found[t] {
			r.Findings = append(r.Findings, dashboard.Finding{Kind: k, Answers: n})
		}
		sort.Slice(r.Findings, func(i, j int) bool {
			a, b := r.Findings[i], r.Findings[j]
			return a.Answers > b.Answers || a.Answers == b.Answers && a.Kind < b.Kind
		})
		if len(r.Findings) > dashboard.MaxFindings {
			r.Findings = r.Findings[:dashboard.MaxFindings]
		}
		out[t] = r
	}
	return out
}

// wantDefinitions counts the definition changes panel in Go from the events.
func wantDefinitions(evs []sink.Event, from time.Time, tool, agent string) map[[2]string]dashboard.DefinitionRow {
	out := map[[2]string]dashboard.DefinitionRow{}
	fields := map[[2]string]map[string]bool{}
	for _, e := range evs {
		if e.Time.Before(from) || agent != "" && e.Agent != agent {
			continue
		}
		at := e.Time.Truncate(time.Second)
		for _, c := range e.DefinitionChanges {
			i := strings.LastIndex(c, ": ")
			k := [2]string{e.MCPServer, c[:i]}
			if tool != "" && k[1] != tool {
				continue
			}
			r := out[k]
			r.Server, r.Tool = k[0], k[1]
			if e.RPCMethod == "tools/list" {
				r.Listings++
			} else {
				r.Calls++
			}
			if r.FirstSeen.IsZero() || at.Before(r.FirstSeen) {
				r.FirstSeen = at
			}
			if at.After(r.LastSeen) {
				r.LastSeen = at
			}
			if fields[k] == nil {
				fields[k] = map[string]bool{}
			}
			for _, f := range strings.Split(c[i+2:], ",") {
				fields[k][f] = true
			}
			out[k] = r
		}
		if e.Reason == dashboard.ReasonDefinitionChanged && (tool == "" || e.Tool == tool) {
			k := [2]string{e.MCPServer, e.Tool}
			r := out[k]
			r.Server, r.Tool = k[0], k[1]
			r.Refused++
			if at.After(r.LastRefused) {
				r.LastRefused = at
			}
			out[k] = r
		}
	}
	for k, r := range out {
		for f := range fields[k] {
			r.Fields = append(r.Fields, f)
		}
		sort.Strings(r.Fields)
		out[k] = r
	}
	return out
}

// TestAnswerPanels reads the answers and the definition changes panels as
// JSON, as the read-only user, for several views, and checks every row
// against a count made in Go from the events written (a replayed batch of
// redacted answers among them, so a doubled redaction count would show);
// the page shows both panels with the values from events escaped.
func TestAnswerPanels(t *testing.T) {
	srv := chtest.Shared(t)
	ans, defs := answerEvents(700), definitionEvents(400)
	evs := append(append(append([]sink.Event(nil), ans...), defs...), genEvents(600)...) // the replayed first 50 are answers
	db := seed(t, srv, evs)
	addReader(t, srv)
	base := serve(t, srv, db)

	views := []struct {
		name, query string
		from        time.Time
		tool, agent string
	}{
		{name: "default 24h", from: now.Add(-24 * time.Hour)},
		{name: "last 1h", query: "last=1h", from: now.Add(-time.Hour)},
		{name: "agent", query: "agent=" + agents[1], from: now.Add(-24 * time.Hour), agent: agents[1]},
		{name: "error code does not apply", query: "error_code=policy", from: now.Add(-24 * time.Hour)},
		{name: "answer tool", query: "tool=" + answerTools[1] + "&last=6h", from: now.Add(-6 * time.Hour), tool: answerTools[1]},
		{name: "changed tool", query: "tool=create_issue&agent=" + agents[2], from: now.Add(-24 * time.Hour), tool: "create_issue", agent: agents[2]},
		{name: "refused tool", query: "tool=pay&last=2h", from: now.Add(-2 * time.Hour), tool: "pay"},
	}
	for _, v := range views {
		t.Run(v.name, func(t *testing.T) {
			var ar answer[[]dashboard.AnswerRow]
			if st := getJSON(t, base+"/api/answers?"+v.query, &ar); st != 200 {
				t.Fatalf("answers: %d %s", st, ar.Error)
			}
			want := wantAnswers(ans, v.from, v.tool, v.agent)
			have := map[string]dashboard.AnswerRow{}
			for i, r := range ar.Data {
				have[r.Tool] = r
				if i > 0 {
					p := ar.Data[i-1]
					if c, pc := r.Redacted+r.Withheld+r.WouldRedact+r.WouldWithhold, p.Redacted+p.Withheld+p.WouldRedact+p.WouldWithhold; c > pc {
						t.Errorf("row %s (%d changed) after %s (%d changed)", r.Tool, c, p.Tool, pc)
					}
				}
			}
			if !reflect.DeepEqual(have, want) {
				t.Errorf("answers:\n got %+v\nwant %+v", have, want)
			}
			if v.tool == "" && len(want) != len(answerTools) {
				t.Fatalf("the view holds answers of %d tools; the test would prove less than it says", len(want))
			}

			var dr answer[[]dashboard.DefinitionRow]
			if st := getJSON(t, base+"/api/definitions?"+v.query, &dr); st != 200 {
				t.Fatalf("definitions: %d %s", st, dr.Error)
			}
			wantDef := wantDefinitions(defs, v.from, v.tool, v.agent)
			haveDef := map[[2]string]dashboard.DefinitionRow{}
			latest := func(r dashboard.DefinitionRow) time.Time {
				if r.LastRefused.After(r.LastSeen) {
					return r.LastRefused
				}
				return r.LastSeen
			}
			for i, r := range dr.Data {
				haveDef[[2]string{r.Server, r.Tool}] = r
				if i > 0 && latest(r).After(latest(dr.Data[i-1])) {
					t.Errorf("row %s %s (last %v) after one last seen %v", r.Server, r.Tool, latest(r), latest(dr.Data[i-1]))
				}
			}
			if !reflect.DeepEqual(haveDef, wantDef) {
				t.Errorf("definitions:\n got %+v\nwant %+v", haveDef, wantDef)
			}
			if len(wantDef) == 0 && !slices.Contains(answerTools, v.tool) {
				t.Fatal("the view holds no definition change; the test would prove nothing")
			}
		})
	}

	// The page: both panels, every value from events escaped.
	resp, err := http.Get(base + "/?last=24h")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	page := string(b)
	for _, s := range []string{
		`<section id="answers">`, `<tr data-tool="crm_lookup">`, `<code>secret.github_token</code>`,
		`<section id="definitions">`, `<td>` + payServer + `</td>`, `<code>inputSchema</code>, <code>outputSchema</code>`,
		`&lt;script&gt;alert(&#34;kind&#34;)&lt;/script&gt;`, `&lt;img src=x onerror=alert(1)&gt;`, `&#34;&gt;&lt;b&gt;field&lt;/b&gt;`,
	} {
		if !strings.Contains(page, s) {
			t.Errorf("the page lacks %s", s)
		}
	}
	for _, s := range []string{hostileKind, hostileTool, "<b>field</b>"} {
		if strings.Contains(page, s) {
			t.Errorf("the page holds %s unescaped", s)
		}
	}
}
