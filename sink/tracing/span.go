package tracing

import (
	"encoding/json"
	"net"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/toolgate/toolgate/bucketing"
	"github.com/toolgate/toolgate/internal/textcut"
	"github.com/toolgate/toolgate/sink"
)

const codesError = codes.Error

// The attribute keys a span carries. The gen_ai.*, mcp.*, jsonrpc.*,
// rpc.*, network.*, error.type, server.*, http.* and url.* keys are
// OpenTelemetry's semantic conventions (GenAI execute_tool span, MCP
// client span, HTTP client span); toolgate.* are toolgate's own, named as
// the event's fields.
const (
	keyOperation    = "gen_ai.operation.name"
	keyToolName     = "gen_ai.tool.name"
	keyToolDesc     = "gen_ai.tool.description"
	keyMCPMethod    = "mcp.method.name"
	keyMCPProtocol  = "mcp.protocol.version"
	keyRPCID        = "jsonrpc.request.id"
	keyRPCStatus    = "rpc.response.status_code"
	keyErrorType    = "error.type"
	keyTransport    = "network.transport"
	keyProtoName    = "network.protocol.name"
	keyProtoVersion = "network.protocol.version"
	keyServerAddr   = "server.address"
	keyServerPort   = "server.port"
	keyHTTPMethod   = "http.request.method"
	keyHTTPStatus   = "http.response.status_code"
	keyURLTemplate  = "url.template"
	keyReqBytes     = "http.request.body.size"
	keyRespBytes    = "http.response.body.size"
	keyCode         = "toolgate.error.code"
	keyClass        = "toolgate.error.class"
	keyReason       = "toolgate.reason"
	keyRefused      = "toolgate.refused"
	keyInspected    = "toolgate.inspected"
	keyEnvelope     = "toolgate.envelope"
	keyListener     = "toolgate.listener"
	keyEventID      = "toolgate.event_id"
	keyAgent        = "toolgate.agent"
	keyConfigVer    = "toolgate.config_version"
	keyPolicyVer    = "toolgate.policy_version"
	keyRetryAfter   = "toolgate.retry_after_ms"
	keyUpstreamUS   = "toolgate.upstream_us"
	keyMCPServer    = "toolgate.mcp.server"
	keyMCPOutcome   = "toolgate.mcp.outcome"
	keyStep         = "toolgate.step"
	keyDecision     = "toolgate.decision"
	keyViolations   = "toolgate.violation_count"
	keyPolicyError  = "toolgate.policy_error"
	keyAnswer       = "toolgate.answer"
	keyFindings     = "toolgate.answer_findings"
	keyRedactions   = "toolgate.redactions"
	operationTool   = "execute_tool"
	methodToolsCall = "tools/call"
	// other stands for a method toolgate does not know, as the HTTP
	// conventions' http.request.method does: the caller's own word must
	// not name a span.
	other = "_OTHER"
	// eventDecision names the span events of check decisions.
	eventDecision = "toolgate.decision"
	// maxPaths bounds toolgate.answer_findings.
	maxPaths = 32
)

// spanName is the span's name, never from the caller's own text: "tools/call
// NAME" for an MCP tools/call of a tool the server listed (the MCP client
// span's "{mcp.method.name} {target}"), "tools/call" for one it did not,
// the method for other MCP requests ("_OTHER" for one the conventions do
// not name), "execute_tool NAME" for a plain HTTP tool (the GenAI
// execute_tool span's), and the HTTP method for a call no tool matched.
func spanName(ev *sink.Event, f *sink.SpanFacts) string {
	switch {
	case ev.RPCMethod == methodToolsCall && f.KnownTool != "":
		return methodToolsCall + " " + f.KnownTool
	case ev.RPCMethod == "batch":
		return "batch"
	case ev.RPCMethod != "":
		return mcpMethod(ev.RPCMethod)
	case ev.MCPServer != "":
		return httpMethod(ev.Method)
	case f.KnownTool != "":
		return operationTool + " " + f.KnownTool
	}
	return httpMethod(ev.Method)
}

