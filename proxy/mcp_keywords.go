package proxy

import "github.com/toolgate/toolgate/proxy/internal/mcpcall"

// ListedSchemaKeywords lists the MCP tools whose listed inputSchema holds
// keywords its draft does not define (those keywords check nothing; the
// rest of the schema checks the calls), by server and tool, at most 100
// (the most recently met).
func (s *Server) ListedSchemaKeywords() []mcpcall.ListedKeywords {
	return s.MCPKeywords.List()
}
