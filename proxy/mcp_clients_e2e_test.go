package proxy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/internal/testutil"
)

// clientCall is one tools/call clients.mjs makes, and what the client must
// return to its caller: a result (isError as want) whose text names every
// path in paths.
type clientCall struct {
	Name    string         `json:"name"`
	Tool    string         `json:"tool"`
	Args    map[string]any `json:"args"`
	isError bool
	paths   []string
}

// clientResult is one line clients.mjs printed: what the client returned
// to its caller, or the exception it raised instead.
type clientResult struct {
	Name       string `json:"name"`
	Returned   bool   `json:"returned"`
	IsError    bool   `json:"isError"`
	Text       string `json:"text"`
	Structured bool   `json:"structured"`
	Error      string `json:"error"`
	// For the task API (v1task): the task's status and statusMessage
	// (tasks/get), and the error the task stream ended with.
	TaskStatus    string `json:"taskStatus"`
	StatusMessage string `json:"statusMessage"`
	StreamError   string `json:"streamError"`
}

// npmClients skips the test, saying how to install them, unless the npm
// clients and servers of proxy/testdata/mcpts are installed.
func npmClients(t *testing.T) (node, dir string) {
	t.Helper()
	node, dir = tsSDK(t)
	for _, pkg := range []string{"@modelcontextprotocol/sdk", "@modelcontextprotocol/inspector-cli", "@modelcontextprotocol/server-everything", "@ai-sdk/mcp"} {
		if _, err := os.Stat(filepath.Join(dir, "node_modules", pkg, "package.json")); err != nil {
			testutil.Missing(t, "%s is not installed in %s/node_modules; run `bash scripts/testdeps.sh` (make test does)", pkg, dir)
		}
	}
	return node, dir
}

// runClient runs clients.mjs with one client against endpoint; client
// "go" is the Go SDK's client, run here.
func runClient(t *testing.T, client, endpoint string, calls []clientCall) map[string]clientResult {
	t.Helper()
	if client == "go" {
		return runGoClient(t, endpoint, calls)
	}
	node, dir := npmClients(t)
	raw, _ := json.Marshal(calls)
	ctx, cancel := context.WithTimeout(context.Background(), 240*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "clients.mjs", client, endpoint, string(raw))
	cmd.Dir = dir
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("clients.mjs %s: %v\nstdout:\n%s\nstderr:\n%s", client, err, out, stderr.String())
	}
	res := map[string]clientResult{}
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		var r clientResult
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("clients.mjs %s line %q: %v", client, l, err)
		}
		res[r.Name] = r
	}
	return res
}

// runGoClient makes the calls with the Go SDK's client (v1.8.0), after
// listing the tools as agents do.
func runGoClient(t *testing.T, endpoint string, calls []clientCall) map[string]clientResult {
	t.Helper()
	cs := connect(t, endpoint, &http.Client{Timeout: 30 * time.Second}, "", nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := cs.ListTools(ctx, nil); err != nil {
		t.Fatalf("go client: list: %v", err)
	}
	res := map[string]clientResult{}
	for _, c := range calls {
		r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: c.Tool, Arguments: c.Args})
		if err != nil {
			res[c.Name] = clientResult{Name: c.Name, Error: err.Error()}
			continue
		}
		res[c.Name] = clientResult{Name: c.Name, Returned: true, IsError: r.IsError, Text: resultText(r), Structured: r.StructuredContent != nil}
	}
	return res
}

// serverCounts reads how many tools/call reached each tool of a node server.
func serverCounts(t *testing.T, origin string) map[string]int {
	t.Helper()
	resp, err := http.Get(origin + "/control/counts")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	counts := map[string]int{}
	if err := json.Unmarshal(b, &counts); err != nil {
		t.Fatalf("counts %s: %v", b, err)
	}
	return counts
}

