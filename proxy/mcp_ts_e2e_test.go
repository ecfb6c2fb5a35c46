package proxy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/testutil"
	"github.com/toolgate/toolgate/sink"
)

// tsSDK returns node and the folder where scripts/testdeps.sh installs the
// TypeScript MCP SDK v2 (proxy/testdata/mcpts, pinned by its
// package-lock.json), or skips the test saying how to install them.
func tsSDK(t testing.TB) (node, dir string) {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("testdata", "mcpts"))
	if err != nil {
		t.Fatal(err)
	}
	node, err = exec.LookPath("node")
	if err != nil {
		testutil.Missing(t, "node is not installed; the TypeScript MCP SDK tests need Node 20 or later (scripts/testdeps.sh installs the SDK when node is present)")
	}
	for _, pkg := range []string{"client", "server"} {
		if _, err := os.Stat(filepath.Join(dir, "node_modules", "@modelcontextprotocol", pkg, "package.json")); err != nil {
			testutil.Missing(t, "@modelcontextprotocol/%s is not installed in %s/node_modules; run `bash scripts/testdeps.sh` (make test does)", pkg, dir)
		}
	}
	return node, dir
}

// tsServer is proxy/testdata/mcpts/server.mjs running under node: a
// reference MCP server on the TypeScript SDK v2, speaking 2026-07-28.
type tsServer struct {
	origin string // http://127.0.0.1:PORT
}

func startTSServer(t testing.TB, env ...string) *tsServer {
	t.Helper()
	return startNodeServer(t, "server.mjs", env...)
}

// startNodeServer runs a server script of proxy/testdata/mcpts under node
// until the test ends (testutil.StartNodeServer).
func startNodeServer(t testing.TB, script string, env ...string) *tsServer {
	t.Helper()
	_, dir := tsSDK(t)
	return &tsServer{origin: testutil.StartNodeServer(t, dir, script, env...)}
}

// tsStep is one line client.mjs printed.
type tsStep struct {
	Step         string          `json:"step"`
	Version      string          `json:"version"`
	IsError      bool            `json:"isError"`
	Text         string          `json:"text"`
	Structured   json.RawMessage `json:"structured"`
	Progressed   bool            `json:"progressed"`
	BeforeResult bool            `json:"beforeResult"`
	Count        int             `json:"count"`
	Status       int             `json:"status"`
	Body         string          `json:"body"`
	Counts       map[string]int  `json:"counts"`
}

// runTSClient runs client.mjs against endpoint (through the forward proxy
// at proxyAddr when it is not "") and returns its steps by name.
func runTSClient(t *testing.T, endpoint, origin, proxyAddr string) map[string]tsStep {
	t.Helper()
	node, dir := tsSDK(t)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	args := []string{"client.mjs", endpoint, origin}
	if proxyAddr != "" {
		args = append(args, proxyAddr)
	}
	cmd := exec.CommandContext(ctx, node, args...)
	cmd.Dir = dir
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("client.mjs: %v\nstdout:\n%s\nstderr:\n%s", err, out, stderr.String())
	}
	steps := map[string]tsStep{}
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		var s tsStep
		if err := json.Unmarshal([]byte(l), &s); err != nil {
			t.Fatalf("client.mjs line %q: %v", l, err)
		}
		steps[s.Step] = s
	}
	return steps
}

// tsRefusal reads toolgate's envelope from a refused call's structured content.
func tsRefusal(s tsStep) (reason string, paths []string) {
	var env struct {
		Error *struct {
			Reason     string `json:"reason"`
			Violations []struct {
				Path string `json:"path"`
			} `json:"violations"`
		} `json:"error"`
	}
	if json.Unmarshal(s.Structured, &env) != nil || env.Error == nil {
		return "", nil
	}
	for _, v := range env.Error.Violations {
		paths = append(paths, v.Path)
	}
	return env.Error.Reason, paths
}

