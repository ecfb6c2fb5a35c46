package proxy

import "github.com/toolgate/toolgate/proxy/mcp"

// joinNonEmpty joins a and b with "; ", leaving out an empty one.
func joinNonEmpty(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}

// UnusableSchema is a tool whose listed inputSchema could not check its
// calls, as /status shows it.
type UnusableSchema = mcp.UnusableSchema

// UnusableSchemas lists the tools whose listed schemas could not check
// their calls (too large, too complex, not compilable), by server and
// tool, at most 100 (the most recently met).
func (s *Server) UnusableSchemas() []UnusableSchema {
	return s.mcpUnusable.List()
}
