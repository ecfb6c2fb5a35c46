package policies

import (
	"fmt"
)

// Input is the document every policy sees as `input`, for Rego and WASM
// alike. It is built once per call, after schema validation and coercion.
// Policies must treat it as read-only.
type Input struct {
	// Tool is the matched tool's name; for a tools/call on an MCP route,
	// the MCP tool name (params.name).
	Tool string `json:"tool"`
	// Arguments are the call's arguments after validation and coercion:
	// numbers from JSON bodies are json.Number, numbers coerced from query
	// strings too.
	Arguments map[string]any `json:"arguments"`
	// Request describes the HTTP request.
	Request Request `json:"request"`
	// Caller identifies who made the call.
	Caller Caller `json:"caller"`
	// TraceID is the W3C trace id of the call.
	TraceID string `json:"trace_id"`
	// Protocol is what the call speaks: "http" for plain tool routes, "mcp"
	// for tools/call on an MCP route (then Tool is the MCP tool name and
	// Arguments are params.arguments).
	Protocol string `json:"protocol"`
	// Server is the MCP server a tools/call goes to: its host (and port)
	// and path, such as "mcp.example.com/mcp". "" for plain HTTP calls.
	Server string `json:"server"`
	// ToolAnnotations are the behaviour hints an MCP server listed for the
	// tool in tools/list: readOnlyHint, destructiveHint, idempotentHint and
	// openWorldHint, each a boolean, present only when the server gave it.
	// They are the server's claims, not facts. Empty for plain HTTP calls.
	ToolAnnotations map[string]any `json:"tool_annotations"`
	// Budget is the call's budget counters when the configuration has
	// budgets: limits (each budget that applies to the call by name:
	// calls, cost, limit_calls, limit_cost, window_ms, resets_in_ms, the
	// counts before this call) and repeats (identical calls in this
	// session in the loop window). Empty without budgets.
	Budget map[string]any `json:"budget"`
	// Answer is upstream's answer, for the policies a tool binds to its
	// answers (the tool's answer.policies); nil, and absent from the
	// document, when a policy decides a call before it goes upstream.
	Answer *Answer `json:"answer,omitempty"`
	// ArgsDepth is how deep Arguments nest (the arguments object itself
	// is 1) when whatever made them measured it as it read them (the
	// proxy's decoder does, from the body's bytes); 0 when not known.
	// CheckInputDepth trusts it instead of walking the arguments again.
	// It is not part of the document policies see.
	ArgsDepth int `json:"-"`
}

// Answer is upstream's answer as an answer policy sees it (input.answer).
type Answer struct {
	// Status is upstream's status code.
	Status int `json:"status"`
	// Headers holds only the allow-listed answer headers (content-type,
	// and those the tool's answer.policy_headers names), by lower-case
	// name; repeated headers are joined with ", ".
	Headers map[string]string `json:"headers"`
	// Body is the answer's body: the parsed JSON value (numbers are
	// json.Number), or the text of a text/* answer. Every member name of a
	// JSON body is in lower case (Unicode case folding), as a reader that
	// matches names regardless of case reads them; JSON pointers a policy
	// returns in redact use those names.
	Body any `json:"body"`
}

// Request is the part of the HTTP request a policy may see.
type Request struct {
	// Method is the HTTP method, upper case.
	Method string `json:"method"`
	// Host is the upstream host, with the port when one was given.
	Host string `json:"host"`
	// Path is the request path as sent (escaped).
	Path string `json:"path"`
	// PathVars are the path template's variables.
	PathVars map[string]string `json:"path_vars"`
	// Query is the decoded query string.
	Query map[string][]string `json:"query"`
	// Headers holds only the allow-listed request headers, by lower-case
	// name; repeated headers are joined with ", ".
	Headers map[string]string `json:"headers"`
}

// Caller identifies the calling agent and its session, from the headers
// the configuration names.
type Caller struct {
	Agent   string `json:"agent"`
	Session string `json:"session"`
}

// errTooDeep is the error of a call whose arguments nest deeper than
// MaxInputDepth, on every engine: the wasm engine's AppendJSON refuses
// them too.
var errTooDeep = fmt.Errorf("arguments nested deeper than %d", MaxInputDepth)

// CheckInputDepth is CheckDepth of in's arguments, from their measured
// depth (in.ArgsDepth) when known.
func CheckInputDepth(in *Input) error {
	if in.ArgsDepth > 0 {
		if in.ArgsDepth > MaxInputDepth {
			return errTooDeep
		}
		return nil
	}
	return CheckDepth(in.Arguments)
}

// CheckDepth refuses arguments nested deeper than MaxInputDepth (counting
// the arguments object itself as 1), before an engine sees them.
func CheckDepth(args map[string]any) error {
	if !shallow(args, 1) {
		return errTooDeep
	}
	return nil
}

func shallow(v any, depth int) bool {
	switch x := v.(type) {
	case map[string]any:
		if depth > MaxInputDepth {
			return false
		}
		for _, e := range x {
			if !shallow(e, depth+1) {
				return false
			}
		}
	case []any:
		if depth > MaxInputDepth {
			return false
		}
		for _, e := range x {
			if !shallow(e, depth+1) {
				return false
			}
		}
	}
	return true
}

// Budgets is the call's budget counters, never nil.
func (in *Input) Budgets() map[string]any {
	if in.Budget == nil {
		return map[string]any{}
	}
	return in.Budget
}

// Annotations is the tool's annotations, never nil, so that a policy
// reading a hint that was not given finds it undefined, not the object.
func (in *Input) Annotations() map[string]any {
	if in.ToolAnnotations == nil {
		return map[string]any{}
	}
	return in.ToolAnnotations
}
