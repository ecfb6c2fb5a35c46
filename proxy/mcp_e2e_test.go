package proxy_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.yaml.in/yaml/v3"

	"github.com/toolgate/toolgate/bucketing"
	"github.com/toolgate/toolgate/policies"
	"github.com/toolgate/toolgate/proxy"
	"github.com/toolgate/toolgate/sink"
)

// issueSchema has nested objects and arrays, and (like most servers'
// schemas) says nothing about fields it does not list: the server itself
// would accept a typo.
const issueSchema = `{
  "type": "object",
  "properties": {
    "title": {"type": "string", "minLength": 1},
    "labels": {"type": "array", "items": {"type": "string"}},
    "assignee": {
      "type": "object",
      "properties": {
        "login": {"type": "string"},
        "team": {"type": "object", "properties": {"id": {"type": "integer"}, "name": {"type": "string"}}}
      },
      "required": ["login"]
    },
    "steps": {
      "type": "array",
      "items": {"type": "object", "properties": {"action": {"type": "string"}, "count": {"type": "integer"}}, "required": ["action"]}
    }
  },
  "required": ["title"]
}`

const reportSchema = `{"type": "object", "properties": {"pages": {"type": "integer"}}}`

// mcpUpstream is a real MCP server over streamable HTTP, built with the
// official SDK, whose handlers count their invocations.
type mcpUpstream struct {
	mcp     *mcp.Server
	srv     *httptest.Server
	created atomic.Int64 // create_issue invocations
	reports atomic.Int64 // slow_report invocations
	release chan struct{}
	headers atomic.Value // http.Header of the last request
}

func startMCPUpstream(t testing.TB) *mcpUpstream {
	t.Helper()
	return startMCPUpstreamEra(t, false)
}

// startMCPUpstreamEra is startMCPUpstream, stateless when asked: the SDK
// serves 2026-07-28 (server/discover, no sessions) only without sessions.
func startMCPUpstreamEra(t testing.TB, stateless bool) *mcpUpstream {
	t.Helper()
	u := &mcpUpstream{release: make(chan struct{})}
	s := mcp.NewServer(&mcp.Implementation{Name: "issues", Version: "1.0.0"}, nil)
	s.AddTool(&mcp.Tool{Name: "create_issue", Description: "Create an issue", InputSchema: json.RawMessage(issueSchema)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			u.created.Add(1)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "created"}}}, nil
		})
	s.AddTool(&mcp.Tool{Name: "slow_report", Description: "A report that streams progress", InputSchema: json.RawMessage(reportSchema)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			u.reports.Add(1)
			if tok := req.Params.GetProgressToken(); tok != nil {
				if err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: 1, Total: 2, Message: "page 1"}); err != nil {
					return nil, err
				}
			}
			select {
			case <-u.release:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "report done"}}}, nil
		})
	s.AddTool(&mcp.Tool{Name: "flaky", Description: "Always fails", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "backend down"}}}, nil
		})
	u.mcp = s
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{Stateless: stateless})
	u.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.headers.Store(r.Header.Clone())
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(u.srv.Close)
	return u
}

// mcpConfig puts an MCP route in front of the upstream, for the forward
// proxy and a reverse listener.
const mcpConfig = `
listen:
  forward: 127.0.0.1:0
  reverse:
    - listen: 127.0.0.1:0
      upstream: MCPUP
tools:
  - name: issues_mcp
    protocol: mcp
    match: {host: 127.0.0.1, path: /mcp}
`

