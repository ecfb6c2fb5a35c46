package proxy

import "github.com/toolgate/toolgate/sink"

// spanFacts are what the call's span says beyond its event (see
// sink.SpanFacts): the caller's trace context, the tool's name only when
// it names a configured tool or one its MCP server listed, the server's
// JSON-RPC error, and upstream's HTTP version. Built only when a Tracer
// is set.
func (c *call) spanFacts() sink.SpanFacts {
	f := sink.SpanFacts{Traceparent: c.traceparent, HTTPVersion: httpVersion(c.upProto)}
	switch {
	case c.mcp != nil:
		c.mcp.spanFacts(&f)
	case c.t != nil:
		f.KnownTool = c.t.cfg.Name
	}
	return f
}

// spanFacts fills in what an MCP call's span says: the tools/call's tool
// when the server listed it (with its description) or the route
// configures it by name, and the JSON-RPC error that answered the
// request.
func (m *mcpCall) spanFacts(f *sink.SpanFacts) {
	if name := m.c.ev.Tool; name != "" && m.srv != nil {
		desc, listed := m.srv.Described(name)
		if listed || m.route.tools[name] != nil {
			f.KnownTool, f.ToolDescription = name, desc
		}
	}
	if resp, _ := m.ans.Response(); resp != nil && resp.Error != nil {
		f.RPCError, f.RPCErrorCode = true, resp.Error.Code
	} else if code, ok := m.ans.RPCError(); ok {
		f.RPCError, f.RPCErrorCode = true, code
	}
}

// httpVersion is network.protocol.version of an HTTP response's Proto:
// "1.1", "2"; "" when there was no response.
func httpVersion(proto string) string {
	switch proto {
	case "":
		return ""
	case "HTTP/1.1":
		return "1.1"
	case "HTTP/2.0":
		return "2"
	case "HTTP/1.0":
		return "1.0"
	case "HTTP/3.0":
		return "3"
	}
	return ""
}
