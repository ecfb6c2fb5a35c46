package mcpcall

import (
	"maps"
	"slices"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/toolgate/toolgate/policies"
	"github.com/toolgate/toolgate/proxy/internal/conf"
	"github.com/toolgate/toolgate/proxy/internal/pipe"
	"github.com/toolgate/toolgate/proxy/mcp"
)

// UnusableSchema is a tool whose listed inputSchema could not check its
// calls, as /status shows it.
type UnusableSchema = mcp.UnusableSchema

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
	m := ExchangeOf(c)
	if !m.h.MCPKeywords.Note(m.Server, m.tc.Name, kw) {
		return
	}
	c.Host.Log.Warn("mcp: the listed schema holds keywords its draft does not define; they check nothing (the rest of the schema checks the calls)",
		"server", m.Server, "tool", m.tc.Name, "keywords", mcp.KeywordNames(kw))
	c.NotePolicyError("schema: " + mcp.UnknownKeywordsReason)
}

// Names of MCP tools that the configuration gives (a route's mcp.tools,
// and the names rules outside this section give: Snapshot.ServerToolNames)
// can only be checked when a server lists its tools. Each complete
// tools/list answer a route sees is checked against them: a name no server
// lists is logged (a warning, once, and again when it is listed), counted
// in toolgate_proxy_mcp_unlisted_names, and shown by UnlistedNames (the
// sidecar's /status). It is not refused: a server may list a tool later,
// and its calls stay checked either way.

// UnlistedName is a configured MCP tool name that the servers which listed
// their tools do not list.
type UnlistedName = mcp.UnlistedName

// NewNameWatch returns the watch of a snapshot; nil when it watches
// nothing.
func NewNameWatch(cfg *conf.Config, shared []string) *mcp.NameWatch {
	own, field := map[string][]string{}, map[string]string{}
	routes := 0
	for i, t := range cfg.Compiled {
		if t.MCP == nil {
			continue
		}
		routes++
		field[t.Cfg.Name] = "tools[" + strconv.Itoa(i) + "].mcp.tools"
		own[t.Cfg.Name] = slices.Sorted(maps.Keys(t.MCP.Tools))
	}
	if routes == 0 {
		return nil
	}
	return mcp.NewNameWatch(shared, own, field)
}

// UnlistedDesc describes toolgate_proxy_mcp_unlisted_names.
var UnlistedDesc = prometheus.NewDesc("toolgate_proxy_mcp_unlisted_names",
	"Configured MCP tool names (a route's mcp.tools, approvals.tools) that no server listing its tools lists.", nil, nil)
