package proxy

import "github.com/toolgate/toolgate/proxy/internal/mcpcall"

// UnlistedNames are the configured MCP tool names that the servers which
// listed their tools since the configuration took effect do not list.
func (s *Server) UnlistedNames() []mcpcall.UnlistedName {
	if st := s.state.Load(); st != nil {
		return st.Names.Names()
	}
	return nil
}
