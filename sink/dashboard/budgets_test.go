package dashboard_test

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/chtest"
	"github.com/toolgate/toolgate/sink"
	"github.com/toolgate/toolgate/sink/dashboard"
)

// budgetEvents are refusals of the budget step: two agents, two tools,
// every reason, a few sessions, in the last three hours.
func budgetEvents(n int) []sink.Event {
	reasons := []struct{ code, reason, budget string }{
		{"policy", "budget_exhausted", "session_calls"},
		{"policy", "loop_detected", "loops"},
		{"rate_limit", "local_rate_limit", "api.example.org"},
		{"rate_limit", "upstream_backoff", "api.example.org"},
		{"policy", "budget_exhausted", "agent_cost"},
	}
	evs := make([]sink.Event, n)
	for i := range evs {
		r := reasons[i%len(reasons)]
		evs[i] = sink.Event{
			EventID: fmt.Sprintf("budget-%05d", i), Time: now.Add(-time.Duration(i*37%(3*3600)+1) * time.Second),
			Sidecar: sidecars[0], Listener: "forward", Tool: tools[(i/5)%2], Agent: agents[(i/3)%2],
			Session: fmt.Sprintf("s-%d", i%7), TraceID: fmt.Sprintf("btrace-%05d", i), Method: "GET",
			ErrorCode: r.code, ErrorClass: map[string]string{"policy": "policy", "rate_limit": "transient"}[r.code],
			Reason: r.reason, Budget: r.budget, Refused: true, RetryAfterMS: 1000, Envelope: true, TotalUS: 50,
		}
	}
	return evs
}

// TestBudgetsPanel reads the budgets and loops panel as JSON, for several
// views, and checks every row against a count made in Go from the events
// written (a replayed batch among them); the page shows the panel.
func TestBudgetsPanel(t *testing.T) {
	srv := chtest.Shared(t)
	bevs := budgetEvents(300)
	evs := append(append([]sink.Event(nil), bevs...), genEvents(600)...) // the replayed first 50 are budget refusals
	db := seed(t, srv, evs)
	addReader(t, srv)
	base := serve(t, srv, db)

	type key struct{ agent, tool, reason, budget string }
	views := []struct {
		name, query       string
		from              time.Time
		tool, agent, code string
	}{
		{name: "default 24h", from: now.Add(-24 * time.Hour)},
		{name: "last 1h", query: "last=1h", from: now.Add(-time.Hour)},
		{name: "agent", query: "agent=" + agents[1], from: now.Add(-24 * time.Hour), agent: agents[1]},
		{name: "tool and code", query: "tool=" + tools[0] + "&error_code=rate_limit", from: now.Add(-24 * time.Hour), tool: tools[0], code: "rate_limit"},
	}
	for _, v := range views {
		t.Run(v.name, func(t *testing.T) {
			want := map[key]uint64{}
			sessions := map[key]map[string]bool{}
			for _, e := range bevs {
				if e.Time.Before(v.from) || v.tool != "" && e.Tool != v.tool || v.agent != "" && e.Agent != v.agent || v.code != "" && e.ErrorCode != v.code {
					continue
				}
				k := key{e.Agent, e.Tool, e.Reason, e.Budget}
				want[k]++
				if sessions[k] == nil {
					sessions[k] = map[string]bool{}
				}
				sessions[k][e.Session] = true
			}
			var got answer[[]dashboard.BudgetRow]
			if st := getJSON(t, base+"/api/budgets?"+v.query, &got); st != 200 {
				t.Fatalf("budgets: %d %s", st, got.Error)
			}
			have := map[key]uint64{}
			for i, r := range got.Data {
				k := key{r.Agent, r.Tool, r.Reason, r.Budget}
				have[k] = r.Calls
				if r.Sessions != uint64(len(sessions[k])) {
					t.Errorf("%+v: %d sessions, want %d", k, r.Sessions, len(sessions[k]))
				}
				if i > 0 && r.Calls > got.Data[i-1].Calls {
					t.Errorf("rows not ordered by calls: %d after %d", r.Calls, got.Data[i-1].Calls)
				}
			}
			if !reflect.DeepEqual(have, want) {
				t.Errorf("budget refusals:\n got %v\nwant %v", have, want)
			}
		})
	}

	pageHas(t, base+"/?last=24h", `<section id="budgets">`, `<tr data-reason="loop_detected">`, `<td>session_calls</td>`)
}