// connect opens an SDK client session to endpoint over hc.
func connect(t *testing.T, endpoint string, hc *http.Client, version string, onProgress func(*mcp.ProgressNotificationParams)) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1.0.0"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			if onProgress != nil {
				onProgress(req.Params)
			}
		},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: hc}, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatalf("connect %s: %v", endpoint, err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func resultText(r *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range r.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// TestMCPThroughProxy drives a real SDK client through toolgate, as a
// forward proxy and as a reverse proxy, in the session protocol
// (2025-11-25, with Mcp-Session-Id), the stateless one (2026-07-28, against
// the SDK's stateless handler) and the SDK's default.
func TestMCPThroughProxy(t *testing.T) {
	for _, mode := range []string{"forward", "reverse"} {
		for _, version := range []string{"2025-11-25", "2026-07-28", ""} {
			name := version
			if name == "" {
				name = "default"
			}
			t.Run(mode+"/"+name, func(t *testing.T) {
				testMCPThroughProxy(t, mode, version)
			})
		}
	}
}

func testMCPThroughProxy(t *testing.T, mode, version string) {
	up := startMCPUpstreamEra(t, version == "2026-07-28")
	e := newEnvTo(t, strings.ReplaceAll(mcpConfig, "MCPUP", up.srv.URL), nil, nil, nil, 10*time.Millisecond)
	var endpoint string
	var hc *http.Client
	switch mode {
	case "forward":
		proxyURL := &url.URL{Scheme: "http", Host: e.srv.Addr("forward", 0)}
		endpoint, hc = up.srv.URL+"/mcp", &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(proxyURL)}}
	default:
		endpoint, hc = e.reverse+"/mcp", &http.Client{}
	}
	progress := make(chan string, 4)
	cs := connect(t, endpoint, hc, version, func(p *mcp.ProgressNotificationParams) { progress <- p.Message })
	direct := connect(t, up.srv.URL+"/mcp", &http.Client{}, version, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	// tools/list arrives unchanged.
	got, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	want, err := direct.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	gj, _ := json.Marshal(got)
	wj, _ := json.Marshal(want)
	if string(gj) != string(wj) {
		t.Errorf("tools/list through toolgate:\n%s\nwant:\n%s", gj, wj)
	}

	call := func(name string, args map[string]any) *mcp.CallToolResult {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return res
	}
	valid := map[string]any{"title": "Crash on save", "labels": []any{"bug"},
		"assignee": map[string]any{"login": "ada", "team": map[string]any{"id": 7}},
		"steps":    []any{map[string]any{"action": "open", "count": 1}}}
	if res := call("create_issue", valid); res.IsError || resultText(res) != "created" {
		t.Fatalf("valid call: isError=%v %q", res.IsError, resultText(res))
	}
	if n := up.created.Load(); n != 1 {
		t.Fatalf("handler ran %d times after one valid call", n)
	}

	for _, tc := range []struct {
		name   string
		args   map[string]any
		path   string
		reason string
	}{
		{"misspelled top-level argument", map[string]any{"title": "x", "lables": []any{"bug"}}, "/lables", "unknown_field"},
		{"typo inside a nested object", map[string]any{"title": "x", "assignee": map[string]any{"login": "ada", "team": map[string]any{"nmae": "core"}}},
			"/assignee/team/nmae", "unknown_field"},
		{"wrong type in an array item", map[string]any{"title": "x", "steps": []any{map[string]any{"action": "open", "count": "three"}}},
			"/steps/0/count", "wrong_type"},
	} {
		res := call("create_issue", tc.args)
		if !res.IsError {
			t.Errorf("%s: not an isError result: %q", tc.name, resultText(res))
			continue
		}
		if text := resultText(res); !strings.Contains(text, tc.path) {
			t.Errorf("%s: text %q does not name %s", tc.name, text, tc.path)
		}
		sc, _ := json.Marshal(res.StructuredContent)
		var env bucketing.Envelope
		if err := json.Unmarshal(sc, &env); err != nil || env.OK || env.Error == nil {
			t.Errorf("%s: structuredContent is not a refusal envelope: %s", tc.name, sc)
			continue
		}
		if env.Error.Code != bucketing.CodeValidation || env.Error.Reason != tc.reason {
			t.Errorf("%s: envelope code %s reason %s, want validation %s", tc.name, env.Error.Code, env.Error.Reason, tc.reason)
		}
		paths := []string{}
		for _, v := range env.Error.Violations {
			paths = append(paths, v.Path)
		}
		if !reflect.DeepEqual(paths, []string{tc.path}) {
			t.Errorf("%s: violations at %v, want [%s]", tc.name, paths, tc.path)
		}
	}
	if n := up.created.Load(); n != 1 {
		t.Errorf("handler ran %d times; refused calls must never reach it", n)
	}

	// The session survives the refusals.
	if res := call("create_issue", valid); res.IsError {
		t.Fatalf("call after refusals: %q", resultText(res))
	}
	if n := up.created.Load(); n != 2 {
		t.Errorf("handler ran %d times, want 2", n)
	}

	// Progress streams through before the handler finishes.
	done := make(chan *mcp.CallToolResult, 1)
	go func() {
		p := &mcp.CallToolParams{Name: "slow_report", Arguments: map[string]any{"pages": 2}}
		p.SetProgressToken("report-1")
		res, err := cs.CallTool(ctx, p)
		if err != nil {
			t.Errorf("slow_report: %v", err)
		}
		done <- res
	}()
	select {
	case msg := <-progress:
		if msg != "page 1" {
			t.Errorf("progress %q", msg)
		}
	case <-done:
		t.Fatal("the call ended before its progress arrived")
	case <-time.After(10 * time.Second):
		t.Fatal("no progress arrived while the handler was running")
	}
	select {
	case <-done:
		t.Fatal("the call ended while its handler was held")
	default:
	}
	close(up.release)
	if res := <-done; res == nil || res.IsError || resultText(res) != "report done" {
		t.Fatalf("slow_report result: %+v", res)
	}

	// Events: one per call, with the MCP fields.
	var calls []sink.Event
	for _, ev := range e.waitEventsWhere(t, func(evs []sink.Event) bool {
		return countTool(evs, "slow_report") == 1 && countTool(evs, "create_issue") == 5
	}) {
		if ev.RPCMethod == "tools/call" {
			calls = append(calls, ev)
		}
		if ev.MCPServer != strings.TrimPrefix(up.srv.URL, "http://")+"/mcp" {
			t.Errorf("event %s %s: mcp_server %q", ev.RPCMethod, ev.Method, ev.MCPServer)
		}
	}
	sort.Slice(calls, func(i, j int) bool { return calls[i].Time.Before(calls[j].Time) })
	var outcomes []string
	for _, ev := range calls {
		outcomes = append(outcomes, ev.Tool+":"+ev.Outcome+":"+ev.ErrorCode)
		if ev.RPCID == "" || !ev.Inspected || ev.Listener != mode {
			t.Errorf("event %+v: want an rpc id, inspected, listener %s", ev, mode)
		}
		if ev.MCPProtocol == "" || version != "" && ev.MCPProtocol != version {
			t.Errorf("event %s: mcp_protocol %q, want the negotiated version (%q asked)", ev.Tool, ev.MCPProtocol, version)
		}
		if ev.Outcome == sink.OutcomeRefused && (!ev.Refused || len(ev.ViolationPaths) != 1) {
			t.Errorf("refused event %+v", ev)
		}
	}
	wantOutcomes := []string{"create_issue:ok:", "create_issue:refused:validation", "create_issue:refused:validation",
		"create_issue:refused:validation", "create_issue:ok:", "slow_report:ok:"}
	if !reflect.DeepEqual(outcomes, wantOutcomes) {
		t.Errorf("tools/call events:\n%v\nwant\n%v", outcomes, wantOutcomes)
	}
}

func countTool(evs []sink.Event, tool string) int {
	n := 0
	for _, ev := range evs {
		if ev.Tool == tool {
			n++
		}
	}
	return n
}

// waitEventsWhere waits until the events written satisfy ok.
func (e *env) waitEventsWhere(t *testing.T, ok func([]sink.Event) bool) []sink.Event {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		evs := e.readEvents(t)
		if ok(evs) || time.Now().After(deadline) {
			return evs
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// mcpEnv is an SDK client session through toolgate's forward proxy with
// extra route settings.
func mcpEnv(t *testing.T, routeExtra string, checkers map[string]proxy.Checker) (*mcpUpstream, *env, *mcp.ClientSession) {
	t.Helper()
	return mcpEnvVersion(t, routeExtra, checkers, "2025-11-25")
}

// mcpEnvVersion is mcpEnv with the client asking for a protocol version
// ("" for the SDK's latest).
func mcpEnvVersion(t *testing.T, routeExtra string, checkers map[string]proxy.Checker, version string) (*mcpUpstream, *env, *mcp.ClientSession) {
	t.Helper()
	up := startMCPUpstream(t)
	cfg := strings.ReplaceAll(mcpConfig, "MCPUP", up.srv.URL) + routeExtra
	e := newEnvTo(t, cfg, checkers, nil, nil, 10*time.Millisecond)
	proxyURL := &url.URL{Scheme: "http", Host: e.srv.Addr("forward", 0)}
	cs := connect(t, up.srv.URL+"/mcp", &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(proxyURL)}}, version, nil)
	return up, e, cs
}

func callTool(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return res
}

func refusalOf(t *testing.T, res *mcp.CallToolResult) *bucketing.Error {
	t.Helper()
	if !res.IsError {
		return nil
	}
	// The envelope is always in _meta; structuredContent carries it too
	// for a tool the server listed without an outputSchema.
	meta, _ := json.Marshal(res.Meta["toolgate/envelope"])
	var env bucketing.Envelope
	if err := json.Unmarshal(meta, &env); err != nil || env.Error == nil {
		return nil
	}
	if res.StructuredContent != nil {
		sc, _ := json.Marshal(res.StructuredContent)
		if string(sc) != string(meta) {
			t.Errorf("structuredContent %s differs from the envelope in _meta %s", sc, meta)
		}
	}
	return env.Error
}

// TestMCPSchemaSources covers where a tools/call's schema comes from: a
// tools/list of toolgate's own when the client never listed, a changed
// list, a configured override, strict and dry-run per tool, and
// unknown_tool: pass.
func TestMCPSchemaSources(t *testing.T) {
	typo := map[string]any{"title": "x", "assignee": map[string]any{"login": "ada", "lgoin": "b"}}
	t.Run("fetched when never listed, latest protocol", func(t *testing.T) {
		up, _, cs := mcpEnvVersion(t, "", nil, "")
		if er := refusalOf(t, callTool(t, cs, "create_issue", typo)); er == nil || er.Violations[0].Path != "/assignee/lgoin" {
			t.Fatalf("typo not refused after a fetch: %+v", er)
		}
		if res := callTool(t, cs, "create_issue", map[string]any{"title": "x"}); res.IsError {
			t.Fatalf("valid call: %q", resultText(res))
		}
		if n := up.created.Load(); n != 1 {
			t.Errorf("handler ran %d times, want 1", n)
		}
	})
	t.Run("fetched when never listed", func(t *testing.T) {
		up, e, cs := mcpEnv(t, "", nil)
		if er := refusalOf(t, callTool(t, cs, "create_issue", typo)); er == nil || er.Violations[0].Path != "/assignee/lgoin" {
			t.Fatalf("typo not refused after a fetch: %+v", er)
		}
		er := refusalOf(t, callTool(t, cs, "delete_everything", map[string]any{}))
		if er == nil || er.Reason != "unknown_tool" || !strings.Contains(er.Detail, "create_issue, flaky, slow_report") {
			t.Fatalf("unknown tool: %+v", er)
		}
		if n := up.created.Load(); n != 0 {
			t.Errorf("handler ran %d times", n)
		}
		evs := e.waitEventsWhere(t, func(evs []sink.Event) bool { return countTool(evs, "delete_everything") == 1 })
		for _, ev := range evs {
			if ev.RPCMethod == "tools/call" && (!ev.Refused || !ev.Inspected) {
				t.Errorf("event %+v", ev)
			}
		}
	})
	t.Run("refreshed when the list changes", func(t *testing.T) {
		// Followed only under on_change: record; the default refuses a
		// changed tool (TestAdversarialPins).
		up, _, cs := mcpEnv(t, "    mcp: {pin: {on_change: record}}\n", nil)
		ctx := context.Background()
		if _, err := cs.ListTools(ctx, nil); err != nil {
			t.Fatal(err)
		}
		newer := map[string]any{"title": "x", "priority": 2}
		if refusalOf(t, callTool(t, cs, "create_issue", newer)) == nil {
			t.Fatal("priority accepted before the server listed it")
		}
		up.mcp.AddTool(&mcp.Tool{Name: "create_issue", InputSchema: json.RawMessage(`{"type":"object","properties":{"title":{"type":"string"},"priority":{"type":"integer"}}}`)},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				up.created.Add(1)
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "created"}}}, nil
			})
		if _, err := cs.ListTools(ctx, nil); err != nil {
			t.Fatal(err)
		}
		if res := callTool(t, cs, "create_issue", newer); res.IsError {
			t.Fatalf("after the new list: %q", resultText(res))
		}
		if n := up.created.Load(); n != 1 {
			t.Errorf("handler ran %d times, want 1", n)
		}
	})
	t.Run("config overrides, strict and dry run per tool", func(t *testing.T) {
		up, e, cs := mcpEnv(t, `    mcp:
      tools:
        create_issue:
          schema: {type: object, properties: {title: {type: string, maxLength: 5}, assignee: {type: object}}, required: [title]}
        slow_report:
          dry_run: true
`, nil)
		er := refusalOf(t, callTool(t, cs, "create_issue", map[string]any{"title": "far too long"}))
		if er == nil || er.Violations[0].Path != "/title" {
			t.Fatalf("configured schema not applied: %+v", er)
		}
		// assignee is a bare object in the override: strict leaves it open.
		if res := callTool(t, cs, "create_issue", map[string]any{"title": "ok", "assignee": map[string]any{"any": 1}}); res.IsError {
			t.Fatalf("override: %q", resultText(res))
		}
		close(up.release)
		if res := callTool(t, cs, "slow_report", map[string]any{"pagez": 1}); res.IsError {
			t.Fatalf("dry run refused: %q", resultText(res))
		}
		if up.reports.Load() != 1 {
			t.Error("dry-run call did not reach the handler")
		}
		evs := e.waitEventsWhere(t, func(evs []sink.Event) bool { return countTool(evs, "slow_report") == 1 })
		if countTool(evs, "slow_report") != 1 {
			for _, ev := range evs {
				t.Logf("event %+v", ev)
			}
			t.Fatal("no event for the dry-run call")
		}
		for _, ev := range evs {
			if ev.Tool == "slow_report" && (!ev.DryRunDenied || len(ev.DryRunViolations) != 1 || !strings.Contains(ev.DryRunViolations[0], "/pagez")) {
				t.Errorf("dry-run event %+v", ev)
			}
		}
	})
	t.Run("dry run for the route", func(t *testing.T) {
		up, e, cs := mcpEnv(t, `    mcp: {dry_run: true}
`, nil)
		if res := callTool(t, cs, "create_issue", typo); res.IsError {
			t.Fatalf("dry run refused: %q", resultText(res))
		}
		if up.created.Load() != 1 {
			t.Errorf("handler ran %d times, want 1", up.created.Load())
		}
		evs := e.waitEventsWhere(t, func(evs []sink.Event) bool { return countTool(evs, "create_issue") == 1 })
		var dry []string
		for _, ev := range evs {
			if ev.Tool == "create_issue" {
				dry = ev.DryRunViolations
				if !ev.DryRunDenied || ev.Refused || !ev.Inspected || ev.Outcome != "ok" {
					t.Errorf("dry-run event %+v", ev)
				}
			}
		}
		if !reflect.DeepEqual(dry, []string{"schema: /assignee/lgoin: unknown argument; expected one of: login, team"}) {
			t.Errorf("dry-run violations %q", dry)
		}
	})
	t.Run("tools past max_tools pass uninspected", func(t *testing.T) {
		up, e, cs := mcpEnv(t, `    mcp: {max_tools: 1}
`, nil)
		close(up.release)
		if refusalOf(t, callTool(t, cs, "create_issue", typo)) == nil {
			t.Fatal("the kept tool's typo was accepted")
		}
		if res := callTool(t, cs, "slow_report", map[string]any{"pagez": 1}); res.IsError {
			t.Fatalf("a tool past the bound was refused: %q", resultText(res))
		}
		evs := e.waitEventsWhere(t, func(evs []sink.Event) bool { return countTool(evs, "slow_report") == 1 })
		for _, ev := range evs {
			if ev.Tool == "slow_report" && (ev.Inspected || ev.Refused) {
				t.Errorf("event %+v, want uninspected and forwarded", ev)
			}
		}
	})
	t.Run("strict false for a tool", func(t *testing.T) {
		up, _, cs := mcpEnv(t, `    mcp:
      tools:
        create_issue: {strict: false}
`, nil)
		if res := callTool(t, cs, "create_issue", typo); res.IsError {
			t.Fatalf("strict false refused a field the schema leaves open: %q", resultText(res))
		}
		if res := callTool(t, cs, "create_issue", map[string]any{"title": 5}); !res.IsError {
			t.Fatal("strict false stopped checking types")
		}
		if up.created.Load() != 1 {
			t.Errorf("handler ran %d times, want 1", up.created.Load())
		}
	})
	t.Run("unknown tools pass uninspected", func(t *testing.T) {
		up, e, cs := mcpEnv(t, `    mcp: {unknown_tool: pass}
`, nil)
		if res := callTool(t, cs, "create_issue", typo); res.IsError {
			t.Fatalf("pass mode refused: %q", resultText(res))
		}
		if _, err := cs.ListTools(context.Background(), nil); err != nil {
			t.Fatal(err)
		}
		if refusalOf(t, callTool(t, cs, "create_issue", typo)) == nil {
			t.Fatal("typo accepted after the list passed through")
		}
		if up.created.Load() != 1 {
			t.Errorf("handler ran %d times, want 1", up.created.Load())
		}
		evs := e.waitEventsWhere(t, func(evs []sink.Event) bool { return countTool(evs, "create_issue") == 2 })
		var inspected []bool
		sort.Slice(evs, func(i, j int) bool { return evs[i].Time.Before(evs[j].Time) })
		for _, ev := range evs {
			if ev.Tool == "create_issue" {
				inspected = append(inspected, ev.Inspected)
			}
		}
		if !reflect.DeepEqual(inspected, []bool{false, true}) {
			t.Errorf("inspected = %v, want [false true]", inspected)
		}
	})
}

