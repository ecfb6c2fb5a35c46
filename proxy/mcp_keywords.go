package proxy

import (
	"github.com/toolgate/toolgate/policies"
	"github.com/toolgate/toolgate/proxy/mcp"
)

// ListedKeywords is a tool whose listed inputSchema holds keywords its
// draft does not define, as /status shows it.
type ListedKeywords = mcp.ListedKeywords

// ListedSchemaKeywords lists the MCP tools whose listed inputSchema holds
// keywords its draft does not define (those keywords check nothing; the
// rest of the schema checks the calls), by server and tool, at most 100
// (the most recently met).
func (s *Server) ListedSchemaKeywords() []ListedKeywords {
	return s.mcpKeywords.List()
}

// noteListedKeywords notes the unknown keywords of sch, the schema the MCP
// server listed for the call's tool, for /status. The first call to meet
// them (per server, tool and keywords) logs them and its event says
// "schema: unknown_keywords" in policy_error; a server's schema is not the
// operator's to fix, so the call is checked by the rest of it as before.
func (c *call) noteListedKeywords(sch *policies.Schema) {
	if sch == nil {
		return
	}
	kw := sch.UnknownKeywords()
	if len(kw) == 0 {
		return
	}
	m := mcpOf(c)
	if !m.h.mcpKeywords.Note(m.server, m.tc.Name, kw) {
		return
	}
	c.s.log.Warn("mcp: the listed schema holds keywords its draft does not define; they check nothing (the rest of the schema checks the calls)",
		"server", m.server, "tool", m.tc.Name, "keywords", mcp.KeywordNames(kw))
	c.notePolicyError("schema: " + mcp.UnknownKeywordsReason)
}
