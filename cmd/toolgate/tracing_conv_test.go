package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/toolgate/toolgate/internal/otlptest"
)

// The conventions' attributes, checked span by span: the MCP client span
// (gen-ai/mcp.md, span.mcp.client: mcp.method.name required, error.type,
// jsonrpc.request.id, gen_ai.tool.name and rpc.response.status_code
// conditionally required, the network.*, server.* and mcp.protocol.version
// attributes recommended), the GenAI execute_tool span (gen_ai.operation.name
// and gen_ai.tool.name required, error.type conditionally required) and the
// HTTP client span's (http.request.method, server.address, server.port
// required; http.response.status_code and error.type conditionally
// required; network.protocol.version recommended). url.full is left out on
// purpose (docs/tracing.md, "Departures from the conventions").

// mcpWant is what one MCP span must say.
type mcpWant struct {
	method string // mcp.method.name
	tool   string // gen_ai.tool.name; "" when the span must not name one
	id     string // jsonrpc.request.id; "" for a notification
	// rpcErr is the JSON-RPC error code the caller got from the server
	// (checked against rpc.response.status_code and error.type); "" when
	// none.
	rpcErr string
	// errType is error.type for a failure that is not a JSON-RPC error
	// ("" when the call did not fail).
	errType  string
	answered bool // upstream answered: http.response.status_code and network.protocol.version
	desc     string
}

// checkMCPSpan checks one span against the MCP client span's required and
// recommended attributes.
func checkMCPSpan(t *testing.T, label string, s otlptest.Span, w mcpWant, era, port string) {
	t.Helper()
	bad := func(format string, args ...any) { t.Errorf(label+": "+format, args...) }
	a := s.Attrs
	name := w.method
	if w.tool != "" {
		name += " " + w.tool
	}
	if s.Name != name || s.Kind != tracepb.Span_SPAN_KIND_CLIENT {
		bad("span %q kind %v, want %q CLIENT", s.Name, s.Kind, name)
	}
	if a["mcp.method.name"] != w.method {
		bad("mcp.method.name = %v, want %q (required)", a["mcp.method.name"], w.method)
	}
	if w.tool != "" {
		if a["gen_ai.tool.name"] != w.tool {
			bad("gen_ai.tool.name = %v, want %q", a["gen_ai.tool.name"], w.tool)
		}
	} else if v, ok := a["gen_ai.tool.name"]; ok {
		bad("gen_ai.tool.name = %v, want none (the caller's text)", v)
	}
	if op, ok := a["gen_ai.operation.name"]; (w.method == "tools/call") != ok || (ok && op != "execute_tool") {
		bad("gen_ai.operation.name = %v (set %v), want execute_tool exactly on tools/call", op, ok)
	}
	if w.id != "" {
		if a["jsonrpc.request.id"] != w.id {
			bad("jsonrpc.request.id = %#v, want %q (no quote marks)", a["jsonrpc.request.id"], w.id)
		}
	} else if v, ok := a["jsonrpc.request.id"]; ok {
		bad("jsonrpc.request.id = %v on a notification", v)
	}
	failed := s.StatusCode == tracepb.Status_STATUS_CODE_ERROR
	et, hasET := a["error.type"]
	if failed != hasET || failed != (w.rpcErr != "" || w.errType != "") {
		bad("status %v, error.type %v: want error.type exactly when the span is ERROR, and ERROR = %v", s.StatusCode, et, w.rpcErr != "" || w.errType != "")
	}
	switch rc, hasRC := a["rpc.response.status_code"]; {
	case w.rpcErr != "" && (rc != w.rpcErr || et != w.rpcErr):
		bad("rpc.response.status_code %v, error.type %v, want both %q (the JSON-RPC error's code)", rc, et, w.rpcErr)
	case w.rpcErr != "" && !strings.HasPrefix(s.StatusMsg, "JSON-RPC error "+w.rpcErr):
		bad("status description %q, want the JSON-RPC error %s", s.StatusMsg, w.rpcErr)
	case w.rpcErr == "" && hasRC:
		bad("rpc.response.status_code = %v without a JSON-RPC error", rc)
	case w.errType != "" && et != w.errType:
		bad("error.type = %v, want %q", et, w.errType)
	}
	if a["mcp.protocol.version"] != era {
		bad("mcp.protocol.version = %v, want %s", a["mcp.protocol.version"], era)
	}
	if a["network.transport"] != "tcp" || a["network.protocol.name"] != "http" {
		bad("network.transport %v, network.protocol.name %v, want tcp, http", a["network.transport"], a["network.protocol.name"])
	}
	if v, ok := a["network.protocol.version"]; ok != w.answered || (ok && v != "1.1") {
		bad("network.protocol.version = %v (set %v), want 1.1 when upstream answered (%v)", v, ok, w.answered)
	}
	if _, ok := a["http.response.status_code"]; ok != w.answered {
		bad("http.response.status_code set %v, want %v", ok, w.answered)
	}
	if a["server.address"] != "127.0.0.1" || fmt.Sprint(a["server.port"]) != port {
		bad("server.address %v server.port %v, want 127.0.0.1 %s", a["server.address"], a["server.port"], port)
	}
	if d, ok := a["gen_ai.tool.description"]; w.desc != "" && d != w.desc {
		bad("gen_ai.tool.description = %v, want %q", d, w.desc)
	} else if w.desc == "" && ok {
		if ds, _ := d.(string); len(ds) > 256 {
			bad("gen_ai.tool.description is %d bytes, more than 256", len(ds))
		}
	}
	for _, k := range []string{"mcp.session.id", "url.full", "toolgate.violation_paths", "gen_ai.tool.call.arguments"} {
		if v, ok := a[k]; ok {
			bad("%s = %v, want it left out", k, v)
		}
	}
}

