package pipe

import "github.com/toolgate/toolgate/sink"

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