// isToolCall reports whether the call executed (or tried to execute) a
// tool: a plain HTTP tool's call, or an MCP tools/call.
func isToolCall(ev *sink.Event) bool {
	if ev.MCPServer != "" {
		return ev.RPCMethod == methodToolsCall
	}
	return ev.Tool != ""
}

// attributes are the span's attributes: names, codes, sizes and counts
// from the event and the facts; never an argument value or key, a header
// value, a detail sentence (a policy's message may quote an argument), a
// JSON-RPC error's message, or a name the caller made up.
func attributes(ev *sink.Event, f *sink.SpanFacts) []attribute.KeyValue {
	a := make([]attribute.KeyValue, 0, 32)
	if isToolCall(ev) {
		a = append(a, attribute.String(keyOperation, operationTool))
	}
	if f.KnownTool != "" {
		a = append(a, attribute.String(keyToolName, f.KnownTool))
		if f.ToolDescription != "" {
			a = append(a, attribute.String(keyToolDesc, textcut.Cut(f.ToolDescription, sink.MaxToolDescription)))
		}
	}
	if ev.MCPServer != "" {
		a = append(a, attribute.String(keyMCPServer, ev.MCPServer))
		if ev.RPCMethod != "" && ev.RPCMethod != "batch" {
			a = append(a, attribute.String(keyMCPMethod, mcpMethod(ev.RPCMethod)))
		}
		if id, ok := rpcID(ev.RPCID); ok {
			a = append(a, attribute.String(keyRPCID, id))
		}
		if isVersion(ev.MCPProtocol) {
			a = append(a, attribute.String(keyMCPProtocol, ev.MCPProtocol))
		}
		if ev.Outcome != "" {
			a = append(a, attribute.String(keyMCPOutcome, ev.Outcome))
		}
		// Streamable HTTP: HTTP over TCP.
		a = append(a, attribute.String(keyTransport, "tcp"), attribute.String(keyProtoName, "http"))
	}
	if f.HTTPVersion != "" {
		a = append(a, attribute.String(keyProtoVersion, f.HTTPVersion))
	}
	if f.RPCError {
		a = append(a, attribute.String(keyRPCStatus, strconv.FormatInt(f.RPCErrorCode, 10)))
	}
	if host, port, err := net.SplitHostPort(ev.Host); err == nil {
		a = append(a, attribute.String(keyServerAddr, host))
		if p, err := strconv.Atoi(port); err == nil {
			a = append(a, attribute.Int(keyServerPort, p))
		}
	} else if ev.Host != "" {
		a = append(a, attribute.String(keyServerAddr, ev.Host))
	}
	a = append(a, attribute.String(keyHTTPMethod, httpMethod(ev.Method)))
	if ev.UpstreamStatus > 0 {
		a = append(a, attribute.Int(keyHTTPStatus, ev.UpstreamStatus))
	}
	if ev.PathTemplate != "" {
		a = append(a, attribute.String(keyURLTemplate, ev.PathTemplate))
	}
	a = append(a,
		attribute.Int64(keyReqBytes, ev.RequestBytes),
		attribute.Int64(keyRespBytes, ev.ResponseBytes),
		attribute.Bool(keyRefused, ev.Refused),
		attribute.Bool(keyInspected, ev.Inspected),
		attribute.Bool(keyEnvelope, ev.Envelope),
		attribute.String(keyListener, ev.Listener),
		attribute.String(keyEventID, ev.EventID),
		attribute.String(keyConfigVer, ev.ConfigVersion),
		attribute.String(keyPolicyVer, ev.PolicyVersion),
	)
	if ev.Agent != "" {
		a = append(a, attribute.String(keyAgent, ev.Agent))
	}
	if ev.ErrorCode != "" {
		a = append(a, attribute.String(keyCode, ev.ErrorCode), attribute.String(keyClass, ev.ErrorClass))
	}
	if ev.Reason != "" {
		a = append(a, attribute.String(keyReason, ev.Reason))
	}
	if et := errorType(ev, f); et != "" {
		a = append(a, attribute.String(keyErrorType, et))
	}
	if len(ev.ViolationPaths) > 0 {
		// Their count, not the paths: an unknown argument's path is the
		// caller's key name. The event (toolgate.event_id) has them.
		a = append(a, attribute.Int(keyViolations, len(ev.ViolationPaths)))
	}
	if ev.RetryAfterMS > 0 {
		a = append(a, attribute.Int64(keyRetryAfter, ev.RetryAfterMS))
	}
	if ev.UpstreamUS > 0 {
		a = append(a, attribute.Int64(keyUpstreamUS, ev.UpstreamUS))
	}
	if ev.Answer != "" {
		a = append(a, attribute.String(keyAnswer, ev.Answer))
	}
	if len(ev.AnswerFindings) > 0 {
		a = append(a, attribute.StringSlice(keyFindings, ev.AnswerFindings[:min(len(ev.AnswerFindings), maxPaths)]))
	}
	if ev.Redactions > 0 {
		a = append(a, attribute.Int64(keyRedactions, ev.Redactions))
	}
	return a
}

