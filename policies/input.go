package policies

import "github.com/open-policy-agent/opa/v1/ast"

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
		"caller":   map[string]any{"agent": in.Caller.Agent, "session": in.Caller.Session},
		"trace_id": in.TraceID,
		"protocol": in.Protocol,
		"server":   in.Server,
	}
}

// term is the input as an ast term for the compiled engine, with only keys
// (nil: every key). Arguments are converted eagerly: a policy reads most
// of them, and ast.LazyObject converts a value again on every read.
func (in *Input) term(keys []string) *ast.Term {
	if keys == nil {
		keys = inputKeys
	}
	obj := ast.NewObjectWithCapacity(len(keys))
	for _, k := range keys {
		var v ast.Value
		switch k {
		case "tool":
			v = ast.String(in.Tool)
		case "arguments":
			if in.Arguments == nil {
				v = ast.NewObject()
			} else if a, err := ast.InterfaceToValue(in.Arguments); err == nil {
				v = a
			} else {
				v = ast.LazyObject(in.Arguments)
			}
		case "request":
			v = ast.MustInterfaceToValue(in.toValue()["request"])
		case "caller":
			v = ast.NewObject(
				[2]*ast.Term{ast.InternedTerm("agent"), ast.StringTerm(in.Caller.Agent)},
				[2]*ast.Term{ast.InternedTerm("session"), ast.StringTerm(in.Caller.Session)})
		case "trace_id":
			v = ast.String(in.TraceID)
		case "protocol":
			v = ast.String(in.Protocol)
		case "server":
			v = ast.String(in.Server)
		default:
			continue // not a key of the input: undefined, as in the whole input
		}
		obj.Insert(ast.InternedTerm(k), ast.NewTerm(v))
	}
	return ast.NewTerm(obj)
}

// inputKeys are the input document's top-level keys.
var inputKeys = []string{"arguments", "caller", "protocol", "request", "server", "tool", "trace_id"}