// TestMCPTypeScriptSDK drives the official TypeScript SDK v2 client
// against its server (protocol 2026-07-28, stateless: no initialize, no
// Mcp-Session-Id) through toolgate's forward proxy and reverse listener:
// a valid call, typos at top level and nested, a wrong type (none of which
// reach the handler), a streamed answer with progress, an MRTR round trip
// that passes through untouched, a tools/list_changed on a
// subscriptions/listen stream that makes toolgate list again, and a
// header/body mismatch refused with HTTP 400 and HeaderMismatch.
func TestMCPTypeScriptSDK(t *testing.T) {
	for _, mode := range []string{"forward", "reverse"} {
		t.Run(mode, func(t *testing.T) {
			srv := startTSServer(t)
			e := newEnvTo(t, strings.ReplaceAll(mcpConfig, "MCPUP", srv.origin), nil, nil, nil, 10*time.Millisecond)
			endpoint, proxyAddr := srv.origin+"/mcp", e.srv.Addr("forward", 0)
			if mode == "reverse" {
				endpoint, proxyAddr = e.reverse+"/mcp", ""
			}
			steps := runTSClient(t, endpoint, srv.origin, proxyAddr)

			if v := steps["connect"].Version; v != "2026-07-28" {
				t.Fatalf("negotiated %q, want 2026-07-28", v)
			}
			if s := steps["valid"]; s.IsError || s.Text != "created" {
				t.Errorf("valid call: %+v", s)
			}
			for _, tc := range []struct{ step, reason, path string }{
				{"typo_top", "unknown_field", "/lables"},
				{"typo_nested", "unknown_field", "/assignee/team/nmae"},
				{"wrong_type", "wrong_type", "/assignee/team/id"},
				{"extra_typo", "unknown_field", "/noet"},
			} {
				s := steps[tc.step]
				reason, paths := tsRefusal(s)
				if !s.IsError || reason != tc.reason || len(paths) != 1 || paths[0] != tc.path || !strings.Contains(s.Text, tc.path) {
					t.Errorf("%s: isError=%v reason %q paths %v text %q; want toolgate's %s at %s", tc.step, s.IsError, reason, paths, s.Text, tc.reason, tc.path)
				}
			}
			if s := steps["stream"]; !s.Progressed || !steps["progress"].BeforeResult || s.Text != "report done" {
				t.Errorf("streamed answer: %+v, progress %+v", s, steps["progress"])
			}
			if s := steps["mrtr"]; s.IsError || s.Text != "confirmed by ada" {
				t.Errorf("MRTR round trip: %+v", s)
			}
			if steps["changed"].Count < 1 {
				t.Errorf("tools/list_changed did not reach the client through toolgate")
			}
			if s := steps["extra_valid"]; s.IsError || s.Text != "extra ran" {
				t.Errorf("call of the tool added by the change: %+v", s)
			}
			mm := steps["mismatch"]
			var rpc struct {
				ID    int `json:"id"`
				Error struct {
					Code int `json:"code"`
				} `json:"error"`
			}
			if err := json.Unmarshal([]byte(mm.Body), &rpc); err != nil || mm.Status != 400 || rpc.Error.Code != -32020 || rpc.ID != 99 {
				t.Errorf("header/body mismatch: status %d body %s; want 400 with JSON-RPC error -32020 for id 99", mm.Status, mm.Body)
			}
			c := steps["counts"].Counts
			want := map[string]int{"create_issue": 1, "slow_report": 1, "confirm": 2, "confirm_done": 1, "badState": 0, "extra": 1}
			for k, v := range want {
				if c[k] != v {
					t.Errorf("server counted %s=%d, want %d (refused calls must never reach a handler; requestState must pass untouched)", k, c[k], v)
				}
			}

			// Events: the protocol version on each, the MRTR outcome, the
			// mismatch refused, and toolgate's own tools/list recorded.
			evs := e.waitEventsWhere(t, func(evs []sink.Event) bool {
				return countTool(evs, "extra") == 2 && countTool(evs, "create_issue") >= 5
			})
			var confirm, fetches, mismatches []string
			for _, ev := range evs {
				if ev.RPCMethod == "tools/call" && ev.MCPProtocol != "2026-07-28" {
					t.Errorf("tools/call event %s: mcp_protocol %q", ev.Tool, ev.MCPProtocol)
				}
				switch {
				case ev.Tool == "confirm":
					confirm = append(confirm, ev.Outcome)
				case ev.RPCMethod == "tools/list" && ev.RPCID == `"toolgate-list-0"`:
					fetches = append(fetches, fmt.Sprintf("%v:%d", ev.OK, ev.UpstreamStatus))
				}
				if ev.Reason == "header_mismatch" {
					mismatches = append(mismatches, ev.Tool+":"+ev.Outcome)
					if !ev.Refused || ev.ErrorCode != "validation" || ev.Tool != "create_issue" {
						t.Errorf("mismatch event %+v", ev)
					}
				}
			}
			if strings.Join(confirm, ",") != sink.OutcomeInputRequired+","+sink.OutcomeOK {
				t.Errorf("confirm outcomes %v, want [input_required ok]", confirm)
			}
			if len(fetches) == 0 {
				t.Errorf("no event for toolgate's own tools/list")
			}
			for _, f := range fetches {
				if f != "true:200" {
					t.Errorf("toolgate's own tools/list event: %s", f)
				}
			}
			if len(mismatches) != 1 {
				t.Errorf("header mismatch events %v, want one", mismatches)
			}
		})
	}
}