// failed reports whether the span's status is ERROR: the call failed (a
// caller that went away is not a failure), or the server answered with a
// JSON-RPC error.
func failed(ev *sink.Event, f *sink.SpanFacts) bool {
	return f.RPCError || (!ev.OK && ev.ErrorCode != "")
}

// errorType is error.type of a failed call: the JSON-RPC error's code
// when the server answered with one (as the MCP conventions ask), else
// toolgate's reason (status_429, unknown_field, policy_denied, timeout,
// tool_error as the MCP conventions name an isError result), else its
// code; "" when the call did not fail.
func errorType(ev *sink.Event, f *sink.SpanFacts) string {
	switch {
	case f.RPCError:
		return strconv.FormatInt(f.RPCErrorCode, 10)
	case ev.OK || ev.ErrorCode == "":
		return ""
	case ev.Reason != "":
		return ev.Reason
	}
	return ev.ErrorCode
}

// statusDescription is a failed span's status description: for a
// JSON-RPC error, its code and the JSON-RPC specification's name for it
// (never the server's message, which may quote an argument); else
// "{code}: {reason}".
func statusDescription(ev *sink.Event, f *sink.SpanFacts) string {
	if f.RPCError {
		return "JSON-RPC error " + strconv.FormatInt(f.RPCErrorCode, 10) + rpcErrorName(f.RPCErrorCode)
	}
	return ev.ErrorCode + ": " + ev.Reason
}

// rpcErrorName is ": " and the name of a JSON-RPC error code the JSON-RPC
// and MCP specifications define, "" for others.
func rpcErrorName(code int64) string {
	switch code {
	case -32700:
		return ": Parse error"
	case -32600:
		return ": Invalid Request"
	case -32601:
		return ": Method not found"
	case -32602:
		return ": Invalid params"
	case -32603:
		return ": Internal error"
	case -32002:
		return ": Resource not found"
	case -32042:
		return ": URL elicitation required"
	}
	return ""
}

// rpcID is jsonrpc.request.id from the event's JSON text of the id: a
// string id without its quote marks (so it matches the server's span), a
// number as written; ok is false for a notification (no id) and a null
// id, which the conventions leave out.
func rpcID(text string) (string, bool) {
	switch {
	case text == "" || text == "null":
		return "", false
	case text[0] == '"':
		var s string
		if json.Unmarshal([]byte(text), &s) != nil {
			return "", false
		}
		return s, true
	}
	return text, true
}

