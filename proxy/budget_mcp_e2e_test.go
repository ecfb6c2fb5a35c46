package proxy_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/bucketing"
	"github.com/toolgate/toolgate/policies/budget"
	"github.com/toolgate/toolgate/proxy"
	"github.com/toolgate/toolgate/proxy/budgetengine"
	"github.com/toolgate/toolgate/sink"
)

// sessionHeader adds toolgate's session header to every request, as an
// agent framework would.
type sessionHeader struct {
	rt      http.RoundTripper
	session string
}

func (s sessionHeader) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("X-Toolgate-Session", s.session)
	return s.rt.RoundTrip(r)
}

// TestMCPBudgetsAndLoops: on an MCP route, each tools/call counts as a
// call of its MCP tool. With a budget of three calls per MCP tool (its
// tools list naming the route, which covers the route's MCP tools) and
// loops.max_repeats 1, an identical second call is refused as
// loop_detected and a fourth distinct one as budget_exhausted, each as
// MCP's isError result carrying the envelope with retry_after_ms, and
// the server never sees them.
func TestMCPBudgetsAndLoops(t *testing.T) {
	t.Parallel()
	up := startMCPUpstream(t)
	cfg := budget.Config{
		Limits: []budget.Limit{{Name: "issues", Per: []string{"tool"}, Tools: []string{"issues_mcp"}, Calls: 3, Window: time.Minute}},
		Loops:  budget.LoopConfig{MaxRepeats: 1, Window: time.Minute},
	}
	if err := cfg.Validate([]string{"issues_mcp"}, proxy.UpstreamKey); err != nil {
		t.Fatal(err)
	}
	snap := proxy.Snapshot{Version: "v-test", Budgets: budgetengine.Adapt(budget.New(&cfg, nil))}
	srv, q, events := serveConfig(t, strings.ReplaceAll(mcpConfig, "MCPUP", up.srv.URL), schemaDir(t), snap, nil, 10*time.Millisecond)
	proxyURL := &url.URL{Scheme: "http", Host: srv.Addr("forward", 0)}
	hc := &http.Client{Transport: sessionHeader{rt: &http.Transport{Proxy: http.ProxyURL(proxyURL)}, session: "agent-run-1"}}
	cs := connect(t, up.srv.URL+"/mcp", hc, "2025-11-25", nil)

	issue := func(title string) map[string]any { return map[string]any{"title": title} }
	if res := callTool(t, cs, "create_issue", issue("one")); res.IsError {
		t.Fatalf("first call: %s", resultText(res))
	}
	res := callTool(t, cs, "create_issue", issue("one"))
	if e := refusalOf(t, res); e == nil || e.Reason != bucketing.ReasonLoopDetected || e.RetryAfterMS == nil {
		t.Fatalf("identical second call: %+v (%s)", e, resultText(res))
	}
	for _, title := range []string{"two", "three"} {
		if res := callTool(t, cs, "create_issue", issue(title)); res.IsError {
			t.Fatalf("call %q: %s", title, resultText(res))
		}
	}
	res = callTool(t, cs, "create_issue", issue("four"))
	e := refusalOf(t, res)
	if e == nil || e.Reason != bucketing.ReasonBudgetExhausted || e.Code != bucketing.CodePolicy || e.RetryAfterMS == nil || *e.RetryAfterMS <= 0 {
		t.Fatalf("fourth distinct call: %+v (%s)", e, resultText(res))
	}
	if !strings.Contains(resultText(res), "Budget 'issues' (3 calls per 1m0s, per tool)") {
		t.Errorf("refusal text %q", resultText(res))
	}
	if got := up.created.Load(); got != 3 {
		t.Errorf("the server created %d issues, want 3", got)
	}
	e2 := &env{queue: q, events: events}
	evs := e2.waitEventsWhere(t, func(evs []sink.Event) bool {
		n := 0
		for _, ev := range evs {
			if ev.Budget != "" {
				n++
			}
		}
		return n == 2
	})
	got := map[string]string{}
	for _, ev := range evs {
		if ev.Budget != "" {
			got[ev.Reason] = ev.Budget
			if ev.Tool != "create_issue" || !ev.Refused || ev.RetryAfterMS <= 0 || ev.Session != "agent-run-1" {
				t.Errorf("refusal event: tool %q refused %v retry_after_ms %d session %q", ev.Tool, ev.Refused, ev.RetryAfterMS, ev.Session)
			}
		}
	}
	if got[bucketing.ReasonLoopDetected] != "loops" || got[bucketing.ReasonBudgetExhausted] != "issues" {
		t.Errorf("events name the budgets %v, want loops and issues", got)
	}
}