// everythingCalls are the calls made to server-everything
// (@modelcontextprotocol/server-everything 2026.8.31): get-structured-content
// declares an outputSchema and takes {location: enum}; get-tiny-image and
// toggle-subscriber-updates take no arguments (inputSchema
// {"type":"object","properties":{},"$schema":"...draft-07..."}).
var everythingCalls = []clientCall{
	{Name: "valid", Tool: "get-structured-content", Args: map[string]any{"location": "Chicago"}},
	{Name: "unknown_arg", Tool: "get-structured-content", Args: map[string]any{"location": "Chicago", "units": "c"}, isError: true, paths: []string{"/units"}},
	{Name: "missing_field", Tool: "get-structured-content", Args: map[string]any{}, isError: true, paths: []string{"/location"}},
	{Name: "wrong_type", Tool: "get-structured-content", Args: map[string]any{"location": 5}, isError: true, paths: []string{"/location"}},
	{Name: "typo", Tool: "get-structured-content", Args: map[string]any{"locaton": "Chicago"}, isError: true, paths: []string{"/locaton", "/location"}},
	{Name: "noarg_valid", Tool: "get-tiny-image", Args: map[string]any{}},
	{Name: "noarg_unknown", Tool: "get-tiny-image", Args: map[string]any{"size": "large"}, isError: true, paths: []string{"/size"}},
	{Name: "noarg_unknown2", Tool: "toggle-subscriber-updates", Args: map[string]any{"enabled": true}, isError: true, paths: []string{"/enabled"}},
}

// ticketCalls are the calls made to server.mjs's file_ticket (the TypeScript
// SDK v2 server): a nested input schema and an outputSchema.
var ticketCalls = []clientCall{
	{Name: "valid", Tool: "file_ticket", Args: map[string]any{"title": "Crash", "assignee": map[string]any{"login": "ada", "team": map[string]any{"id": 7}}}},
	{Name: "nested_typo", Tool: "file_ticket", Args: map[string]any{"title": "x", "assignee": map[string]any{"login": "ada", "team": map[string]any{"nmae": "core"}}}, isError: true, paths: []string{"/assignee/team/nmae"}},
	{Name: "unknown_arg", Tool: "file_ticket", Args: map[string]any{"title": "x", "lables": []string{"bug"}}, isError: true, paths: []string{"/lables"}},
	{Name: "missing_field", Tool: "file_ticket", Args: map[string]any{"assignee": map[string]any{"team": map[string]any{"id": 7}}}, isError: true, paths: []string{"/title", "/assignee/login"}},
	{Name: "wrong_type", Tool: "file_ticket", Args: map[string]any{"title": "x", "assignee": map[string]any{"login": "ada", "team": map[string]any{"id": "seven"}}}, isError: true, paths: []string{"/assignee/team/id"}},
}