// TestMCPOutcomes checks that what the server answered is read from its
// event stream and recorded: a tool's isError result, a JSON-RPC error.
func TestMCPOutcomes(t *testing.T) {
	_, e, cs := mcpEnv(t, `    mcp: {unknown_tool: pass}
`, nil)
	if res := callTool(t, cs, "flaky", nil); !res.IsError || resultText(res) != "backend down" {
		t.Fatalf("flaky: %+v", res)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "no_such_tool"}); err == nil {
		t.Fatal("a call to a tool the server lacks succeeded")
	}
	evs := e.waitEventsWhere(t, func(evs []sink.Event) bool {
		return countTool(evs, "flaky") == 1 && countTool(evs, "no_such_tool") == 1
	})
	got := map[string]string{}
	for _, ev := range evs {
		if ev.Tool != "" {
			got[ev.Tool] = fmt.Sprintf("%s %s/%s ok=%v inspected=%v", ev.Outcome, ev.ErrorCode, ev.Reason, ev.OK, ev.Inspected)
		}
	}
	want := map[string]string{
		"flaky":        "tool_error upstream/tool_error ok=false inspected=false",
		"no_such_tool": "rpc_error validation/rpc_invalid_params ok=false inspected=false",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("events:\n%v\nwant\n%v", got, want)
	}
}

