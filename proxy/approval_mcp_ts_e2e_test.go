package proxy_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/policies/approval"
	"github.com/toolgate/toolgate/policies/approval/audit"
	"github.com/toolgate/toolgate/proxy"
)

// TestApprovalMCPInBandTypeScriptSDK drives the official TypeScript SDK
// v2 client (2026-07-28, URL-mode elicitation declared;
// proxy/testdata/mcpts/approval.mjs) through toolgate's reverse listener
// to the SDK's own server (server.mjs). The SDK's Multi Round-Trip driver
// takes toolgate's input_required, hands the URL-mode elicitation to the
// client's handler, and echoes toolgate's requestState on the retry:
//
//   - create_issue (require: always): asked in-band; a person approves
//     through a second gate on the store (as `toolgate approvals approve`
//     does) while the handler waits; the retry reaches the server once;
//   - the next create_issue: denied while the handler waits:
//     approval_denied, and the server never ran it;
//   - confirm (require: always, uses: 2), whose handler asks its own
//     round: toolgate's round, then the server's, with the server's
//     requestState reaching it untouched (its handler counts badState).
func TestApprovalMCPInBandTypeScriptSDK(t *testing.T) {
	node, dir := tsSDK(t)
	srv := startTSServer(t)
	cfg := approval.Config{URL: "http://127.0.0.1:18091/approvals", Tools: map[string]approval.ToolRule{
		"create_issue": {Require: approval.RequireAlways},
		"confirm":      {Require: approval.RequireAlways, Uses: 2},
	}}
	e, gate := newApprovalEnvConfig(t, cfg, true, strings.ReplaceAll(mcpConfig, "MCPUP", srv.origin), map[string]proxy.Checker{})
	if e.srv.Addr("reverse", 0) == "" {
		t.Fatal("no reverse listener")
	}
	cli := cliGate(t, gate)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()

	cmd := exec.CommandContext(ctx, node, "approval.mjs", "http://"+e.srv.Addr("reverse", 0)+"/mcp", srv.origin)
	cmd.Dir = dir
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer stdin.Close()

	// The person's decisions, one per ask, in order.
	decisions := []struct{ verdict, action string }{
		{audit.VerdictApproved, "accept"}, // create_issue
		{audit.VerdictDenied, "accept"},   // the second create_issue
		{audit.VerdictApproved, "accept"}, // confirm
	}
	steps := map[string]tsStep{}
	var asks []string
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		var s struct {
			tsStep
			Mode string `json:"mode"`
			URL  string `json:"url"`
		}
		if err := json.Unmarshal(sc.Bytes(), &s); err != nil {
			t.Fatalf("approval.mjs line %q: %v", sc.Text(), err)
		}
		if s.Step != "ask" {
			steps[s.Step] = s.tsStep
			continue
		}
		if s.Mode != "url" || len(asks) >= len(decisions) {
			t.Fatalf("ask %d: mode %q url %q", len(asks), s.Mode, s.URL)
		}
		d := decisions[len(asks)]
		asks = append(asks, s.URL)
		if _, err := cli.Decide(ctx, idFromURL(t, s.URL), d.verdict, "cli:dana", "no"); err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(stdin, d.action+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	if v := steps["connect"].Version; v != "2026-07-28" {
		t.Fatalf("negotiated %q, want 2026-07-28", v)
	}
	if len(asks) != 3 {
		t.Fatalf("toolgate asked %d times, want 3: %v", len(asks), asks)
	}
	if s := steps["approved"]; s.IsError || s.Text != "created" {
		t.Errorf("approved call: %+v", s)
	}
	if s := steps["denied"]; !s.IsError || !strings.Contains(string(s.Structured), `"reason":"approval_denied"`) {
		t.Errorf("denied call: %+v", s)
	}
	if s := steps["mrtr"]; s.IsError || s.Text != "confirmed by ada" {
		t.Errorf("approval, then the server's own round: %+v", s)
	}
	c := steps["counts"].Counts
	for k, v := range map[string]int{"create_issue": 1, "confirm": 2, "confirm_done": 1, "badState": 0} {
		if c[k] != v {
			t.Errorf("server counted %s=%d, want %d", k, c[k], v)
		}
	}
}
