package pipe

import "github.com/toolgate/toolgate/sink"

// spanFacts are what the call's span says beyond its event (see
// sink.SpanFacts): the caller's trace context, the tool's name only when
// it names a configured tool or one its MCP server listed, the server's
// JSON-RPC error, and upstream's HTTP version. Built only when a Tracer
// is set.
func (c *Call) spanFacts() sink.SpanFacts {
	f := sink.SpanFacts{Traceparent: c.Traceparent, HTTPVersion: httpVersion(c.upProto)}
	switch {
	case c.MCP != nil:
		c.MCP.SpanFacts(&f)
	case c.Tool != nil:
		f.KnownTool = c.Tool.Cfg.Name
	}
	return f
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
