package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// mcpExample is the example MCP configuration, recorded tools/list and
// case file.
var mcpExample = filepath.Join("..", "..", "examples", "mcp")

// TestPolicyEvalMCP runs `toolgate policy eval` for tools of the example
// MCP route with the recorded tools/list: what the route decides for a
// tools/call, and the isError answer the caller would get.
func TestPolicyEvalMCP(t *testing.T) {
	cfg := filepath.Join(mcpExample, "toolgate.yaml")
	list := filepath.Join(mcpExample, "tools-list.json")
	notList := filepath.Join(t.TempDir(), "not-a-list.json")
	if err := os.WriteFile(notList, []byte(`{"jsonrpc":"2.0","id":1,"result":{"resources":[]}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		args     []string
		wantCode int
		wantOut  []string
		wantErr  string
	}{
		{
			name: "allowed", args: []string{"--tool", "read_file", "--args", `{"path": "/home/a/notes.txt", "range": {"start": 0, "end": 10}}`},
			wantCode: exitOK, wantOut: []string{"tool         read_file", "outcome      allowed"},
		},
		{
			name: "top-level typo", args: []string{"--tool", "read_file", "--args", `{"path": "/home/a/notes.txt", "lenght": 10}`},
			wantCode: exitRefused,
			wantOut: []string{"outcome      refused (HTTP 200)", "code         validation", "reason       unknown_field", "violation    /lenght: ",
				`"isError": true`, `"path": "/lenght"`},
		},
		{
			name: "nested wrong type", args: []string{"--tool", "read_file", "--args", `{"path": "/home/a/notes.txt", "range": {"start": "0"}}`},
			wantCode: exitRefused,
			wantOut: []string{"reason       wrong_type", "violation    /range/start: wrong type",
				`"text": "Tool 'read_file' got range.start=string, expected integer\n- /range/start: wrong type (expected integer, got string)"`, `"isError": true`},
		},
		{
			name: "policy deny", args: []string{"--tool", "read_file", "--args", `{"path": "/etc/passwd"}`},
			wantCode: exitRefused,
			wantOut:  []string{"code         policy", "reason       policy_denied", "violation    /path: paths under /etc are not for agents", `"isError": true`},
		},
		{
			name: "a tool the list does not name", args: []string{"--tool", "delete_file", "--args", `{"path": "/tmp/x"}`},
			wantCode: exitRefused,
			wantOut:  []string{"reason       unknown_tool", "detail       Tool 'delete_file' is not offered by MCP server 127.0.0.1:3001/mcp; it offers: read_file, search"},
		},
		{
			name: "2026-07-28 answer", args: []string{"--tool", "search", "--args", `{"query": "x", "limit": 500}`, "--header", "MCP-Protocol-Version=2026-07-28"},
			wantCode: exitRefused,
			wantOut:  []string{"violation    /limit: ", `"resultType": "complete"`},
		},
		{
			name: "an MCP route the configuration does not have", args: []string{"--tool", "read_file", "--route", "nope"},
			wantCode: exitError, wantErr: `no MCP route named "nope"; the configuration's MCP routes: files_mcp`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := runArgs(append([]string{"policy", "eval", "-c", cfg, "--tools-list", list}, tt.args...)...)
			if code != tt.wantCode {
				t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tt.wantCode, out, errOut)
			}
			for _, w := range tt.wantOut {
				if !strings.Contains(out, w) {
					t.Errorf("stdout lacks %q:\n%s", w, out)
				}
			}
			if !strings.Contains(errOut, tt.wantErr) {
				t.Errorf("stderr lacks %q:\n%s", tt.wantErr, errOut)
			}
		})
	}
	t.Run("an MCP route without a list", func(t *testing.T) {
		code, _, errOut := runArgs("policy", "eval", "-c", cfg, "--tool", "files_mcp")
		if code != exitError || !strings.Contains(errOut, `tool "files_mcp" is an MCP route`) || !strings.Contains(errOut, "--tools-list FILE or --live URL") {
			t.Errorf("exit %d, stderr:\n%s", code, errOut)
		}
	})
	t.Run("not a tools/list", func(t *testing.T) {
		code, _, errOut := runArgs("policy", "eval", "-c", cfg, "--tools-list", notList, "--tool", "read_file")
		if code != exitError || !strings.Contains(errOut, "not a tools/list answer") {
			t.Errorf("exit %d, stderr:\n%s", code, errOut)
		}
	})
	t.Run("usage", func(t *testing.T) {
		for _, args := range [][]string{
			{"--tool", "read_file", "--tools-list", list, "--live", "http://127.0.0.1:3001/mcp"},
			{"--tool", "read_file", "--route", "files_mcp"},
		} {
			if code, _, errOut := runArgs(append([]string{"policy", "eval", "-c", cfg}, args...)...); code != exitUsage {
				t.Errorf("%v: exit %d, want %d: %s", args, code, exitUsage, errOut)
			}
		}
	})
	t.Run("a configured schema wins over the listed one", func(t *testing.T) {
		dir := t.TempDir()
		b, err := os.ReadFile(cfg)
		if err != nil {
			t.Fatal(err)
		}
		abs, _ := filepath.Abs(filepath.Join(mcpExample, "policies", "paths"))
		text := strings.Replace(strings.Replace(string(b), "path: policies/paths", "path: "+abs, 1),
			"    policies: [paths]", "    policies: [paths]\n    mcp:\n      tools:\n        read_file: {schema_file: pinned.json}", 1)
		if err := os.WriteFile(filepath.Join(dir, "toolgate.yaml"), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "pinned.json"), []byte(`{"type": "object", "properties": {"path": {"type": "string", "maxLength": 8}}}`), 0o644); err != nil {
			t.Fatal(err)
		}
		code, out, errOut := runArgs("policy", "eval", "-c", filepath.Join(dir, "toolgate.yaml"), "--tools-list", list, "--tool", "read_file", "--args", `{"path": "/home/a/notes.txt", "range": {"start": 0}}`)
		if code != exitRefused || !strings.Contains(out, "violation    /path: ") || !strings.Contains(out, "violation    /range: ") {
			t.Errorf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
		}
	})
	t.Run("unknown_tool pass", func(t *testing.T) {
		dir := t.TempDir()
		b, err := os.ReadFile(cfg)
		if err != nil {
			t.Fatal(err)
		}
		abs, _ := filepath.Abs(filepath.Join(mcpExample, "policies", "paths"))
		text := strings.Replace(strings.Replace(string(b), "path: policies/paths", "path: "+abs, 1),
			"    policies: [paths]", "    policies: [paths]\n    mcp: {unknown_tool: pass}", 1)
		if err := os.WriteFile(filepath.Join(dir, "toolgate.yaml"), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		code, out, errOut := runArgs("policy", "eval", "-c", filepath.Join(dir, "toolgate.yaml"), "--tools-list", list, "--tool", "delete_file", "--args", `{"path": "/tmp/x"}`)
		if code != exitOK || !strings.Contains(out, "outcome      allowed") || !strings.Contains(out, "schema       none checked the arguments") {
			t.Errorf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
		}
	})
}