// checkRESTSpan checks a plain HTTP tool's span against the GenAI
// execute_tool span's and the HTTP client span's required and recommended
// attributes.
func checkRESTSpan(t *testing.T, label string, s otlptest.Span) {
	t.Helper()
	a := s.Attrs
	bad := func(format string, args ...any) { t.Errorf(label+": "+format, args...) }
	tool, _ := a["gen_ai.tool.name"].(string)
	if tool == "" || a["gen_ai.operation.name"] != "execute_tool" || s.Name != "execute_tool "+tool {
		bad("span %q, gen_ai.operation.name %v, gen_ai.tool.name %q: want execute_tool and the tool (required)", s.Name, a["gen_ai.operation.name"], tool)
	}
	if a["http.request.method"] != "GET" || a["server.address"] != "127.0.0.1" || a["server.port"] == nil {
		bad("http.request.method %v, server.address %v, server.port %v: required", a["http.request.method"], a["server.address"], a["server.port"])
	}
	failed := s.StatusCode == tracepb.Status_STATUS_CODE_ERROR
	if _, ok := a["error.type"]; ok != failed {
		bad("error.type set %v, status %v: want error.type exactly when ERROR", ok, s.StatusCode)
	}
	_, answered := a["http.response.status_code"]
	if v, ok := a["network.protocol.version"]; ok != answered || (ok && v != "1.1") {
		bad("network.protocol.version = %v (set %v), want 1.1 when upstream answered (%v)", v, ok, answered)
	}
	for _, k := range []string{"url.full", "mcp.method.name", "toolgate.violation_paths"} {
		if v, ok := a[k]; ok {
			bad("%s = %v, want it left out", k, v)
		}
	}
}

// rpcClient speaks JSON-RPC to an MCP server through the sidecar's forward
// proxy, as a client of one protocol era: 2025-11-25 (initialize, then
// Mcp-Session-Id on every request) or 2026-07-28 (no session; the version
// in every request's _meta and headers).
type rpcClient struct {
	t       *testing.T
	hc      *http.Client
	base    string // the server's URL, without a path
	era     string
	session string
}

