package policies

import (
	"fmt"

	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/toolgate/toolgate/policies/internal/irvm"
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

// toValue turns the input into plain JSON-shaped Go values; wrapped in
// ast.LazyObject, only the parts a policy reads are converted.
func (in *Input) toValue() map[string]any {
	pv := make(map[string]any, len(in.Request.PathVars))
	for k, v := range in.Request.PathVars {
		pv[k] = v
	}
	q := make(map[string]any, len(in.Request.Query))
	for k, vs := range in.Request.Query {
		arr := make([]any, len(vs))
		for i, v := range vs {
			arr[i] = v
		}
		q[k] = arr
	}
	h := make(map[string]any, len(in.Request.Headers))
	for k, v := range in.Request.Headers {
		h[k] = v
	}
	args := in.Arguments
	if args == nil {
		args = map[string]any{}
	}
	return map[string]any{
		"tool":      in.Tool,
		"arguments": args,
		"request": map[string]any{
			"method":    in.Request.Method,
			"host":      in.Request.Host,
			"path":      in.Request.Path,
			"path_vars": pv,
			"query":     q,
			"headers":   h,
		},
		"caller":           map[string]any{"agent": in.Caller.Agent, "session": in.Caller.Session},
		"trace_id":         in.TraceID,
		"protocol":         in.Protocol,
		"server":           in.Server,
		"tool_annotations": annotationsOrEmpty(in.ToolAnnotations),
	}
}

// annotationsOrEmpty is the tool's annotations, never nil, so a policy
// reading a hint that was not given finds it undefined, not the object.
func annotationsOrEmpty(a map[string]any) map[string]any {
	if a == nil {
		return map[string]any{}
	}
	return a
}

// document is the input as the compiled engine reads it
// (irvm.Document): field by field, each value converted when a policy
// reads it, for a policy that only dots into its input; whole otherwise.
// A policy that reads three arguments gets those three converted, not the
// call's whole body.
type document struct{ in *Input }

var _ irvm.Document = document{}

// Value is the whole input.
func (d document) Value() ast.Value {
	obj := ast.NewObjectWithCapacity(len(inputKeys))
	for _, k := range inputKeys {
		if v, ok := d.Field(k); ok {
			obj.Insert(ast.InternedTerm(k), ast.NewTerm(v))
		}
	}
	return obj
}

// Field is input[key], converted.
func (d document) Field(key string) (ast.Value, bool) {
	in := d.in
	var fields []string
	switch key {
	case "tool":
		return ast.String(in.Tool), true
	case "arguments":
		if in.Arguments == nil {
			return ast.NewObject(), true
		}
		v, err := ast.InterfaceToValue(in.Arguments)
		return v, err == nil
	case "request":
		fields = requestKeys
	case "caller":
		fields = callerKeys
	case "trace_id":
		return ast.String(in.TraceID), true
	case "protocol":
		return ast.String(in.Protocol), true
	case "server":
		return ast.String(in.Server), true
	case "tool_annotations":
		v, err := ast.InterfaceToValue(annotationsOrEmpty(in.ToolAnnotations))
		return v, err == nil
	default:
		return nil, false
	}
	obj := ast.NewObjectWithCapacity(len(fields))
	for _, f := range fields {
		if v, ok := d.Subfield(key, f); ok {
			obj.Insert(ast.StringTerm(f), ast.NewTerm(v))
		}
	}
	return obj, true
}

// Subfield is input[key][field], converted.
func (d document) Subfield(key, field string) (ast.Value, bool) {
	in := d.in
	switch key {
	case "arguments":
		a, ok := in.Arguments[field]
		if !ok {
			return nil, false
		}
		v, err := ast.InterfaceToValue(a)
		return v, err == nil
	case "request":
		r := &in.Request
		switch field {
		case "method":
			return ast.String(r.Method), true
		case "host":
			return ast.String(r.Host), true
		case "path":
			return ast.String(r.Path), true
		case "path_vars":
			return stringsObject(r.PathVars), true
		case "query":
			q := ast.NewObjectWithCapacity(len(r.Query))
			for name, vs := range r.Query {
				arr := make([]*ast.Term, len(vs))
				for i, v := range vs {
					arr[i] = ast.StringTerm(v)
				}
				q.Insert(ast.StringTerm(name), ast.ArrayTerm(arr...))
			}
			return q, true
		case "headers":
			return stringsObject(r.Headers), true
		}
	case "caller":
		switch field {
		case "agent":
			return ast.String(in.Caller.Agent), true
		case "session":
			return ast.String(in.Caller.Session), true
		}
	}
	return nil, false
}

func stringsObject(m map[string]string) ast.Object {
	obj := ast.NewObjectWithCapacity(len(m))
	for k, v := range m {
		obj.Insert(ast.StringTerm(k), ast.StringTerm(v))
	}
	return obj
}

// The input document's keys, and its request's and caller's.
var (
	inputKeys   = []string{"arguments", "caller", "protocol", "request", "server", "tool", "tool_annotations", "trace_id"}
	requestKeys = []string{"method", "host", "path", "path_vars", "query", "headers"}
	callerKeys  = []string{"agent", "session"}
)

// errTooDeep is the error of a call whose arguments nest deeper than
// maxInputDepth, on every engine: the wasm engine's AppendJSON refuses
// them too.
var errTooDeep = fmt.Errorf("arguments nested deeper than %d", maxInputDepth)

// checkDepth refuses arguments nested deeper than maxInputDepth (counting
// the arguments object itself as 1), before an engine sees them.
func checkDepth(args map[string]any) error {
	if !shallow(args, 1) {
		return errTooDeep
	}
	return nil
}

func shallow(v any, depth int) bool {
	switch x := v.(type) {
	case map[string]any:
		if depth > maxInputDepth {
			return false
		}
		for _, e := range x {
			if !shallow(e, depth+1) {
				return false
			}
		}
	case []any:
		if depth > maxInputDepth {
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
