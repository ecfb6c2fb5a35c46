package proxy_test

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"
)

// conformanceRunner returns the Node 22 and the MCP conformance suite
// (@modelcontextprotocol/conformance, pinned) that scripts/testdeps.sh
// installs in proxy/testdata/mcpts, or skips saying how to install them.
// The suite needs Node 22 (fs.globSync), so the npm package "node" brings
// one; the machine's own node may be older.
func conformanceRunner(t *testing.T) (node, suite string) {
	t.Helper()
	_, dir := tsSDK(t)
	node = filepath.Join(dir, "node_modules", "node", "bin", "node")
	suite = filepath.Join(dir, "node_modules", "@modelcontextprotocol", "conformance", "dist", "index.js")
	for _, f := range []string{node, suite} {
		if _, err := os.Stat(f); err != nil {
			t.Skipf("skipped: %s is not installed; run `bash scripts/testdeps.sh` (make test does)", f)
		}
	}
	return node, suite
}

// conformanceSummary runs the suite's server mode against url and returns
// each scenario's line of its summary ("✓ ping: 1 passed, 0 failed").
func conformanceSummary(t *testing.T, node, suite, url string) map[string]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, suite, "server", "--url", url, "-o", t.TempDir())
	out, err := cmd.CombinedOutput()
	_, summary, ok := strings.Cut(string(out), "=== SUMMARY ===")
	if !ok {
		t.Fatalf("conformance against %s: %v\n%s", url, err, out)
	}
	line := regexp.MustCompile(`(?m)^\s*([✓✗])\s+(\S+):\s+(\d+) passed, (\d+) failed`)
	got := map[string]string{}
	for _, m := range line.FindAllStringSubmatch(summary, -1) {
		got[m[2]] = m[1] + " " + m[3] + " passed, " + m[4] + " failed"
	}
	if len(got) == 0 {
		t.Fatalf("conformance against %s printed no scenario results:\n%s", url, out)
	}
	return got
}

// TestMCPConformance runs the official MCP conformance suite in server
// mode against the Go SDK's reference "everything" server (built from the
// SDK module toolgate's tests already use, in its stateful mode, as the
// SDK's own conformance script runs it) directly and through toolgate's
// reverse listener: every scenario that passes direct must pass through
// toolgate. The table is logged (go test -v) for docs/mcp.md.
func TestMCPConformance(t *testing.T) {
	node, suite := conformanceRunner(t)
	bin := filepath.Join(t.TempDir(), "everything-server")
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("skipped: the go command is not on PATH; it builds the Go SDK's conformance server")
	}
	build := exec.Command(gobin, "build", "-o", bin, "github.com/modelcontextprotocol/go-sdk/conformance/everything-server")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the Go SDK's conformance server: %v\n%s", err, out)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0") // a free port for the server, which takes an address
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	srv := exec.Command(bin, "-http="+addr, "-stateless=false")
	srv.Stderr = os.Stderr
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Process.Kill(); srv.Wait() })
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the conformance server did not listen on %s: %v", addr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	e := newEnvTo(t, strings.ReplaceAll(mcpConfig, "MCPUP", "http://"+addr), nil, nil, nil, 10*time.Millisecond)

	direct := conformanceSummary(t, node, suite, "http://"+addr+"/mcp")
	through := conformanceSummary(t, node, suite, e.reverse+"/mcp")
	names := make([]string, 0, len(direct))
	for n := range direct {
		names = append(names, n)
	}
	sort.Strings(names)
	var table strings.Builder
	for _, n := range names {
		table.WriteString("| " + n + " | " + direct[n] + " | " + through[n] + " |\n")
		if strings.HasPrefix(direct[n], "✓") && through[n] != direct[n] {
			t.Errorf("scenario %s passes direct (%s) but not through toolgate (%q)", n, direct[n], through[n])
		}
	}
	t.Logf("conformance scenarios, direct vs through toolgate's reverse listener:\n%s", table.String())
}
