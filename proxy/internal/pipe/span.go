package pipe

import (
	"github.com/toolgate/toolgate/sink"
)

// Tracer sees every call the pipeline finishes, after its event is
// recorded, with what its span says beyond the event (sink.SpanFacts):
// the caller's W3C trace context (the request's traceparent header, or an
// MCP request's params._meta.traceparent when it holds a valid one, the
// one the event's TraceID came from), the tool's name when it names
// something known, the server's JSON-RPC error. TraceCall must not keep
// ev, and must return without waiting on the network. sink/tracing's
// Exporter satisfies it.
//
// toolgate forwards the caller's traceparent unchanged: upstream's spans
// are children of the caller's span, siblings of the call's span (see
// docs/tracing.md).
type Tracer interface {
	TraceCall(ev *sink.Event, f sink.SpanFacts)
}

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
