package proxy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/policies"
	"github.com/toolgate/toolgate/proxy"
	"github.com/toolgate/toolgate/sink"
)

// TestMCPToolAnnotations checks what toolgate does with the annotations a
// server lists: policies see them in input.tool_annotations; a call that
// timed out is retryable only for a tool the server calls idempotent or
// read-only; and the W3C trace context travels in params._meta: a
// caller's traceparent there names the event's trace, and toolgate's own
// tools/list carries the caller's traceparent unchanged in its _meta and
// its headers.
func TestMCPToolAnnotations(t *testing.T) {
	no, yes := false, true
	s := mcp.NewServer(&mcp.Implementation{Name: "payments", Version: "1.0.0"}, nil)
	release := make(chan struct{})
	hang := func(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		select {
		case <-release:
		case <-ctx.Done():
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "late"}}}, nil
	}
	amount := json.RawMessage(`{"type":"object","properties":{"amount":{"type":"integer"}}}`)
	s.AddTool(&mcp.Tool{Name: "charge", InputSchema: amount,
		Annotations: &mcp.ToolAnnotations{DestructiveHint: &yes, IdempotentHint: false, OpenWorldHint: &no}}, hang)
	s.AddTool(&mcp.Tool{Name: "balance", InputSchema: json.RawMessage(`{"type":"object"}`),
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}}, hang)
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
	var mu sync.Mutex
	var lists []string // toolgate's own tools/list: traceparent header | body
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			b, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(b))
			if bytes.Contains(b, []byte(`"toolgate-list-0"`)) {
				mu.Lock()
				lists = append(lists, r.Header.Get("Traceparent")+"|"+string(b))
				mu.Unlock()
			}
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(up.Close)
	t.Cleanup(func() { close(release) }) // before up.Close: the held handlers end

	guard := compile(t, "hints", `package t.hints
deny contains {"msg": "large charges need a person when the tool is destructive", "path": "/amount"} if {
	input.tool_annotations.destructiveHint == true
	input.tool_annotations.openWorldHint == false
	not input.tool_annotations.idempotentHint
	input.arguments.amount > 100
}
`)
	cfg := strings.ReplaceAll(mcpConfig, "MCPUP", up.URL) + "    timeout: 300ms\n"
	e := newEnvTo(t, cfg, map[string]proxy.Checker{
		"issues_mcp": policies.NewSet("issues_mcp", []policies.Bound{{Policy: guard, Mode: policies.ModeEnforce}}, 10*time.Second, false),
	}, nil, nil, 10*time.Millisecond)
	proxyURL := &url.URL{Scheme: "http", Host: e.srv.Addr("forward", 0)}
	cs := connect(t, up.URL+"/mcp", &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(proxyURL)}}, "2025-11-25", nil)

	const trace = "4bf92f3577b34da6a3ce929d0e0e4736"
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	p := &mcp.CallToolParams{Name: "charge", Arguments: map[string]any{"amount": 500}}
	p.Meta = mcp.Meta{"traceparent": "00-" + trace + "-00f067aa0ba902b7-01"}
	res, err := cs.CallTool(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	if er := refusalOf(t, res); er == nil || er.Code != "policy" || er.Violations[0].Path != "/amount" {
		t.Fatalf("large charge: want the policy's refusal reading the annotations, got %+v %q", er, resultText(res))
	}
	for _, tc := range []struct {
		tool      string
		args      map[string]any
		retryable bool
	}{
		{"charge", map[string]any{"amount": 5}, false},
		{"balance", map[string]any{}, true},
	} {
		er := refusalOf(t, callTool(t, cs, tc.tool, tc.args))
		if er == nil || er.Reason != "timeout" || er.Retryable != tc.retryable {
			t.Errorf("%s timed out: envelope %+v, want reason timeout, retryable %v", tc.tool, er, tc.retryable)
		}
	}

	evs := e.waitEventsWhere(t, func(evs []sink.Event) bool { return countTool(evs, "charge") == 2 && countTool(evs, "balance") == 1 })
	var fetchTrace string
	for _, ev := range evs {
		if ev.Tool == "charge" && ev.Refused && ev.TraceID != trace {
			t.Errorf("event of the call with traceparent in _meta: trace %q, want %s", ev.TraceID, trace)
		}
		if ev.RPCMethod == "tools/list" && ev.RPCID == `"toolgate-list-0"` {
			fetchTrace = ev.TraceID
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(lists) != 1 || fetchTrace != trace {
		t.Fatalf("toolgate's own tools/list: %d seen upstream, event trace %q", len(lists), fetchTrace)
	}
	hdr, body, _ := strings.Cut(lists[0], "|")
	// The caller's traceparent, unchanged: never a parent span of
	// toolgate's making, never a sampled flag the caller did not set.
	if caller := "00-" + trace + "-00f067aa0ba902b7-01"; hdr != caller || !strings.Contains(body, `"traceparent":"`+caller+`"`) {
		t.Errorf("toolgate's own tools/list did not carry the caller's traceparent %s unchanged: header %q body %s", caller, hdr, body)
	}
}

// TestMCPReverseRefusesForeignHost checks the DNS-rebinding guard of a
// loopback reverse listener: a request whose Host or Origin names another
// site is refused with 403 and never reaches the server (toolgate rewrites
// Host, so the server could not tell), while local names pass.
func TestMCPReverseRefusesForeignHost(t *testing.T) {
	up := startMCPUpstream(t)
	e := newEnvTo(t, strings.ReplaceAll(mcpConfig, "MCPUP", up.srv.URL), nil, nil, nil, 10*time.Millisecond)
	body := `{"jsonrpc":"2.0","id":1,"method":"ping"}`
	for _, tc := range []struct {
		name, host, origin string
		status             int
	}{
		{"foreign host", "evil.example.com", "", http.StatusForbidden},
		{"foreign origin", "", "http://evil.example.com", http.StatusForbidden},
		{"localhost origin", "", "http://localhost:5173", 0},
		{"localhost host", "localhost", "", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up.headers.Store(http.Header(nil))
			req, _ := http.NewRequest(http.MethodPost, e.reverse+"/mcp", strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			if tc.host != "" {
				req.Host = tc.host
			}
			if tc.origin != "" {
				req.Header.Set("Origin", tc.origin)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			reached := up.headers.Load().(http.Header) != nil
			if tc.status == http.StatusForbidden {
				if resp.StatusCode != http.StatusForbidden || reached || !strings.Contains(string(b), `"id":null`) {
					t.Errorf("status %d, server reached %v, body %s; want 403 with a JSON-RPC error without id, server never reached", resp.StatusCode, reached, b)
				}
				return
			}
			if resp.StatusCode == http.StatusForbidden || !reached {
				t.Errorf("local request: status %d, server reached %v", resp.StatusCode, reached)
			}
		})
	}
}

// TestMCPListFreshness checks that a 2026-07-28 list is used only while
// its ttlMs says it is fresh: a server that changes a tool's schema without
// telling anyone (its lists say ttlMs 0, so toolgate keeps them for its
// 1 s floor) has its new schema fetched by the first call after that.
func TestMCPListFreshness(t *testing.T) {
	s := mcp.NewServer(&mcp.Implementation{Name: "evolving", Version: "1.0.0"}, nil)
	handler := func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}}, nil
	}
	s.AddTool(&mcp.Tool{Name: "evolving", InputSchema: json.RawMessage(`{"type":"object","properties":{"a":{"type":"integer"}}}`)}, handler)
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{Stateless: true})
	up := httptest.NewServer(h)
	t.Cleanup(up.Close)
	// The change is followed under on_change: record only; the default
	// refuses a changed tool (TestAdversarialPins).
	e := newEnvTo(t, strings.ReplaceAll(mcpConfig, "MCPUP", up.URL)+"    mcp: {pin: {on_change: record}}\n", nil, nil, nil, 10*time.Millisecond)

	call := func() string {
		t.Helper()
		body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"evolving","arguments":{"b":1},` +
			`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}}}`
		req, _ := http.NewRequest(http.MethodPost, up.URL+"/mcp", strings.NewReader(body))
		for k, v := range map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
			"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "evolving"} {
			req.Header.Set(k, v)
		}
		resp, err := e.viaHTTP.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		switch {
		case bytes.Contains(b, []byte(`"unknown_field"`)):
			return "refused"
		case bytes.Contains(b, []byte(`"done"`)):
			return "ran"
		}
		return "status " + resp.Status + ": " + string(b)
	}
	if got := call(); got != "refused" {
		t.Fatalf("b is not in the listed schema: %s", got)
	}
	s.AddTool(&mcp.Tool{Name: "evolving", InputSchema: json.RawMessage(`{"type":"object","properties":{"b":{"type":"integer"}}}`)}, handler)
	start := time.Now()
	if got := call(); got != "refused" && time.Since(start) < 900*time.Millisecond {
		t.Errorf("within the list's freshness: %s; want the list learned before used", got)
	}
	time.Sleep(1100 * time.Millisecond)
	if got := call(); got != "ran" {
		t.Errorf("after the list went stale: %s; want the new schema fetched and the call passed", got)
	}
	evs := e.waitEventsWhere(t, func(evs []sink.Event) bool { return countTool(evs, "evolving") == 3 })
	fetches := 0
	for _, ev := range evs {
		if ev.RPCMethod == "tools/list" && ev.RPCID == `"toolgate-list-0"` {
			fetches++
		}
	}
	if fetches != 2 {
		t.Errorf("toolgate listed the tools %d times, want 2 (first call, then after the list went stale)", fetches)
	}
}