// call sends one message (a notification when id is nil) with the
// caller's traceparent in its _meta, and returns the JSON-RPC answer (nil
// for a notification, and for a request refused with an HTTP error and no
// JSON-RPC answer).
func (c *rpcClient) call(path string, id any, method string, params map[string]any, traceparent string) map[string]json.RawMessage {
	c.t.Helper()
	if params == nil {
		params = map[string]any{}
	}
	meta := map[string]any{"traceparent": traceparent}
	if c.era == "2026-07-28" {
		meta["io.modelcontextprotocol/protocolVersion"] = c.era
		meta["io.modelcontextprotocol/clientInfo"] = map[string]any{"name": "agent", "version": "1"}
		meta["io.modelcontextprotocol/clientCapabilities"] = map[string]any{}
	}
	params["_meta"] = meta
	msg := map[string]any{"jsonrpc": "2.0", "method": method, "params": params}
	if id != nil {
		msg["id"] = id
	}
	body, _ := json.Marshal(msg)
	req, _ := http.NewRequest(http.MethodPost, c.base+path, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if c.era == "2026-07-28" {
		req.Header.Set("MCP-Protocol-Version", c.era)
		req.Header.Set("Mcp-Method", method)
		if name, ok := params["name"].(string); ok {
			req.Header.Set("Mcp-Name", name)
		}
	} else if c.session != "" {
		req.Header.Set("MCP-Protocol-Version", c.era)
		req.Header.Set("Mcp-Session-Id", c.session)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		c.t.Fatalf("%s: %v", method, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if s := resp.Header.Get("Mcp-Session-Id"); s != "" {
		c.session = s
	}
	if id == nil {
		if resp.StatusCode/100 != 2 {
			c.t.Fatalf("%s: status %d %s", method, resp.StatusCode, b)
		}
		return nil
	}
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimPrefix(strings.TrimSpace(line), "data: ")
		var m map[string]json.RawMessage
		if json.Unmarshal([]byte(line), &m) == nil && m["id"] != nil {
			return m
		}
	}
	if resp.StatusCode/100 == 2 {
		c.t.Fatalf("%s: status %d, no JSON-RPC answer in %s", method, resp.StatusCode, b)
	}
	return nil // refused at the HTTP level
}

// rpcErrCode is the JSON-RPC error code of an answer, "" when it is a
// result.
func rpcErrCode(m map[string]json.RawMessage) string {
	var e struct {
		Code *int64 `json:"code"`
	}
	if json.Unmarshal(m["error"], &e) != nil || e.Code == nil {
		return ""
	}
	return strconv.FormatInt(*e.Code, 10)
}

// TestTracingConventions runs `toolgate run` with tracing to a real OTLP
// receiver (the SDK's OTLP/HTTP exporter, as in production) in front of a
// real MCP server (the Go SDK's), in both protocol eras, and checks every
// span against the MCP client span's required and recommended attributes:
// results, refusals, a tool error, JSON-RPC errors answering a tools/call
// and other methods, a tool name the server never listed (which names no
// span), a method MCP does not name, string and number ids. A caller
// whose trace is not sampled gets no span, and toolgate's own tools/list
// carries its traceparent unchanged (not sampled). No argument value, key
// name or session id is in any export.
func TestTracingConventions(t *testing.T) {
	t.Parallel()
	for _, era := range []string{"2025-11-25", "2026-07-28"} {
		t.Run(era, func(t *testing.T) {
			t.Parallel()
			testTracingConventions(t, era)
		})
	}
}

func testTracingConventions(t *testing.T, era string) {
	rcv := otlptest.Start(t)
	const lookupDesc = "Look up a record by its query"
	s := mcp.NewServer(&mcp.Implementation{Name: "records", Version: "1.0.0"}, nil)
	s.AddTool(&mcp.Tool{Name: "lookup", Description: lookupDesc,
		InputSchema: json.RawMessage(`{"type":"object","properties":{"query":{"type":"string"}},"required":["query"]}`)},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "found"}}}, nil
		})
	s.AddTool(&mcp.Tool{Name: "broken", Description: strings.Repeat("A very long description. ", 30), InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "backend down"}}}, nil
		})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{Stateless: era == "2026-07-28"})
	var mu sync.Mutex
	var lists []string // toolgate's own tools/list: its traceparent header | its body
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(b))
		if bytes.Contains(b, []byte(`"toolgate-list-0"`)) {
			mu.Lock()
			lists = append(lists, r.Header.Get("Traceparent")+"|"+string(b))
			mu.Unlock()
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(up.Close)
	port := up.URL[strings.LastIndex(up.URL, ":")+1:]

	cfg := strings.NewReplacer("COLLECTOR", rcv.URL()).Replace(`listen:
  forward: 127.0.0.1:0
admin:
  listen: "off"
events:
  file: {path: events.ndjson}
tools:
  - name: records
    protocol: mcp
    match: {host: 127.0.0.1, path: /mcp}
  - name: records_open
    protocol: mcp
    match: {host: 127.0.0.1, path: /open}
    mcp: {unknown_tool: pass}
tracing:
  endpoint: COLLECTOR
  batch_timeout: 50ms
`)
	r := startRun(t, t.TempDir(), cfg)
	l := r.running(t)
	c := &rpcClient{t: t, hc: proxyClient(t, l.Forward), base: up.URL, era: era}

	const trace = "7af7651916cd43dd8448eb211c80319c"
	sent := map[string]bool{} // every traceparent a caller sent
	tp := func(span int, flags string) string {
		v := fmt.Sprintf("00-%s-%016x-%s", trace, 0x1000+span, flags)
		sent[v] = true
		return v
	}
	parent := func(span int) string { return fmt.Sprintf("%016x", 0x1000+span) }
	wants := map[string]mcpWant{} // parent span id -> what its span says
	labels := map[string]string{}
	expect := func(span int, label string, w mcpWant) { wants[parent(span)], labels[parent(span)] = w, label }

	if era == "2025-11-25" {
		init := c.call("/mcp", 1, "initialize", map[string]any{"protocolVersion": era, "capabilities": map[string]any{},
			"clientInfo": map[string]any{"name": "agent", "version": "1"}}, tp(1, "01"))
		if init["result"] == nil || c.session == "" {
			t.Fatalf("initialize: %s (session %q)", init["error"], c.session)
		}
		expect(1, "initialize", mcpWant{method: "initialize", id: "1", answered: true})
		c.call("/mcp", nil, "notifications/initialized", nil, tp(2, "01"))
		expect(2, "notifications/initialized", mcpWant{method: "notifications/initialized", answered: true})
	}

	// An unsampled caller first: nothing is listed yet, so toolgate lists
	// the server's tools itself, under the caller's traceparent.
	unsampled := tp(3, "00")
	if a := c.call("/mcp", "call-unsampled", "tools/call", map[string]any{"name": "lookup", "arguments": map[string]any{"query": "ARGVAL-unsampled"}}, unsampled); a["result"] == nil {
		t.Fatalf("unsampled lookup: %s", a["error"])
	}
	if a := c.call("/mcp", "list-1", "tools/list", nil, tp(4, "01")); a["result"] == nil {
		t.Fatalf("tools/list: %s", a["error"])
	}
	expect(4, "tools/list", mcpWant{method: "tools/list", id: "list-1", answered: true})
	if a := c.call("/mcp", "call-7", "tools/call", map[string]any{"name": "lookup", "arguments": map[string]any{"query": "ARGVAL-ok"}}, tp(5, "01")); a["result"] == nil {
		t.Fatalf("lookup: %s", a["error"])
	}
	expect(5, "lookup", mcpWant{method: "tools/call", tool: "lookup", id: "call-7", answered: true, desc: lookupDesc})
	c.call("/mcp", 8, "tools/call", map[string]any{"name": "lookup", "arguments": map[string]any{"query": "q", "ARGKEY_smuggled": "ARGVAL-key"}}, tp(6, "01"))
	expect(6, "schema refusal", mcpWant{method: "tools/call", tool: "lookup", id: "8", errType: "unknown_field", desc: lookupDesc})
	c.call("/mcp", "call-9", "tools/call", map[string]any{"name": "broken", "arguments": map[string]any{"x": "ARGVAL-broken"}}, tp(7, "01"))
	expect(7, "tool error", mcpWant{method: "tools/call", tool: "broken", id: "call-9", errType: "tool_error", answered: true})
	// A tool the server never listed: refused here, a JSON-RPC error from
	// the server on the route that lets unknown tools pass.
	c.call("/mcp", "call-10", "tools/call", map[string]any{"name": "ARGVAL-made-up-tool", "arguments": map[string]any{}}, tp(8, "01"))
	expect(8, "unknown tool refused", mcpWant{method: "tools/call", id: "call-10", errType: "unknown_tool"})
	a := c.call("/open", "call-11", "tools/call", map[string]any{"name": "ARGVAL-made-up-tool", "arguments": map[string]any{}}, tp(9, "01"))
	code := rpcErrCode(a)
	if code == "" {
		t.Fatalf("an unknown tool on the open route: no JSON-RPC error: %v", a)
	}
	expect(9, "unknown tool, JSON-RPC error", mcpWant{method: "tools/call", id: "call-11", rpcErr: code, answered: true})
	a = c.call("/mcp", "p-12", "prompts/get", map[string]any{"name": "ARGVAL-prompt", "arguments": map[string]any{"topic": "ARGVAL-topic"}}, tp(10, "01"))
	if code = rpcErrCode(a); code == "" {
		t.Fatalf("prompts/get of no prompt: no JSON-RPC error: %v", a)
	}
	expect(10, "prompts/get, JSON-RPC error", mcpWant{method: "prompts/get", id: "p-12", rpcErr: code, answered: true})
	// The SDK answers a method it does not know with a JSON-RPC error
	// (2026-07-28), or HTTP 400 and no JSON-RPC answer (in a session).
	unnamed := mcpWant{method: "_OTHER", id: "13", errType: "status_4xx", answered: true}
	if a = c.call("/mcp", 13, "ARGVAL/method", map[string]any{}, tp(11, "01")); a != nil {
		if unnamed.rpcErr, unnamed.errType = rpcErrCode(a), ""; unnamed.rpcErr == "" {
			t.Fatalf("a method MCP does not name: %v, want a JSON-RPC error", a)
		}
	}
	expect(11, "an unnamed method", unnamed)

	if code := r.stop(t); code != 0 {
		t.Fatalf("run exited %d; stderr:\n%s", code, r.stderr)
	}
	spans := rcv.Spans()
	byParent := map[string]otlptest.Span{}
	for _, s := range spans {
		if s.TraceID != trace {
			t.Errorf("span %q in trace %s, want the caller's %s", s.Name, s.TraceID, trace)
		}
		if _, dup := byParent[s.ParentSpanID]; dup {
			t.Errorf("two spans under parent %s", s.ParentSpanID)
		}
		byParent[s.ParentSpanID] = s
	}
	if len(spans) != len(wants) {
		t.Errorf("got %d spans %v, want %d (one per sampled call, none for the unsampled one)", len(spans), spanNames(spans), len(wants))
	}
	for p, w := range wants {
		s, ok := byParent[p]
		if !ok {
			t.Errorf("%s: no span under the caller's span %s; spans %v", labels[p], p, spanNames(spans))
			continue
		}
		checkMCPSpan(t, labels[p], s, w, era, port)
	}
	if d, _ := byParent[parent(7)].Attrs["gen_ai.tool.description"].(string); !strings.HasPrefix(d, "A very long description.") || len(d) > 256 {
		t.Errorf("broken's description on the span: %d bytes %q, want its first 256 at most", len(d), d)
	}
	if _, ok := byParent[parent(3)]; ok {
		t.Errorf("the unsampled caller got a span")
	}

	// toolgate's own tools/list went under the unsampled caller's
	// traceparent, unchanged: not a parent of its own making, not sampled.
	mu.Lock()
	defer mu.Unlock()
	// The first is the unsampled call's. Later ones (the unknown tool's,
	// mcp.unknown_tool: fetch; a call that finds the list past its ttlMs
	// on a slow machine) carry their caller's traceparent as well.
	if len(lists) < 2 {
		t.Fatalf("toolgate's own tools/list: seen %d times upstream, want the unsampled call's and the unknown tool's", len(lists))
	}
	for i, l := range lists {
		hdr, body, _ := strings.Cut(l, "|")
		if i == 0 && hdr != unsampled {
			t.Errorf("toolgate's first tools/list carried header %q, want the unsampled caller's %s unchanged", hdr, unsampled)
		}
		if !sent[hdr] || !strings.Contains(body, `"traceparent":"`+hdr+`"`) {
			t.Errorf("toolgate's own tools/list %d carried header %q body %s, want a caller's traceparent unchanged in both", i, hdr, body)
		}
	}

	for _, raw := range rcv.Raw() {
		for _, secret := range []string{"ARGVAL", "ARGKEY", c.session} {
			if secret == "" {
				continue
			}
			if i := strings.Index(string(raw), secret); i >= 0 {
				t.Errorf("an export holds %q: %q", secret, raw[max(0, i-40):min(len(raw), i+40)])
			}
		}
	}
}
