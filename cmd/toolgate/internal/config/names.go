package config

import (
	"maps"
	"slices"
	"strings"

	"github.com/toolgate/toolgate/internal/section"
	"github.com/toolgate/toolgate/policies/approval"
	"github.com/toolgate/toolgate/proxy"
)

// checkApprovalNames refuses an approvals.tools entry that can never
// apply. An entry names a tool: an HTTP tool by its name, or an MCP tool
// by its own name (params.name of a tools/call), which only the server
// knows, so it is checked when the server lists its tools (the proxy logs,
// counts and shows in /status a name no server lists). What can be
// checked here is: a name that is no HTTP tool when no tool is an MCP
// route (nothing could ever list it), and a name that is an MCP route's
// own (the route's tools are named by the server, not by the route; an
// MCP tool that happens to share the route's name is given as
// mcp.tools.NAME on the route, which makes the name known).
func checkApprovalNames(pc *proxy.Config, ac *approval.Config) error {
	httpTools := map[string]bool{}
	routes := map[string]*proxy.ToolConfig{}
	for i := range pc.Tools {
		t := &pc.Tools[i]
		if t.Protocol == proxy.ProtocolMCP {
			routes[t.Name] = t
			continue
		}
		httpTools[t.Name] = true
	}
	for _, name := range slices.Sorted(maps.Keys(ac.Tools)) {
		if httpTools[name] {
			continue
		}
		if r, ok := routes[name]; ok {
			if _, listed := r.MCP.Tools[name]; listed {
				continue
			}
			return section.Errorf("tools."+name, "%q is an MCP route, not a tool: approvals on an MCP route are set per MCP tool, by the name its server lists (params.name of a tools/call), such as approvals.tools.%s; an MCP tool of the same name as its route is declared as tools[].mcp.tools.%s",
				name, exampleMCPTool(r), name)
		}
		if len(routes) == 0 {
			return section.Errorf("tools."+name, "%q names no tool (tools: %s), and no tool is an MCP route whose server could list it", name, strings.Join(slices.Sorted(maps.Keys(httpTools)), ", "))
		}
	}
	return nil
}

// serverToolNames are the approvals.tools names that are no HTTP tool:
// names of MCP tools, which the proxy checks against what servers list.
func serverToolNames(pc *proxy.Config, ac *approval.Config) []string {
	http := map[string]bool{}
	for i := range pc.Tools {
		if pc.Tools[i].Protocol != proxy.ProtocolMCP {
			http[pc.Tools[i].Name] = true
		}
	}
	var out []string
	for _, n := range slices.Sorted(maps.Keys(ac.Tools)) {
		if !http[n] {
			out = append(out, n)
		}
	}
	return out
}

// exampleMCPTool is a name to show in a hint: one of the route's declared
// MCP tools, else a placeholder.
func exampleMCPTool(r *proxy.ToolConfig) string {
	for _, n := range slices.Sorted(maps.Keys(r.MCP.Tools)) {
		return n
	}
	return "SERVER_TOOL_NAME"
}