// TestMCPClientsReturnRefusals drives the mainstream MCP clients (the
// TypeScript SDK v1 and v2 clients, the MCP Inspector CLI, the AI SDK's MCP
// client, the Go SDK's client) through toolgate's reverse listener to two real servers
// (server-everything on the SDK v1, server.mjs on the SDK v2), and checks
// what each client returns to its caller: every refusal on a tool with an
// outputSchema (a nested typo, an unknown argument, a missing field, a
// wrong type) comes back as an isError result whose text names every
// path, never as an exception; unknown arguments to a tool without
// arguments are refused; valid calls work; and no refused call reached a
// tool.
func TestMCPClientsReturnRefusals(t *testing.T) {
	npmClients(t)
	servers := []struct {
		name, script string
		calls        []clientCall
		tools        []string
	}{
		{"everything", "everything.mjs", everythingCalls, []string{"get-structured-content", "get-tiny-image", "toggle-subscriber-updates"}},
		{"ts-v2", "server.mjs", ticketCalls, []string{"file_ticket"}},
	}
	clients := []string{"v1", "v2", "inspector", "aisdk", "go"}
	intact, total := map[string]int{}, map[string]int{}
	for _, sv := range servers {
		t.Run(sv.name, func(t *testing.T) {
			srv := startNodeServer(t, sv.script)
			e := newEnvTo(t, strings.ReplaceAll(mcpConfig, "MCPUP", srv.origin), nil, nil, nil, 10*time.Millisecond)
			for _, client := range clients {
				t.Run(client, func(t *testing.T) {
					res := runClient(t, client, e.reverse+"/mcp", sv.calls)
					for _, c := range sv.calls {
						r, ok := res[c.Name]
						if !ok {
							t.Errorf("%s: no result", c.Name)
							continue
						}
						if !c.isError {
							if !r.Returned || r.IsError {
								t.Errorf("%s (valid): returned=%v isError=%v text %q error %q", c.Name, r.Returned, r.IsError, r.Text, r.Error)
							}
							continue
						}
						total[client]++
						good := r.Returned && r.IsError
						for _, p := range c.paths {
							good = good && strings.Contains(r.Text, p)
						}
						if good {
							intact[client]++
							continue
						}
						t.Errorf("%s: the client did not return the refusal intact: returned=%v isError=%v text %q error %q; want an isError result naming %v", c.Name, r.Returned, r.IsError, r.Text, r.Error, c.paths)
					}
				})
			}
			counts := serverCounts(t, srv.origin)
			valid := 0
			for _, c := range sv.calls {
				if !c.isError && c.Tool == sv.tools[0] {
					valid++
				}
			}
			if got := counts[sv.tools[0]]; got != valid*len(clients) {
				t.Errorf("%s ran %d times, want %d (the valid calls only): a refused call reached the tool", sv.tools[0], got, valid*len(clients))
			}
			for _, tool := range sv.tools[1:] {
				want := 0
				for _, c := range sv.calls {
					if !c.isError && c.Tool == tool {
						want += len(clients)
					}
				}
				if counts[tool] != want {
					t.Errorf("%s ran %d times, want %d: unknown arguments reached a tool that takes none", tool, counts[tool], want)
				}
			}
		})
	}
	var summary []string
	for _, client := range clients {
		summary = append(summary, fmt.Sprintf("%s %d/%d", client, intact[client], total[client]))
	}
	t.Logf("refusals returned intact per client: %s", strings.Join(summary, ", "))
}

// TestMCPTaskRefusals drives the TypeScript SDK v1 client's task API (MCP
// 2025-11-25 tasks) through toolgate to server-everything's
// simulate-research-query (taskSupport "required"): a valid call runs as
// the server's task; a refused one gets a task of toolgate's that has
// already failed, whose tasks/get statusMessage and tasks/result (an
// isError result) name every path, and the server never sees the call.
func TestMCPTaskRefusals(t *testing.T) {
	npmClients(t)
	srv := startNodeServer(t, "everything.mjs")
	e := newEnvTo(t, strings.ReplaceAll(mcpConfig, "MCPUP", srv.origin), nil, nil, nil, 10*time.Millisecond)
	const tool = "simulate-research-query"
	calls := []clientCall{
		{Name: "valid", Tool: tool, Args: map[string]any{"topic": "tides"}},
		{Name: "unknown_arg", Tool: tool, Args: map[string]any{"topic": "tides", "depth": 3}, isError: true, paths: []string{"/depth"}},
		{Name: "missing_field", Tool: tool, Args: map[string]any{"ambiguous": false}, isError: true, paths: []string{"/topic"}},
		{Name: "wrong_type", Tool: tool, Args: map[string]any{"topic": 5}, isError: true, paths: []string{"/topic"}},
	}
	res := runClient(t, "v1task", e.reverse+"/mcp", calls)
	intact, total := 0, 0
	for _, c := range calls {
		r := res[c.Name]
		if !c.isError {
			if !r.Returned || r.IsError || r.TaskStatus != "completed" || !strings.Contains(r.Text, "Research Report: tides") {
				t.Errorf("%s: %+v; want the server's completed task", c.Name, r)
			}
			continue
		}
		total++
		good := r.Returned && r.IsError && r.TaskStatus == "failed"
		for _, p := range c.paths {
			good = good && strings.Contains(r.Text, p) && strings.Contains(r.StatusMessage, p)
		}
		if good {
			intact++
			continue
		}
		t.Errorf("%s: %+v; want a failed task whose statusMessage and tasks/result name %v", c.Name, r, c.paths)
	}
	t.Logf("task refusals returned intact (tasks/get and tasks/result): %d/%d", intact, total)
	if n := serverCounts(t, srv.origin)[tool]; n != 1 {
		t.Errorf("%s reached the server %d times, want 1 (the valid call)", tool, n)
	}
}
