package mcpcall

import "github.com/toolgate/toolgate/proxy/mcp"

// UnusableSchema is a tool whose listed inputSchema could not check its
// calls, as /status shows it.
type UnusableSchema = mcp.UnusableSchema