// TestPolicyTestMCP runs the example MCP case file (a file-wide tools_list)
// and a case file whose cases name their own lists and route.
func TestPolicyTestMCP(t *testing.T) {
	code, out, errOut := runArgs("policy", "test", mcpExample)
	if code != exitOK || lastLine(out) != "7 passed, 0 failed" {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "only-search.json"), []byte(`{"tools": [{"name": "search", "inputSchema": {"type": "object"}}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, _ := filepath.Abs(filepath.Join(mcpExample, "toolgate.yaml"))
	list, _ := filepath.Abs(filepath.Join(mcpExample, "tools-list.json"))
	cases := `config: ` + cfg + `
cases:
  - name: listed in the file's own list
    tool: read_file
    tools_list: ` + list + `
    route: files_mcp
    arguments: {path: /home/a}
    expect: {outcome: allowed}
  - name: not in the case's list
    tool: read_file
    tools_list: only-search.json
    arguments: {path: /home/a}
    expect: {outcome: refused, reason: unknown_tool, message: "it offers: search"}
  - name: a plain tool would fail
    tool: read_file
    tools_list: only-search.json
    arguments: {path: /home/a}
    expect: {outcome: allowed}
`
	path := filepath.Join(dir, "mine.cases.yaml")
	if err := os.WriteFile(path, []byte(cases), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, _ = runArgs("policy", "test", path)
	for _, w := range []string{"PASS mine.cases.yaml: listed in the file's own list", "PASS mine.cases.yaml: not in the case's list",
		"FAIL mine.cases.yaml: a plain tool would fail", "2 passed, 1 failed"} {
		if !strings.Contains(out, w) {
			t.Errorf("exit %d; stdout lacks %q:\n%s", code, w, out)
		}
	}
	bad := "config: " + cfg + "\ncases:\n  - name: x\n    tool: read_file\n    route: files_mcp\n    expect: {outcome: allowed}\n"
	if err := os.WriteFile(path, []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = runArgs("policy", "test", path)
	if code != exitError || !strings.Contains(out+errOut, "mine.cases.yaml:5: cases[0].route: an MCP case needs tools_list") {
		t.Errorf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
}

// filesServer is a real MCP server (the official Go SDK) with the example's
// read_file tool; it counts the tools/call it gets and the sessions closed.
type filesServer struct {
	srv     *httptest.Server
	calls   atomic.Int64
	deletes atomic.Int64
}

func startFilesServer(t *testing.T, stateless bool) *filesServer {
	t.Helper()
	var rec struct {
		Result struct {
			Tools []struct {
				Name        string          `json:"name"`
				InputSchema json.RawMessage `json:"inputSchema"`
			} `json:"tools"`
		} `json:"result"`
	}
	b, err := os.ReadFile(filepath.Join(mcpExample, "tools-list.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &rec); err != nil {
		t.Fatal(err)
	}
	f := &filesServer{}
	s := mcp.NewServer(&mcp.Implementation{Name: "files", Version: "1.0.0"}, nil)
	for _, tl := range rec.Result.Tools {
		s.AddTool(&mcp.Tool{Name: tl.Name, InputSchema: tl.InputSchema},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil
			})
	}
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{Stateless: stateless})
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodDelete {
			f.deletes.Add(1)
		}
		if r.Body != nil {
			body, _ := io.ReadAll(r.Body)
			if bytes.Contains(body, []byte(`"tools/call"`)) {
				f.calls.Add(1)
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

// mcpConfigFor writes the example configuration with its route in front of
// the server at hostport.
func mcpConfigFor(t *testing.T, hostport string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(mcpExample, "toolgate.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	abs, _ := filepath.Abs(filepath.Join(mcpExample, "policies", "paths"))
	text := strings.ReplaceAll(string(b), "127.0.0.1:3001", hostport)
	text = strings.Replace(text, "path: policies/paths", "path: "+abs, 1)
	text = strings.Replace(text, "127.0.0.1:18083", "127.0.0.1:0", 1)
	p := filepath.Join(t.TempDir(), "toolgate.yaml")
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestPolicyEvalMCPLive runs `toolgate policy eval --live` against real
// MCP servers of both kinds (one that keeps sessions, one that does not):
// the schemas come from toolgate's own tools/list, the decisions are the
// recorded list's, and the tool itself is never called. A tools/list
// answer recorded from the server (an event stream) works as --tools-list.
func TestPolicyEvalMCPLive(t *testing.T) {
	for _, stateless := range []bool{false, true} {
		name := "sessions"
		if stateless {
			name = "stateless"
		}
		t.Run(name, func(t *testing.T) {
			f := startFilesServer(t, stateless)
			host := strings.TrimPrefix(f.srv.URL, "http://")
			cfg := mcpConfigFor(t, host)
			url := f.srv.URL + "/mcp"
			for _, c := range []struct {
				args     string
				tool     string
				wantCode int
				want     string
			}{
				{`{"path": "/home/a", "range": {"start": 1}}`, "read_file", exitOK, "outcome      allowed"},
				{`{"path": "/home/a", "lenght": 1}`, "read_file", exitRefused, "violation    /lenght: "},
				{`{"path": "/home/a", "range": {"end": true}}`, "read_file", exitRefused, "violation    /range/end: wrong type"},
				{`{"path": "/etc/shadow"}`, "read_file", exitRefused, "reason       policy_denied"},
				{`{}`, "delete_file", exitRefused, "it offers: read_file, search"},
			} {
				code, out, errOut := runArgs("policy", "eval", "-c", cfg, "--live", url, "--tool", c.tool, "--args", c.args)
				if code != c.wantCode || !strings.Contains(out, c.want) {
					t.Errorf("%s %s: exit %d, want %d with %q\nstdout:\n%s\nstderr:\n%s", c.tool, c.args, code, c.wantCode, c.want, out, errOut)
				}
			}
			if n := f.calls.Load(); n != 0 {
				t.Errorf("the server got %d tools/call; eval sends none", n)
			}
			if !stateless && f.deletes.Load() != 5 {
				t.Errorf("%d sessions closed, want 5 (one per eval)", f.deletes.Load())
			}
			// A URL the route does not match is refused before anything is sent.
			code, _, errOut := runArgs("policy", "eval", "-c", cfg, "--live", f.srv.URL+"/other", "--tool", "read_file")
			if code != exitError || !strings.Contains(errOut, `route "files_mcp" does not match`) {
				t.Errorf("unmatched URL: exit %d: %s", code, errOut)
			}
			if !stateless {
				return
			}
			// Record the server's own tools/list answer and evaluate against it.
			req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(`{"jsonrpc":"2.0","id":7,"method":"tools/list","params":{}}`))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			rec := filepath.Join(t.TempDir(), "recorded.txt")
			if err := os.WriteFile(rec, body, 0o644); err != nil {
				t.Fatal(err)
			}
			code, out, errOut := runArgs("policy", "eval", "-c", cfg, "--tools-list", rec, "--tool", "read_file", "--args", `{"path": "/home/a", "range": {"start": -1}}`)
			if code != exitRefused || !strings.Contains(out, "violation    /range/start: ") {
				t.Errorf("recorded %s answer:\n%s\nexit %d\nstdout:\n%s\nstderr:\n%s", resp.Header.Get("Content-Type"), body, code, out, errOut)
			}
		})
	}
}
