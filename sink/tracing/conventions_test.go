package tracing_test

import (
	"context"
	"strings"
	"testing"
	"time"

	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/toolgate/toolgate/internal/otlptest"
	"github.com/toolgate/toolgate/sink"
	"github.com/toolgate/toolgate/sink/tracing"
)

// TestConventionNames: the span's name and the conventions' attributes
// come from what toolgate knows, never from the caller's own text: an
// unlisted tool, a method MCP or HTTP does not name, a protocol version
// not of the protocol's form. A JSON-RPC error sets ERROR, error.type and
// rpc.response.status_code to its code; a string id loses its quote
// marks; a null id and a notification have none; a description is cut to
// 256 bytes at a character's end.
func TestConventionNames(t *testing.T) {
	rcv := otlptest.Start(t)
	e := start(t, tracing.Config{Endpoint: rcv.URL()})
	mcpEv := func(method, id string) *sink.Event {
		return &sink.Event{Time: time.Now(), Listener: "forward", Method: "POST", Host: "127.0.0.1:3000", MCPServer: "127.0.0.1:3000/mcp",
			RPCMethod: method, RPCID: id, MCPProtocol: "2025-11-25", UpstreamStatus: 200, OK: true, TotalUS: 10}
	}
	long := strings.Repeat("é", 200) // 400 bytes
	tests := []struct {
		name   string
		ev     *sink.Event
		f      sink.SpanFacts
		span   string
		attrs  map[string]any // nil value: absent
		status string         // "" for unset
	}{
		{name: "listed tool", ev: mcpEv("tools/call", `"call-7"`), f: sink.SpanFacts{KnownTool: "lookup", ToolDescription: long, HTTPVersion: "1.1"},
			span: "tools/call lookup", attrs: map[string]any{"gen_ai.tool.name": "lookup", "jsonrpc.request.id": "call-7", "mcp.method.name": "tools/call",
				"gen_ai.tool.description": strings.Repeat("é", 128), "network.protocol.version": "1.1", "network.transport": "tcp", "network.protocol.name": "http"}},
		{name: "unlisted tool", ev: func() *sink.Event { ev := mcpEv("tools/call", "7"); ev.Tool = "MADE-UP"; return ev }(),
			span: "tools/call", attrs: map[string]any{"gen_ai.tool.name": nil, "gen_ai.operation.name": "execute_tool", "jsonrpc.request.id": "7"}},
		{name: "rpc error", ev: mcpEv("prompts/get", `"p\"1"`), f: sink.SpanFacts{RPCError: true, RPCErrorCode: -32602},
			span: "prompts/get", attrs: map[string]any{"error.type": "-32602", "rpc.response.status_code": "-32602", "jsonrpc.request.id": `p"1`, "gen_ai.operation.name": nil},
			status: "JSON-RPC error -32602: Invalid params"},
		{name: "unnamed method", ev: mcpEv("MADE-UP/method", "null"), span: "_OTHER",
			attrs: map[string]any{"mcp.method.name": "_OTHER", "jsonrpc.request.id": nil}},
		{name: "notification", ev: mcpEv("notifications/initialized", ""), span: "notifications/initialized",
			attrs: map[string]any{"jsonrpc.request.id": nil, "rpc.response.status_code": nil, "error.type": nil}},
		{name: "odd protocol version", ev: func() *sink.Event { ev := mcpEv("ping", "1"); ev.MCPProtocol = "MADE-UP-1"; return ev }(),
			span: "ping", attrs: map[string]any{"mcp.protocol.version": nil}},
		{name: "plain tool", ev: event("search", ""), f: sink.SpanFacts{KnownTool: "search", HTTPVersion: "2"}, span: "execute_tool search",
			attrs: map[string]any{"network.protocol.version": "2", "network.transport": nil, "mcp.method.name": nil}},
		{name: "no tool, odd method", ev: &sink.Event{Time: time.Now(), Method: "MADEUP", Host: "x.example", OK: true}, span: "_OTHER",
			attrs: map[string]any{"http.request.method": "_OTHER", "gen_ai.operation.name": nil}},
	}
	for i, tc := range tests {
		tc.ev.EventID = tc.name
		tc.ev.TraceID = strings.Repeat("7", 30) + string(rune('a'+i/10)) + string(rune('0'+i%10))
		e.TraceCall(tc.ev, tc.f)
	}
	if err := e.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	byEvent := map[any]otlptest.Span{}
	for _, s := range rcv.Spans() {
		byEvent[s.Attrs["toolgate.event_id"]] = s
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, ok := byEvent[tc.name]
			if !ok {
				t.Fatal("no span")
			}
			if s.Name != tc.span {
				t.Errorf("span %q, want %q", s.Name, tc.span)
			}
			for k, want := range tc.attrs {
				got, ok := s.Attrs[k]
				if want == nil && ok {
					t.Errorf("%s = %#v, want none", k, got)
				} else if want != nil && got != want {
					t.Errorf("%s = %#v, want %#v", k, got, want)
				}
			}
			if err := s.StatusCode == tracepb.Status_STATUS_CODE_ERROR; err != (tc.status != "") || s.StatusMsg != tc.status {
				t.Errorf("status %v %q, want %q", s.StatusCode, s.StatusMsg, tc.status)
			}
			for _, raw := range rcv.Raw() {
				if strings.Contains(string(raw), "MADE-UP") || strings.Contains(string(raw), "MADEUP") {
					t.Fatalf("an export holds the caller's made-up name")
				}
			}
		})
	}
}
