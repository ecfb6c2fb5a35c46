package mcpcall

import "github.com/toolgate/toolgate/proxy/internal/pipe"

// mcpOf is a call's MCP side, or nil off an MCP route.
func MCPOf(c *pipe.Call) *MCPCall {
	m, _ := c.MCP.(*MCPCall)
	return m
}
