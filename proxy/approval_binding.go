package proxy

import (
	"net"
	"net/url"
	"strings"

	"github.com/toolgate/toolgate/policies"
)

// What a grant binds (policies/approval.Binding): besides the tool, the
// arguments, agent and session, the call's canonical method and the URL it
// goes upstream to, in the canonical form routing matched (canonical.go):
// scheme, host, port (always written, so a grant for one port is not one
// for another), the canonical path as sent upstream, and the query with
// its escapes in canonical form (canonQuery). A tool that forwards a body
// it does not read as its arguments has the body's bytes bound too. An MCP
// tools/call binds the route (the configured tool that names the server)
// and the server's URL, so an approval given on one route is never
// honoured on another.

// bindCall fills what an approval binds and shows of a call going
// upstream to target (its canonical URL).
func (c *call) bindCall(q *policies.ApprovalCall, method string, target *url.URL) {
	host, port := splitHostPort(target)
	origin := target.Scheme + "://" + net.JoinHostPort(host, port)
	q.Method = method
	q.URL = origin + target.EscapedPath()
	if target.RawQuery != "" {
		q.URL += "?" + canonQuery(target.RawQuery)
	}
	if c.mcp != nil {
		q.Route = c.t.cfg.Name
		q.Destination = "MCP route " + c.t.cfg.Name + " at " + origin + target.EscapedPath()
		return
	}
	q.Destination = origin + c.ev.PathTemplate
}

// canonQuery writes a query's escapes in canonical form: a
// percent-escape of an unreserved character is decoded (%61 is a), others
// are written in upper-case hex. Nothing else changes: the order of
// parameters, '+', ';', empty parameters, repeated names and broken
// escapes stay as written, because upstreams read them differently (Go
// splits on '&' only and takes the first of a repeated name, Flask the
// first, PHP the last; '+' is a space to a form reader and a plus to
// others). A query with a broken escape is bound exactly as written. Two
// queries with one canonical form read alike to every upstream; two that
// some upstream could read differently keep two forms, so a grant for one
// is never a grant for the other.
func canonQuery(raw string) string {
	if !strings.Contains(raw, "%") {
		return raw
	}
	for i := 0; i < len(raw); i++ {
		if raw[i] == '%' && (i+2 >= len(raw) || !isHexDigit(raw[i+1]) || !isHexDigit(raw[i+2])) {
			// A broken escape: decoding its neighbours could make one
			// ("%7%30" would read "%70"), so the query is bound as written.
			return raw
		}
	}
	var b strings.Builder
	b.Grow(len(raw))
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		if c != '%' {
			b.WriteByte(c)
			continue
		}
		d := unhex(raw[i+1])<<4 | unhex(raw[i+2])
		if unreserved(d) {
			b.WriteByte(d)
		} else {
			b.WriteByte('%')
			b.WriteByte(upperHex[d>>4])
			b.WriteByte(upperHex[d&15])
		}
		i += 2
	}
	return b.String()
}

// needsApproval reports whether a tool's calls may need approval before
// anything about them is read: always when the approver cannot tell at
// the cost of a map lookup.
func (s *Server) needsApproval(tool string) bool {
	if s.approver == nil {
		return false
	}
	n, ok := s.approver.(approvalNeeder)
	return !ok || n.Needs(&policies.ApprovalCall{Tool: tool})
}
