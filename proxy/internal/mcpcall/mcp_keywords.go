package mcpcall

import (
	"github.com/toolgate/toolgate/policies"
	"github.com/toolgate/toolgate/proxy/internal/pipe"
	"github.com/toolgate/toolgate/proxy/mcp"
)

// ListedKeywords is a tool whose listed inputSchema holds keywords its
// draft does not define, as /status shows it.
type ListedKeywords = mcp.ListedKeywords

// noteListedKeywords notes the unknown keywords of sch, the schema the MCP
// server listed for the call's tool, for /status. The first call to meet
// them (per server, tool and keywords) logs them and its event says
// "schema: unknown_keywords" in policy_error; a server's schema is not the
// operator's to fix, so the call is checked by the rest of it as before.
func noteListedKeywords(c *pipe.Call, sch *policies.Schema) {
	if sch == nil {
		return
	}
	kw := sch.UnknownKeywords()
	if len(kw) == 0 {
		return
	}
	m := MCPOf(c)
	if !m.h.MCPKeywords.Note(m.Server, m.tc.Name, kw) {
		return
	}
	c.Host.Log.Warn("mcp: the listed schema holds keywords its draft does not define; they check nothing (the rest of the schema checks the calls)",
		"server", m.Server, "tool", m.tc.Name, "keywords", mcp.KeywordNames(kw))
	c.NotePolicyError("schema: " + mcp.UnknownKeywordsReason)
}
