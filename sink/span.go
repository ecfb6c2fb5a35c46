package sink

// SpanFacts are what a call's trace span says beyond its Event: what
// toolgate knew of the call when it ended and does not record in the
// event. The pipeline hands them to a tracer with the finished event;
// they are never written to a store.
type SpanFacts struct {
	// Traceparent is the caller's W3C trace context: the request's
	// traceparent header, or an MCP request's params._meta.traceparent
	// when it holds a valid one; "" when the caller sent none.
	Traceparent string
	// KnownTool is the tool's name when it names something toolgate
	// knows: the configured tool a plain call matched, or a tool the MCP
	// server listed (or the route configures by name). "" otherwise: an
	// MCP tools/call of a tool nobody listed carries only the caller's
	// text, which must not name a span.
	KnownTool string
	// ToolDescription is the MCP server's listed description of KnownTool,
	// cut to at most MaxToolDescription bytes; "" when it lists none.
	ToolDescription string
	// RPCError is true when the MCP server answered the request (a single
	// JSON-RPC request, any method) with a JSON-RPC error; RPCErrorCode is
	// the error's code.
	RPCError     bool
	RPCErrorCode int64
	// HTTPVersion is the HTTP version of upstream's answer ("1.0", "1.1",
	// "2", "3"); "" when upstream did not answer.
	HTTPVersion string
}

// MaxToolDescription bounds SpanFacts.ToolDescription, in bytes.
const MaxToolDescription = 256