// TestMCPPolicies checks that Rego policies see the MCP tool name, its
// arguments and the server, and that a denial is an isError result.
func TestMCPPolicies(t *testing.T) {
	guard := compile(t, "mcpguard", `package t.mcpguard
deny contains {"msg": "no issues about secrets", "path": "/title"} if {
	input.protocol == "mcp"
	input.tool == "create_issue"
	endswith(input.server, "/mcp")
	contains(input.arguments.title, "secret")
}
`)
	up, e, cs := mcpEnv(t, "", map[string]proxy.Checker{
		"issues_mcp": policies.NewSet("issues_mcp", []policies.Bound{{Policy: guard, Mode: policies.ModeEnforce}}, 10*time.Second, false),
	})
	er := refusalOf(t, callTool(t, cs, "create_issue", map[string]any{"title": "the secret plan"}))
	if er == nil || er.Code != bucketing.CodePolicy || er.Violations[0].Path != "/title" {
		t.Fatalf("policy denial: %+v", er)
	}
	if res := callTool(t, cs, "create_issue", map[string]any{"title": "a plain bug"}); res.IsError {
		t.Fatalf("allowed call: %q", resultText(res))
	}
	if up.created.Load() != 1 {
		t.Errorf("handler ran %d times, want 1", up.created.Load())
	}
	evs := e.waitEventsWhere(t, func(evs []sink.Event) bool { return countTool(evs, "create_issue") == 2 })
	codes := map[string]int{}
	for _, ev := range evs {
		if ev.Tool == "create_issue" {
			codes[ev.ErrorCode+"/"+ev.Outcome]++
		}
	}
	if codes["policy/refused"] != 1 || codes["/ok"] != 1 {
		t.Errorf("events by code/outcome: %v", codes)
	}
}

