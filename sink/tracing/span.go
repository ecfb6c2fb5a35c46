package tracing

import (
	"net"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/toolgate/toolgate/bucketing"
	"github.com/toolgate/toolgate/sink"
)

const codesError = codes.Error

// The attribute keys a span carries. The gen_ai.*, mcp.*, jsonrpc.*,
// error.type, server.*, http.* and url.* keys are OpenTelemetry's
// semantic conventions (GenAI execute_tool span, MCP client span, HTTP
// client span); toolgate.* are toolgate's own, named as the event's
// fields.
const (
	keyOperation    = "gen_ai.operation.name"
	keyToolName     = "gen_ai.tool.name"
	keyMCPMethod    = "mcp.method.name"
	keyMCPProtocol  = "mcp.protocol.version"
	keyRPCID        = "jsonrpc.request.id"
	keyErrorType    = "error.type"
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
	keyPaths        = "toolgate.violation_paths"
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
	// eventDecision names the span events of check decisions.
	eventDecision = "toolgate.decision"
	// maxPaths bounds toolgate.violation_paths (and
	// toolgate.answer_findings).
	maxPaths = 32
)

// spanName is the span's name: "tools/call NAME" for an MCP tools/call
// (the MCP client span's "{mcp.method.name} {target}"), the method for
// other MCP requests, "execute_tool NAME" for a plain HTTP tool (the GenAI
// execute_tool span's), and the HTTP method for a call no tool matched.
func spanName(ev *sink.Event) string {
	switch {
	case ev.RPCMethod == methodToolsCall && ev.Tool != "":
		return methodToolsCall + " " + ev.Tool
	case ev.RPCMethod != "":
		return ev.RPCMethod
	case ev.MCPServer != "":
		return ev.Method
	case ev.Tool != "":
		return operationTool + " " + ev.Tool
	}
	return ev.Method
}

// isToolCall reports whether the call executed (or tried to execute) a
// tool: a plain HTTP tool's call, or an MCP tools/call.
func isToolCall(ev *sink.Event) bool {
	if ev.MCPServer != "" {
		return ev.RPCMethod == methodToolsCall
	}
	return ev.Tool != ""
}

// attributes are the span's attributes: names, codes, sizes and paths from
// the event; never an argument value, a header value or a detail sentence
// (a policy's message may quote an argument).
func attributes(ev *sink.Event) []attribute.KeyValue {
	a := make([]attribute.KeyValue, 0, 24)
	if isToolCall(ev) {
		a = append(a, attribute.String(keyOperation, operationTool))
	}
	if ev.Tool != "" {
		a = append(a, attribute.String(keyToolName, ev.Tool))
	}
	if ev.MCPServer != "" {
		a = append(a, attribute.String(keyMCPServer, ev.MCPServer))
		if ev.RPCMethod != "" && ev.RPCMethod != "batch" {
			a = append(a, attribute.String(keyMCPMethod, ev.RPCMethod))
		}
		if ev.RPCID != "" {
			a = append(a, attribute.String(keyRPCID, ev.RPCID))
		}
		if ev.MCPProtocol != "" {
			a = append(a, attribute.String(keyMCPProtocol, ev.MCPProtocol))
		}
		if ev.Outcome != "" {
			a = append(a, attribute.String(keyMCPOutcome, ev.Outcome))
		}
	}
	if host, port, err := net.SplitHostPort(ev.Host); err == nil {
		a = append(a, attribute.String(keyServerAddr, host))
		if p, err := strconv.Atoi(port); err == nil {
			a = append(a, attribute.Int(keyServerPort, p))
		}
	} else if ev.Host != "" {
		a = append(a, attribute.String(keyServerAddr, ev.Host))
	}
	a = append(a, attribute.String(keyHTTPMethod, ev.Method))
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
	if !ev.OK && ev.ErrorCode != "" {
		a = append(a, attribute.String(keyErrorType, errorType(ev)))
	}
	if len(ev.ViolationPaths) > 0 {
		a = append(a, attribute.StringSlice(keyPaths, ev.ViolationPaths[:min(len(ev.ViolationPaths), maxPaths)]))
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

// errorType is error.type of a failed call: toolgate's reason (status_429,
// unknown_field, policy_denied, timeout, tool_error as the MCP convention
// names an isError result), else its code.
func errorType(ev *sink.Event) string {
	if ev.Reason != "" {
		return ev.Reason
	}
	return ev.ErrorCode
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
