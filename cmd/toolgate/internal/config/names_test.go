package config

import (
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestConfigNamesResolve checks that a name the configuration gives a rule
// resolves, or the file is refused at the name's line with a hint: the
// approvals.tools key that is an MCP route (the review's case: it loaded
// and gated nothing), one that names no tool, a budget on a tool that does
// not exist, and a rate limit for an upstream named twice in two
// spellings; and that the names that do resolve load.
func TestConfigNamesResolve(t *testing.T) {
	head := "listen: {forward: 127.0.0.1:0}\nadmin: {listen: off}\n"
	httpTool := "  - name: search\n    match: {host: 127.0.0.1:9001, path: /search}\n"
	mcpRoute := "  - name: issues_mcp\n    protocol: mcp\n    match: {host: 127.0.0.1:9002, path: /mcp}\n"
	for _, tc := range []struct {
		name, yaml string
		line       int    // 0: loads
		want       string // in the error
	}{
		{"an MCP route's own name", head + "tools:\n" + httpTool + mcpRoute + "approvals:\n  tools:\n    issues_mcp: {require: always}\n",
			11, "is an MCP route, not a tool"},
		{"a name no tool has, no MCP route", head + "tools:\n" + httpTool + "approvals:\n  tools:\n    serach: {require: always}\n",
			8, `"serach" names no tool (tools: search)`},
		{"an HTTP tool", head + "tools:\n" + httpTool + "approvals:\n  tools:\n    search: {require: always}\n", 0, ""},
		{"an MCP tool a route may list", head + "tools:\n" + httpTool + mcpRoute + "approvals:\n  tools:\n    delete_issue: {require: always}\n", 0, ""},
		{"an MCP tool named as its route, declared", head + "tools:\n" + httpTool + mcpRoute + "    mcp: {tools: {issues_mcp: {}}}\n" +
			"approvals:\n  tools:\n    issues_mcp: {require: always}\n", 0, ""},
		{"a budget on no tool", head + "tools:\n" + httpTool + "budgets:\n  limits:\n    - {name: b, calls: 1, window: 1m, tools: [serach]}\n",
			8, `"serach" names no tool`},
		{"one upstream twice", head + "tools:\n" + httpTool + "budgets:\n  upstreams:\n    - {host: 127.0.0.1:9001, rate: 1}\n    - {host: 'LOCALHOST.:09001', rate: 2}\n",
			9, "names the upstream upstreams[0] names"},
		{"a rate limit host that is no host", head + "tools:\n" + httpTool + "budgets:\n  upstreams:\n    - {host: 'http://127.0.0.1:9001', rate: 1}\n",
			8, "is a URL"},
		{"a tool naming loopback another way", head + "tools:\n" + httpTool + "  - name: other\n    match: {host: 'localhost:9003', path: /x}\n",
			7, "is the loopback host that tools[0] (search) names as 127.0.0.1:9001"},
		{"hosts naming the loopback tool host another way", head + "tools:\n" + httpTool + "hosts:\n  - {host: 'localhost:9001', unmatched: pass}\n", 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "toolgate.yaml")
			lc, err := Parse(path, []byte(tc.yaml))
			if tc.line == 0 {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				lc.ClosePolicies(nil)
				return
			}
			if err == nil {
				lc.ClosePolicies(nil)
				t.Fatalf("loaded; want an error at line %d", tc.line)
			}
			prefix := path + ":" + itoa(tc.line) + ": "
			if !strings.HasPrefix(err.Error(), prefix) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q; want %q... holding %q", err, prefix, tc.want)
			}
		})
	}
}

func itoa(i int) string { return strconv.Itoa(i) }
