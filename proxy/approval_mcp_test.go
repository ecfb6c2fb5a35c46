package proxy_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/policies/approval"
	"github.com/toolgate/toolgate/policies/approval/audit"
	"github.com/toolgate/toolgate/proxy"
)

// TestApprovalMCPDestructive checks approvals on an MCP route: a
// tools/call of a tool the server annotates destructiveHint: true
// (approvals.tools: require destructive) gets the isError result with the
// envelope (approval_pending, the approval URL) and never reaches the
// server; a read-only tool passes; once approved, the same call goes
// through once.
func TestApprovalMCPDestructive(t *testing.T) {
	yes := true
	var charged atomic.Int64
	s := mcp.NewServer(&mcp.Implementation{Name: "payments", Version: "1.0.0"}, nil)
	ok := func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}}, nil
	}
	s.AddTool(&mcp.Tool{Name: "charge", InputSchema: json.RawMessage(`{"type":"object","properties":{"amount":{"type":"integer"}}}`),
		Annotations: &mcp.ToolAnnotations{DestructiveHint: &yes}}, func(ctx context.Context, r *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		charged.Add(1)
		return ok(ctx, r)
	})
	s.AddTool(&mcp.Tool{Name: "balance", InputSchema: json.RawMessage(`{"type":"object"}`),
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}}, ok)
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
	up := httptest.NewServer(h)
	t.Cleanup(up.Close)

	cfg := approval.Config{URL: "http://127.0.0.1:18091/approvals", Tools: map[string]approval.ToolRule{"charge": {Require: approval.RequireDestructive}}}
	e, gate := newApprovalEnvConfig(t, cfg, true, strings.ReplaceAll(mcpConfig, "MCPUP", up.URL), map[string]proxy.Checker{})
	proxyURL := &url.URL{Scheme: "http", Host: e.srv.Addr("forward", 0)}
	cs := connect(t, up.URL+"/mcp", &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(proxyURL)}}, "2025-11-25", nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "balance", Arguments: map[string]any{}}); err != nil || res.IsError {
		t.Fatalf("read-only tool: %v %+v", err, res)
	}
	charge := &mcp.CallToolParams{Name: "charge", Arguments: map[string]any{"amount": 250}}
	res, err := cs.CallTool(ctx, charge)
	if err != nil || !res.IsError {
		t.Fatalf("destructive tool: %v %+v", err, res)
	}
	b, _ := json.Marshal(res.StructuredContent)
	var env struct {
		Error struct {
			Reason   string `json:"reason"`
			Approval struct {
				ID  string `json:"id"`
				URL string `json:"url"`
			} `json:"approval"`
		} `json:"error"`
	}
	if err := json.Unmarshal(b, &env); err != nil || env.Error.Reason != "approval_pending" ||
		!strings.Contains(env.Error.Approval.URL, "id="+env.Error.Approval.ID) {
		t.Fatalf("structuredContent %s", b)
	}
	if charged.Load() != 0 {
		t.Fatal("the server was charged before approval")
	}
	if _, err := gate.Decide(ctx, env.Error.Approval.ID, audit.VerdictApproved, "dana", ""); err != nil {
		t.Fatal(err)
	}
	if res, err := cs.CallTool(ctx, charge); err != nil || res.IsError {
		t.Fatalf("approved call: %v %+v", err, res)
	}
	if res, err := cs.CallTool(ctx, charge); err != nil || !res.IsError {
		t.Fatalf("the grant was used twice: %v %+v", err, res)
	}
	if n := charged.Load(); n != 1 {
		t.Fatalf("charged %d times, want 1", n)
	}
}