// mcpMethods are the MCP methods the conventions (mcp.method.name's
// well-known values) and the protocol's eras name; another is "_OTHER".
var mcpMethods = map[string]bool{
	"completion/complete": true, "elicitation/create": true, "initialize": true, "logging/setLevel": true,
	"notifications/cancelled": true, "notifications/initialized": true, "notifications/message": true,
	"notifications/progress": true, "notifications/prompts/list_changed": true, "notifications/resources/list_changed": true,
	"notifications/resources/updated": true, "notifications/roots/list_changed": true, "notifications/tools/list_changed": true,
	"notifications/elicitation/complete": true, "notifications/tasks/status": true,
	"ping": true, "prompts/get": true, "prompts/list": true, "resources/list": true, "resources/read": true,
	"resources/subscribe": true, "resources/templates/list": true, "resources/unsubscribe": true, "roots/list": true,
	"sampling/createMessage": true, "tools/call": true, "tools/list": true,
	"tasks/get": true, "tasks/result": true, "tasks/list": true, "tasks/cancel": true, "server/discover": true,
}

// mcpMethod is mcp.method.name of a JSON-RPC method: itself when MCP
// names it, else "_OTHER".
func mcpMethod(m string) string {
	if mcpMethods[m] {
		return m
	}
	return other
}

// httpMethod is http.request.method: the method when HTTP defines it,
// else "_OTHER" (the HTTP conventions' rule).
func httpMethod(m string) string {
	switch m {
	case "GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH", "QUERY":
		return m
	}
	return other
}

// isVersion reports whether an MCP protocol version has the protocol's
// form (YYYY-MM-DD): the caller's header is exported only then.
func isVersion(v string) bool {
	if len(v) != 10 || v[4] != '-' || v[7] != '-' {
		return false
	}
	for i := range len(v) {
		if i != 4 && i != 7 && (v[i] < '0' || v[i] > '9') {
			return false
		}
	}
	return true
}

// addDecisions adds the checks' decisions as span events: the step that
// refused the call, dry-run policies that would have, and policies that
// failed open. end is when the call ended.
func addDecisions(span trace.Span, ev *sink.Event, end time.Time) {
	checked := end.Add(-time.Duration(ev.UpstreamUS) * time.Microsecond) // the checks end where dispatch starts
	if ev.Refused {
		span.AddEvent(eventDecision, trace.WithTimestamp(end), trace.WithAttributes(
			attribute.String(keyStep, stepOf(ev.Reason)),
			attribute.String(keyDecision, "deny"),
			attribute.String(keyCode, ev.ErrorCode),
			attribute.String(keyReason, ev.Reason),
			attribute.Int(keyViolations, len(ev.ViolationPaths)),
		))
	}
	if ev.DryRunDenied {
		span.AddEvent(eventDecision, trace.WithTimestamp(checked), trace.WithAttributes(
			attribute.String(keyStep, "policy"),
			attribute.String(keyDecision, "dry_run_deny"),
			attribute.Int(keyViolations, len(ev.DryRunViolations)),
		))
	}
	if ev.PolicyError != "" {
		// Policy names and their failure (policy_error, policy_timeout).
		span.AddEvent(eventDecision, trace.WithTimestamp(checked), trace.WithAttributes(
			attribute.String(keyStep, "policy"),
			attribute.String(keyDecision, "failed_open"),
			attribute.String(keyPolicyError, ev.PolicyError),
		))
	}
}

// stepOf names the check that refused a call for its reason: allowlist,
// schema, policy, or request (limits, media types, canonical form).
func stepOf(reason string) string {
	switch reason {
	case bucketing.ReasonPolicyDenied, bucketing.ReasonPolicyError, bucketing.ReasonPolicyTimeout, "unchecked":
		return "policy"
	case bucketing.ReasonNotAllowlist, bucketing.ReasonOriginMismatch, "host_not_local":
		return "allowlist"
	case bucketing.ReasonSchema, bucketing.ReasonUnknownField, bucketing.ReasonMissingField, bucketing.ReasonWrongType, "unknown_tool":
		return "schema"
	}
	return "request"
}
