package policies

import (
	"encoding/json"
	"strconv"

	"github.com/open-policy-agent/opa/v1/ast"
)

// Input is the document every policy sees as `input`, for Rego and WASM
// alike. It is built once per call, after schema validation and coercion.
// Policies must treat it as read-only.
type Input struct {
	// Tool is the matched tool's name.
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

// toAST converts the input straight into OPA's value type, without the
// generic conversion's reflection and round trip: this is most of what a
// decision costs besides the rules themselves.
func (in *Input) toAST() ast.Value {
	pv := make([][2]*ast.Term, 0, len(in.Request.PathVars))
	for k, v := range in.Request.PathVars {
		pv = append(pv, ast.Item(ast.StringTerm(k), ast.StringTerm(v)))
	}
	q := make([][2]*ast.Term, 0, len(in.Request.Query))
	for k, vs := range in.Request.Query {
		arr := make([]*ast.Term, len(vs))
		for i, v := range vs {
			arr[i] = ast.StringTerm(v)
		}
		q = append(q, ast.Item(ast.StringTerm(k), ast.ArrayTerm(arr...)))
	}
	h := make([][2]*ast.Term, 0, len(in.Request.Headers))
	for k, v := range in.Request.Headers {
		h = append(h, ast.Item(ast.StringTerm(k), ast.StringTerm(v)))
	}
	args := ast.NewObject()
	for k, v := range in.Arguments {
		args.Insert(ast.StringTerm(k), ast.NewTerm(toAST(v)))
	}
	return ast.NewObject(
		ast.Item(ast.StringTerm("tool"), ast.StringTerm(in.Tool)),
		ast.Item(ast.StringTerm("arguments"), ast.NewTerm(args)),
		ast.Item(ast.StringTerm("request"), ast.ObjectTerm(
			ast.Item(ast.StringTerm("method"), ast.StringTerm(in.Request.Method)),
			ast.Item(ast.StringTerm("host"), ast.StringTerm(in.Request.Host)),
			ast.Item(ast.StringTerm("path"), ast.StringTerm(in.Request.Path)),
			ast.Item(ast.StringTerm("path_vars"), ast.ObjectTerm(pv...)),
			ast.Item(ast.StringTerm("query"), ast.ObjectTerm(q...)),
			ast.Item(ast.StringTerm("headers"), ast.ObjectTerm(h...)),
		)),
		ast.Item(ast.StringTerm("caller"), ast.ObjectTerm(
			ast.Item(ast.StringTerm("agent"), ast.StringTerm(in.Caller.Agent)),
			ast.Item(ast.StringTerm("session"), ast.StringTerm(in.Caller.Session)),
		)),
		ast.Item(ast.StringTerm("trace_id"), ast.StringTerm(in.TraceID)),
	)
}

// toAST converts one decoded JSON value (json.Number or float64 numbers).
func toAST(v any) ast.Value {
	switch x := v.(type) {
	case nil:
		return ast.NullValue
	case bool:
		return ast.Boolean(x)
	case string:
		return ast.String(x)
	case json.Number:
		return ast.Number(x)
	case float64:
		return ast.Number(strconv.FormatFloat(x, 'g', -1, 64))
	case int:
		return ast.Number(strconv.Itoa(x))
	case []any:
		terms := make([]*ast.Term, len(x))
		for i, e := range x {
			terms[i] = ast.NewTerm(toAST(e))
		}
		return ast.NewArray(terms...)
	case map[string]any:
		obj := ast.NewObject()
		for k, e := range x {
			obj.Insert(ast.StringTerm(k), ast.NewTerm(toAST(e)))
		}
		return obj
	}
	// Not produced by JSON decoding; fall back to OPA's own conversion.
	if val, err := ast.InterfaceToValue(v); err == nil {
		return val
	}
	return ast.NullValue
}