// TestMCPRefusalOnTheWire checks the bytes of refusals a raw client gets:
// HTTP 200, the JSON-RPC id echoed, isError with the envelope, the error
// code header and the session header; an SSE-only caller gets one event;
// a batch is answered whole and never sent; a tools/call notification gets
// the plain refusal; an unreachable server is the tool's error.
func TestMCPRefusalOnTheWire(t *testing.T) {
	up := startMCPUpstream(t)
	cfg := strings.ReplaceAll(mcpConfig, "MCPUP", up.srv.URL) + `    mcp:
      tools:
        create_issue:
          schema_file: ` + writeSchema(t, issueSchema) + `
  - name: dead_mcp
    protocol: mcp
    match: {host: 127.0.0.1, path: /dead}
    timeout: 2s
    mcp:
      tools:
        create_issue: {schema: {type: object, properties: {title: {type: string}}}}
`
	e := newEnvTo(t, cfg, nil, nil, nil, 10*time.Millisecond)
	// Session headers pass both ways.
	a := do(t, e.viaHTTP, "POST", up.srv.URL+"/mcp", "application/json",
		`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`,
		map[string]string{"Accept": "application/json, text/event-stream"})
	sid := a.header.Get("Mcp-Session-Id")
	if a.status != 200 || sid == "" {
		t.Fatalf("initialize: %d %v %s", a.status, a.header, a.body)
	}
	a = do(t, e.viaHTTP, "POST", up.srv.URL+"/mcp", "application/json", `{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		map[string]string{"Accept": "application/json, text/event-stream", "Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-11-25"})
	seen := up.headers.Load().(http.Header)
	if a.status != 202 || seen.Get("Mcp-Session-Id") != sid || seen.Get("Mcp-Protocol-Version") != "2025-11-25" {
		t.Errorf("initialized: %d; the server saw session %q, version %q", a.status, seen.Get("Mcp-Session-Id"), seen.Get("Mcp-Protocol-Version"))
	}

	hdr := map[string]string{"Accept": "application/json, text/event-stream", "Mcp-Session-Id": "sess-42", "Mcp-Protocol-Version": "2025-11-25"}
	bad := `{"jsonrpc":"2.0","id":"abc-1","method":"tools/call","params":{"name":"create_issue","arguments":{"title":"x","lables":["bug"],"steps":[{"action":"a","count":"2"}]}}}`

	a = do(t, e.viaHTTP, "POST", up.srv.URL+"/mcp", "application/json", bad, hdr)
	if a.status != 200 || a.header.Get("Content-Type") != "application/json" || a.header.Get(proxy.HeaderErrorCode) != "validation" || a.header.Get("Mcp-Session-Id") != "sess-42" {
		t.Fatalf("refusal: %d %v %s", a.status, a.header, a.body)
	}
	var msg struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Result  struct {
			Content []struct {
				Type, Text string
			} `json:"content"`
			StructuredContent *bucketing.Envelope `json:"structuredContent"`
			IsError           bool                `json:"isError"`
			Meta              struct {
				Envelope bucketing.Envelope `json:"toolgate/envelope"`
			} `json:"_meta"`
		} `json:"result"`
	}
	if err := json.Unmarshal(a.body, &msg); err != nil {
		t.Fatalf("%s: %v", a.body, err)
	}
	r := msg.Result
	if msg.JSONRPC != "2.0" || string(msg.ID) != `"abc-1"` || !r.IsError || len(r.Content) != 1 || r.Content[0].Type != "text" {
		t.Fatalf("refusal message: %s", a.body)
	}
	for _, want := range []string{"/lables: unknown argument", "/steps/0/count", "expected integer, got string"} {
		if !strings.Contains(r.Content[0].Text, want) {
			t.Errorf("text %q lacks %q", r.Content[0].Text, want)
		}
	}
	if r.Meta.Envelope.Error == nil || len(r.Meta.Envelope.Error.Violations) != 2 {
		t.Errorf("_meta envelope: %+v", r.Meta.Envelope)
	}
	// The call was never listed through toolgate: whether the tool has an
	// outputSchema is unknown, so no structuredContent a client could
	// check against it.
	if r.StructuredContent != nil {
		t.Errorf("structuredContent on a refusal for a tool toolgate has not seen listed: %+v", r.StructuredContent)
	}

	// A caller that accepts only an event stream gets one event.
	a = do(t, e.viaHTTP, "POST", up.srv.URL+"/mcp", "application/json", bad, map[string]string{"Accept": "text/event-stream"})
	if a.status != 200 || a.header.Get("Content-Type") != "text/event-stream" || !strings.HasPrefix(string(a.body), "event: message\ndata: {") || !strings.HasSuffix(string(a.body), "}\n\n") {
		t.Errorf("SSE refusal: %d %v %q", a.status, a.header, a.body)
	}

	// A batch holding a bad call is answered whole and never sent.
	batch := `[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"create_issue","arguments":{"title":"ok"}}},` +
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"create_issue","arguments":{"titel":"x"}}},` +
		`{"jsonrpc":"2.0","method":"notifications/progress","params":{}}]`
	a = do(t, e.viaHTTP, "POST", up.srv.URL+"/mcp", "application/json", batch, hdr)
	var answers []struct {
		ID     int `json:"id"`
		Result *struct {
			IsError bool `json:"isError"`
		} `json:"result"`
		Error *struct{ Code int } `json:"error"`
	}
	if err := json.Unmarshal(a.body, &answers); err != nil || a.status != 200 || len(answers) != 2 {
		t.Fatalf("batch: %d %s", a.status, a.body)
	}
	if answers[0].ID != 1 || answers[0].Error == nil || answers[1].ID != 2 || answers[1].Result == nil || !answers[1].Result.IsError {
		t.Errorf("batch answers: %s", a.body)
	}

	// A tools/call without an id cannot be answered in JSON-RPC.
	a = do(t, e.viaHTTP, "POST", up.srv.URL+"/mcp", "application/json", `{"jsonrpc":"2.0","method":"tools/call","params":{"name":"create_issue","arguments":{"titel":"x"}}}`, hdr)
	if a.status != 422 || a.env == nil || a.env.Error.Reason != "unknown_field" {
		t.Errorf("notification: %d %s", a.status, a.body)
	}
	// What toolgate cannot read is never sent; members are read by their
	// exact names, so a second spelling cannot hide the arguments.
	for _, body := range []string{
		`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"create_issue","arguments":{"title":"x"}}} trailing`,
		`{"jsonrpc":"2.0","id":{"x":1},"method":"tools/call","params":{"name":"create_issue","arguments":{"titel":"x"}}}`,
		"[" + strings.Repeat(`{"jsonrpc":"2.0","method":"notifications/x"},`, 100) + `{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"create_issue","arguments":{"titel":"x"}}}]`,
	} {
		a = do(t, e.viaHTTP, "POST", up.srv.URL+"/mcp", "application/json", body, hdr)
		if a.status != 422 || a.env == nil || a.env.Error.Reason != "malformed_body" {
			t.Errorf("%.50s: %d %s", body, a.status, a.body)
		}
	}
	a = do(t, e.viaHTTP, "POST", up.srv.URL+"/mcp", "application/json",
		`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"create_issue","arguments":{"titel":"x"},"Arguments":{"title":"x"}}}`, hdr)
	// Two names equal up to case (or given twice) in one object are refused
	// whole: servers in other languages match names differently.
	if a.status != 422 || a.env == nil || a.env.Error.Reason != "duplicate_argument" || !strings.Contains(string(a.body), `"/params/Arguments"`) {
		t.Errorf("case-folded member: %d %s", a.status, a.body)
	}
	a = do(t, e.viaHTTP, "POST", up.srv.URL+"/mcp", "application/json",
		`{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"create_issue","arguments":{"title":"x","title":"y"}}}`, hdr)
	if a.status != 422 || a.env == nil || a.env.Error.Reason != "duplicate_argument" || !strings.Contains(string(a.body), `"/params/arguments/title"`) {
		t.Errorf("duplicate argument: %d %s", a.status, a.body)
	}
	if n := up.created.Load(); n != 0 {
		t.Errorf("handler ran %d times", n)
	}

	// A server that cannot be reached: the tool's error, not a 502.
	dead := httptest.NewServer(http.NotFoundHandler())
	deadURL := dead.URL
	dead.Close()
	a = do(t, e.viaHTTP, "POST", deadURL+"/dead", "application/json", `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"create_issue","arguments":{"title":"x"}}}`, hdr)
	if a.status != 200 || !strings.Contains(string(a.body), `"isError":true`) || !strings.Contains(string(a.body), `"id":9`) || a.header.Get(proxy.HeaderErrorCode) != "upstream" {
		t.Errorf("unreachable: %d %v %s", a.status, a.header, a.body)
	}

	evs := e.waitEvents(t, 12)
	var got []string
	sort.Slice(evs, func(i, j int) bool { return evs[i].Time.Before(evs[j].Time) })
	if len(evs) < 2 || evs[0].RPCMethod != "initialize" || evs[0].RPCID != "0" || evs[0].Tool != "" || !evs[0].OK ||
		evs[1].RPCMethod != "notifications/initialized" || evs[1].RPCID != "" || evs[1].UpstreamStatus != 202 {
		t.Fatalf("protocol messages' events: %+v", evs[:min(2, len(evs))])
	}
	for _, ev := range evs[2:] {
		got = append(got, ev.RPCMethod+" "+ev.RPCID+" "+ev.Outcome+" "+ev.ErrorCode)
	}
	want := []string{`tools/call "abc-1" refused validation`, `tools/call "abc-1" refused validation`, `batch 2 refused validation`,
		`tools/call  refused validation`, `   validation`, `   validation`, `   validation`, `   validation`, `   validation`, `tools/call 9 no_answer upstream`}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("events:\n%q\nwant\n%q", got, want)
	}
}

