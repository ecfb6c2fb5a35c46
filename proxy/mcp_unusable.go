package proxy

import "github.com/toolgate/toolgate/proxy/internal/mcpcall"

// UnusableSchemas lists the tools whose listed schemas could not check
// their calls (too large, too complex, not compilable), by server and
// tool, at most 100 (the most recently met).
func (s *Server) UnusableSchemas() []mcpcall.UnusableSchema {
	return s.MCPUnusable.List()
}
