// Package mcpcall runs a call on an MCP route: an MCP POST read once
// (exchange.go), each tools/call through the route's chain (steps.go: the
// call's params, the schema the server listed or the route configures,
// pins), in-band approval (approval.go), refusals as JSON-RPC answers
// (refuse.go, tasks.go), the protocol eras' headers (era.go), toolgate's
// own tools/list (fetch.go), the answer held for the route's answer checks
// (hold.go, answer.go), and what a Server keeps for its MCP routes
// (MCPHost: learned schemas, pins, refused tasks, the /status lists).
// The protocol itself is proxy/mcp's.
package mcpcall