func writeSchema(t *testing.T, doc string) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "schema.json")
	if err := os.WriteFile(f, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

// TestMCPEvaluate checks that `policy eval` says an MCP route's schemas
// are learned at run time rather than evaluating without them.
func TestMCPEvaluate(t *testing.T) {
	var cfg proxy.Config
	if err := yaml.Unmarshal([]byte(strings.ReplaceAll(mcpConfig, "MCPUP", "http://127.0.0.1:1")), &cfg); err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(t.TempDir()); err != nil {
		t.Fatal(err)
	}
	_, err := proxy.Evaluate(context.Background(), proxy.Snapshot{Config: &cfg}, "issues_mcp", map[string]any{}, nil)
	if err == nil || !strings.Contains(err.Error(), "MCP route") {
		t.Errorf("Evaluate on an MCP route: %v", err)
	}
}

// TestMCPUncheckedRefuse checks mcp.unchecked: a tool whose listed schema
// cannot be used (here: over max_schema_bytes) passes unchecked by
// default, recorded as inspected=false, and with unchecked: refuse is
// refused before the server sees it; in dry run it is forwarded with the
// would-be refusal recorded.
func TestMCPUncheckedRefuse(t *testing.T) {
	args := map[string]any{"title": "x"}
	for _, tc := range []struct {
		name      string
		extra     string
		refused   bool
		dryDenied bool
	}{
		{"pass by default", "    mcp: {max_schema_bytes: 32}\n", false, false},
		{"refuse", "    mcp: {max_schema_bytes: 32, unchecked: refuse}\n", true, false},
		{"refuse in dry run", "    mcp: {max_schema_bytes: 32, unchecked: refuse, dry_run: true}\n", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up, e, cs := mcpEnv(t, tc.extra, nil)
			res := callTool(t, cs, "create_issue", args)
			er := refusalOf(t, res)
			if tc.refused {
				if er == nil || er.Code != "policy" || er.Reason != "unchecked" || !strings.Contains(er.Detail, "cannot be checked") {
					t.Fatalf("want a policy/unchecked refusal, got %+v (%q)", er, resultText(res))
				}
				if n := up.created.Load(); n != 0 {
					t.Errorf("handler ran %d times on a refused call", n)
				}
			} else {
				if res.IsError {
					t.Fatalf("call refused: %q", resultText(res))
				}
				if n := up.created.Load(); n != 1 {
					t.Errorf("handler ran %d times, want 1", n)
				}
			}
			evs := e.waitEventsWhere(t, func(evs []sink.Event) bool { return countTool(evs, "create_issue") == 1 })
			for _, ev := range evs {
				if ev.Tool != "create_issue" || ev.RPCMethod != "tools/call" {
					continue
				}
				if ev.Inspected || ev.Refused != tc.refused || ev.DryRunDenied != tc.dryDenied {
					t.Errorf("event inspected=%v refused=%v dry_run_denied=%v; want false %v %v", ev.Inspected, ev.Refused, ev.DryRunDenied, tc.refused, tc.dryDenied)
				}
			}
		})
	}
}

