package proxy

import (
	"github.com/toolgate/toolgate/proxy/internal/mcpcall"
	"github.com/toolgate/toolgate/proxy/mcppin"
)

// UnusableSchemas lists the tools whose listed schemas could not check
// their calls (too large, too complex, not compilable), by server and
// tool, at most 100 (the most recently met).
func (s *Server) UnusableSchemas() []mcpcall.UnusableSchema {
	return s.MCPUnusable.List()
}

// ListedSchemaKeywords lists the MCP tools whose listed inputSchema holds
// keywords its draft does not define (those keywords check nothing; the
// rest of the schema checks the calls), by server and tool, at most 100
// (the most recently met).
func (s *Server) ListedSchemaKeywords() []mcpcall.ListedKeywords {
	return s.MCPKeywords.List()
}

// UnlistedNames are the configured MCP tool names that the servers which
// listed their tools since the configuration took effect do not list.
func (s *Server) UnlistedNames() []mcpcall.UnlistedName {
	if st := s.state.Load(); st != nil {
		return st.Names.Names()
	}
	return nil
}

// PinChanges lists the MCP tools whose last listing differs from their pin,
// that a complete list no longer names, or (on a route with new_tools:
// change) that were pinned at first sight and not yet accepted: what an
// operator has to decide (admin GET /mcp/pins/changes, and /status).
func (s *Server) PinChanges() []mcppin.Verdict {
	review := map[string]bool{}
	for _, t := range s.state.Load().Cfg.Compiled {
		if t.MCP != nil && t.MCP.Cfg.Pin.NewTools == mcppin.NewToolsChange {
			review[t.Cfg.Name] = true
		}
	}
	all := s.Pins.Store.Changes(true)
	out := all[:0]
	for _, v := range all {
		if v.State != mcppin.StateSame || review[v.Route] {
			out = append(out, v)
		}
	}
	return out
}

// AcceptPin accepts the change of one MCP tool's definition: the listed
// definition whose digest the operator reviewed becomes its pin
// (mcppin.Pins.Accept: ErrStaleAccept when the server changed it again
// since, ErrNoChange or ErrNoPin when there is nothing to accept). The pin
// lives in memory; toolgate mcp pin writes the lock file that outlives a
// restart.
func (s *Server) AcceptPin(route, server, tool, digest string) (mcppin.Verdict, error) {
	v, err := s.Pins.Store.Accept(route, server, tool, digest)
	if err == nil {
		s.Log.Info("mcp: a tool definition change was accepted", "route", route, "server", server, "tool", tool, "digest", digest)
	}
	return v, err
}
