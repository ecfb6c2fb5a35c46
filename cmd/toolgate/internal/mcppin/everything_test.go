package mcppin

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/testutil"
	"github.com/toolgate/toolgate/proxy/mcppin"
)

// TestRunEverything pins the MCP reference server (server-everything, on
// the TypeScript SDK) and pins it again: every tool it lists is pinned,
// with the members the Go SDK's typed Tool would drop kept, and the second
// run finds nothing changed.
func TestRunEverything(t *testing.T) {
	dir, err := filepath.Abs(filepath.Join("..", "..", "..", "..", "proxy", "testdata", "mcpts"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@modelcontextprotocol", "server-everything", "package.json")); err != nil {
		t.Skipf("skipped: server-everything is not installed in %s/node_modules; run `bash scripts/testdeps.sh` (make test does)", dir)
	}
	origin := testutil.StartNodeServer(t, dir, "everything.mjs")
	lockPath := filepath.Join(t.TempDir(), "pins")
	opts := Options{URL: origin + "/mcp", Route: "everything", LockFile: lockPath}
	out, err := run(t, opts)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	l, err := mcppin.ReadLock(lockPath)
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Pins) < 5 {
		t.Fatalf("pinned %d tools of server-everything:\n%s", len(l.Pins), out)
	}
	// server-everything lists execution (taskSupport) on its tools, a
	// member the Go SDK's mcp.Tool has no field for: the pin keeps it.
	for _, e := range l.Pins {
		if _, ok := e.Fields[mcppin.FieldExecution]; !ok || !strings.Contains(e.Definition, `"execution"`) {
			t.Errorf("%s was pinned without its execution member: %v", e.Tool, e.Fields)
		}
	}
	out, err = run(t, opts)
	if err != nil || !strings.Contains(out, fmt.Sprintf("  same     %d\n", len(l.Pins))) || strings.Contains(out, "changed") {
		t.Errorf("second run: %q, %v; want every tool the same", out, err)
	}
}
