package sidecar

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/internal/proxytest"
	"github.com/toolgate/toolgate/proxy"
	"github.com/toolgate/toolgate/proxy/mcppin"
)

// TestPinEndpoints drives GET /mcp/pins/changes and POST /mcp/pins/accept
// over a real change: an SDK server lists pay through a sidecar's proxy,
// then re-lists it without its bound. The change is listed; a digest the
// server has moved past is 409; the listed digest is accepted (200); once
// accepted there is nothing to accept (404); a body that is not the
// documented object is 400.
func TestPinEndpoints(t *testing.T) {
	s := mcp.NewServer(&mcp.Implementation{Name: "payments", Version: "1.0.0"}, nil)
	add := func(schema string) {
		s.AddTool(&mcp.Tool{Name: "pay", InputSchema: json.RawMessage(schema)},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "paid"}}}, nil
			})
	}
	add(`{"type":"object","properties":{"amount":{"type":"integer","maximum":100}}}`)
	up := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true}))
	defer up.Close()

	dir := t.TempDir()
	doc := fmt.Sprintf("listen:\n  forward: \"off\"\n  reverse:\n    - {listen: \"127.0.0.1:0\", upstream: %q}\ntools:\n  - name: payments\n    protocol: mcp\n    match: {host: 127.0.0.1, path: /mcp}\n", up.URL)
	ps := proxytest.Start(t, doc, dir, proxy.Options{})

	list := func() {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, "http://"+ps.Addr("reverse", 0)+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("MCP-Protocol-Version", "2025-11-25")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var b json.RawMessage
		json.NewDecoder(resp.Body).Decode(&b)
		resp.Body.Close()
	}
	sc := &Sidecar{log: slog.New(slog.DiscardHandler), proxy: ps}
	changes := func() []mcppin.Verdict {
		t.Helper()
		w := httptest.NewRecorder()
		sc.servePinChanges(w, httptest.NewRequest(http.MethodGet, "/mcp/pins/changes", nil))
		var out struct{ Changes []mcppin.Verdict }
		if err := json.Unmarshal(w.Body.Bytes(), &out); err != nil || w.Code != 200 {
			t.Fatalf("GET /mcp/pins/changes: %d %s", w.Code, w.Body)
		}
		return out.Changes
	}
	accept := func(body string) int {
		w := httptest.NewRecorder()
		sc.servePinAccept(w, httptest.NewRequest(http.MethodPost, "/mcp/pins/accept", strings.NewReader(body)))
		return w.Code
	}
	list()
	if c := changes(); len(c) != 0 {
		t.Fatalf("changes before any change: %+v", c)
	}
	add(`{"type":"object","properties":{"amount":{"type":"integer","maximum":1000}}}`)
	list()
	first := changes()
	if len(first) != 1 || first[0].Tool != "pay" || first[0].State != mcppin.StateChanged {
		t.Fatalf("changes: %+v; want pay changed", first)
	}
	add(`{"type":"object","properties":{"amount":{"type":"integer"}}}`)
	list()
	body := func(v mcppin.Verdict) string {
		b, _ := json.Marshal(map[string]string{"route": v.Route, "server": v.Server, "tool": v.Tool, "digest": v.Listed.Digest})
		return string(b)
	}
	if st := accept(body(first[0])); st != http.StatusConflict {
		t.Errorf("accept with the digest the server moved past: %d, want 409", st)
	}
	now := changes()
	if st := accept(body(now[0])); st != http.StatusOK {
		t.Errorf("accept with the listed digest: %d, want 200", st)
	}
	if st := accept(body(now[0])); st != http.StatusNotFound {
		t.Errorf("accept again: %d, want 404", st)
	}
	for _, bad := range []string{`{}`, `{"route":"payments","server":"x","tool":"pay","digest":"","extra":1}`, `not json`, `{"route":"a","server":"b","tool":"c"} {}`} {
		if st := accept(bad); st != http.StatusBadRequest {
			t.Errorf("accept %s: %d, want 400", bad, st)
		}
	}
	if c := changes(); len(c) != 0 {
		t.Errorf("changes after the accept: %+v", c)
	}
}
