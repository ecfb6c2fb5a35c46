package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/internal/chtest"
)

// approvalMCPConfig is a sidecar with an MCP route whose destructive tools
// need approval, asked in-band of 2026-07-28 clients; STORE is replaced by
// the events section, MCPHOST by the server's host.
const approvalMCPConfig = `
listen: {forward: 127.0.0.1:0}
admin: {listen: off}
tools:
  - name: payments
    protocol: mcp
    match: {host: 127.0.0.1, path: /mcp}
STORE
approvals:
  url: http://127.0.0.1:18091/approvals
  state_key_env: TG_TEST_APPROVAL_STATE_KEY
  tools:
    charge: {require: destructive}
`

// mcpCallVia sends one 2026-07-28 tools/call of charge, declaring URL-mode
// elicitation, through a sidecar's forward listener, with extra params,
// and returns the JSON-RPC result.
func mcpCallVia(t *testing.T, forward, endpoint string, extra map[string]any) map[string]json.RawMessage {
	t.Helper()
	params := map[string]any{"name": "charge", "arguments": map[string]any{"amount": 250}, "_meta": map[string]any{
		"io.modelcontextprotocol/protocolVersion":    "2026-07-28",
		"io.modelcontextprotocol/clientInfo":         map[string]any{"name": "agent", "version": "1"},
		"io.modelcontextprotocol/clientCapabilities": map[string]any{"elicitation": map[string]any{"url": map[string]any{}}},
	}}
	for k, v := range extra {
		params[k] = v
	}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params})
	req, _ := http.NewRequest(http.MethodPost, endpoint, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "tools/call")
	req.Header.Set("Mcp-Name", "charge")
	client := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(&url.URL{Scheme: "http", Host: forward})}, Timeout: 30 * time.Second}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if i := bytes.Index(b, []byte("data: ")); i >= 0 {
		b = b[i+6:]
		b = b[:bytes.IndexByte(b, '\n')]
	}
	var m struct {
		Result map[string]json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal(b, &m); err != nil || m.Result == nil {
		t.Fatalf("status %d, answer %s", resp.StatusCode, b)
	}
	return m.Result
}

// TestApprovalsMCPInBandTwoSidecars runs two real sidecars (`toolgate
// run`) sharing one real ClickHouse and one approvals.state_key_env, in
// front of a real MCP server: a destructive tools/call through the first
// is asked in-band (input_required, a URL-mode elicitation, toolgate's
// requestState); `toolgate approvals approve` decides it; the client's
// retry with the state through the second sidecar goes to the server
// once, without toolgate's state; the same retry again asks anew.
func TestApprovalsMCPInBandTwoSidecars(t *testing.T) {
	t.Setenv("TG_TEST_APPROVAL_STATE_KEY", strings.Repeat("q", 32))
	ch := chtest.Shared(t)
	db := ch.Database(t)
	yes := true
	var mu sync.Mutex
	var got []string
	s := mcp.NewServer(&mcp.Implementation{Name: "payments", Version: "1.0.0"}, nil)
	s.AddTool(&mcp.Tool{Name: "charge", InputSchema: json.RawMessage(`{"type":"object","properties":{"amount":{"type":"integer"}}}`),
		Annotations: &mcp.ToolAnnotations{DestructiveHint: &yes}}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "charged"}}}, nil
	})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{Stateless: true})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if bytes.Contains(b, []byte(`"tools/call"`)) {
			mu.Lock()
			got = append(got, string(b))
			mu.Unlock()
		}
		r.Body = io.NopCloser(bytes.NewReader(b))
		h.ServeHTTP(w, r)
	}))
	defer up.Close()
	calls := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), got...)
	}

	store := `events:
  queue: {flush_interval: 20ms}
  spool: {segment_age: 20ms, retry_min: 50ms, retry_max: 200ms}
  clickhouse: {addr: [` + ch.Addr() + `], database: ` + db + `}`
	cfg := strings.Replace(approvalMCPConfig, "STORE", store, 1)
	dirA, dirB := t.TempDir(), t.TempDir()
	a, b := startRun(t, dirA, cfg), startRun(t, dirB, cfg)
	la, lb := a.running(t), b.running(t)
	endpoint := up.URL + "/mcp"

	res := mcpCallVia(t, la.Forward, endpoint, nil)
	var rt, state string
	_ = json.Unmarshal(res["resultType"], &rt)
	_ = json.Unmarshal(res["requestState"], &state)
	var ir map[string]struct {
		Params struct {
			Mode, URL string
		} `json:"params"`
	}
	_ = json.Unmarshal(res["inputRequests"], &ir)
	ask := ir["toolgate.approval"].Params
	u, _ := url.Parse(ask.URL)
	id := u.Query().Get("id")
	if rt != "input_required" || ask.Mode != "url" || id == "" || !strings.HasPrefix(state, "toolgate-approval.v1.") {
		t.Fatalf("first call through sidecar A: %v", res)
	}
	if code, out := approvalsCmd(t, filepath.Join(dirA, "toolgate.yaml"), "approve", id, "--as", "dana"); code != 0 {
		t.Fatalf("approve exit %d: %s", code, out)
	}
	retry := map[string]any{"requestState": state, "inputResponses": map[string]any{"toolgate.approval": map[string]any{"action": "accept"}}}
	res = mcpCallVia(t, lb.Forward, endpoint, retry)
	if strings.Contains(string(res["isError"]), "true") || !strings.Contains(string(res["content"]), "charged") {
		t.Fatalf("the approved retry through sidecar B: %s", res["content"])
	}
	if c := calls(); len(c) != 1 || strings.Contains(c[0], "toolgate") || strings.Contains(c[0], "requestState") {
		t.Fatalf("the server got %q, want one call without toolgate's state", c)
	}
	res = mcpCallVia(t, la.Forward, endpoint, retry)
	_ = json.Unmarshal(res["resultType"], &rt)
	if rt != "input_required" || len(calls()) != 1 {
		t.Fatalf("the same state again: %v (the server got %d calls)", res, len(calls()))
	}
	for _, r := range []*sidecarRun{a, b} {
		if code := r.stop(t); code != 0 {
			t.Fatalf("run exited %d; stderr:\n%s", code, r.stderr)
		}
	}
}
