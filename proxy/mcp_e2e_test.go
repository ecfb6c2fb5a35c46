package proxy_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

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
	srv     *httptest.Server
	created atomic.Int64 // create_issue invocations
	reports atomic.Int64 // slow_report invocations
	release chan struct{}
}

func startMCPUpstream(t *testing.T) *mcpUpstream {
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
	u.srv = httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
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
// forward proxy and as a reverse proxy, in both the session protocol
// (2025-11-25, with Mcp-Session-Id) and the SDK's default.
func TestMCPThroughProxy(t *testing.T) {
	for _, mode := range []string{"forward", "reverse"} {
		for _, version := range []string{"2025-11-25", ""} {
			t.Run(mode+"/"+strings.ReplaceAll(version+"default", "2025-11-25default", "2025-11-25"), func(t *testing.T) {
				testMCPThroughProxy(t, mode, version)
			})
		}
	}
}

func testMCPThroughProxy(t *testing.T, mode, version string) {
	up := startMCPUpstream(t)
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
	for _, ev := range e.waitEventsWhere(t, func(evs []sink.Event) bool { return countTool(evs, "slow_report") == 1 }) {
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
		if ev.Outcome == proxy.OutcomeRefused && (!ev.Refused || len(ev.ViolationPaths) != 1) {
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

var _ = policies.Input{}
