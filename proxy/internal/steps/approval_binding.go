package steps

import (
	"net"
	"net/url"

	"github.com/toolgate/toolgate/policies"
	"github.com/toolgate/toolgate/proxy/canonical"
	"github.com/toolgate/toolgate/proxy/internal/conf"
	"github.com/toolgate/toolgate/proxy/internal/pipe"
)

// What a grant binds (policies/approval.Binding): besides the tool, the
// arguments, agent and session, the call's canonical method and the URL it
// goes upstream to, in the canonical form routing matched (canonical.go):
// scheme, host, port (always written, so a grant for one port is not one
// for another), the canonical path as sent upstream, and the query with
// its escapes in canonical form (canonical.Query). A tool that forwards a body
// it does not read as its arguments has the body's bytes bound too. An MCP
// tools/call binds the route (the configured tool that names the server)
// and the server's URL, so an approval given on one route is never
// honoured on another.

// bindCall fills what an approval binds and shows of a call going
// upstream to target (its canonical URL).
func BindCall(c *pipe.Call, q *policies.ApprovalCall, method string, target *url.URL) {
	host, port := pipe.SplitHostPort(target)
	origin := target.Scheme + "://" + net.JoinHostPort(host, port)
	q.Method = method
	q.URL = origin + target.EscapedPath()
	if target.RawQuery != "" {
		q.URL += "?" + canonical.Query(target.RawQuery)
	}
	if c.MCP != nil {
		q.Route = c.Tool.Cfg.Name
		q.Destination = "MCP route " + c.Tool.Cfg.Name + " at " + origin + target.EscapedPath()
		return
	}
	q.Destination = origin + c.Event.PathTemplate
}

// needsApproval reports whether a tool's calls may need approval from a
// before anything about them is read: always when the approver cannot
// tell at the cost of a map lookup. The chain asks once, when it is
// compiled.
func needsApproval(a conf.Approver, tool string) bool {
	if a == nil {
		return false
	}
	n, ok := a.(conf.ApprovalNeeder)
	return !ok || n.Needs(&policies.ApprovalCall{Tool: tool})
}