// TestMCPStreamedAnswerEventFirst: a server answers a tools/call in an
// event stream and keeps the stream open afterwards. The client has its
// answer with the response message, so the call's event must be written
// before that message reaches it, not when the stream ends; and the end
// of the stream adds no second event.
func TestMCPStreamedAnswerEventFirst(t *testing.T) {
	release := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Method != "tools/call" {
			// toolgate's own tools/list, to learn the tools
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"tools":[{"name":"create_issue","inputSchema":{"type":"object"}}]}}`, req.ID)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"done\"}]}}\n\n")
		w.(http.Flusher).Flush()
		select { // the stream stays open until the test has looked
		case <-release:
		case <-r.Context().Done():
		}
		fmt.Fprint(w, ": bye\n\n")
	}))
	defer up.Close()
	var once sync.Once
	stop := func() { once.Do(func() { close(release) }) }
	defer stop()
	e := newEnvTo(t, strings.ReplaceAll(mcpConfig, "MCPUP", up.URL), nil, nil, nil, 10*time.Millisecond)

	req, err := http.NewRequest("POST", up.URL+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"create_issue","arguments":{"title":"x"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", "sess-7")
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	resp, err := e.viaHTTP.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	var msg string
	for { // read the response event: up to its blank line
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("reading the stream: %v (so far %q)", err, msg)
		}
		if line == "\n" {
			break
		}
		msg += line
	}
	if !strings.Contains(msg, `"text":"done"`) {
		t.Fatalf("the client got %q", msg)
	}
	calls := func() []sink.Event {
		var out []sink.Event
		for _, ev := range e.readEvents(t) {
			if ev.RPCMethod == "tools/call" {
				out = append(out, ev)
			}
		}
		return out
	}
	evs := calls() // the server still holds the stream open
	if len(evs) != 1 || evs[0].Outcome != "ok" || !evs[0].OK {
		t.Fatalf("with the response in the client's hands, the tools/call events written are %+v; want the call's, ok", evs)
	}
	stop()
	if rest, err := io.ReadAll(br); err != nil || string(rest) != ": bye\n\n" {
		t.Fatalf("the stream's end: %q, %v", rest, err)
	}
	// A second event would have been written before the stream's last
	// bytes, which the client has read.
	if evs := calls(); len(evs) != 1 {
		t.Errorf("after the stream ended, %d tools/call events; want the one", len(evs))
	}
}
