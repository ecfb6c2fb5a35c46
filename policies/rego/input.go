package rego

import (
	"encoding/json"
	"strconv"

	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/toolgate/toolgate/policies"
	"github.com/toolgate/toolgate/policies/internal/irvm"
)

// inputValue turns the input into plain JSON-shaped Go values; wrapped in
// ast.LazyObject, only the parts a policy reads are converted.
func inputValue(in *policies.Input) map[string]any {
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
	m := map[string]any{
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
		"tool_annotations": in.Annotations(),
		"budget":           in.Budgets(),
	}
	if a := in.Answer; a != nil {
		m["answer"] = answerValue(a)
	}
	return m
}

// answerValue is input.answer as plain JSON-shaped Go values.
func answerValue(a *policies.Answer) map[string]any {
	h := make(map[string]any, len(a.Headers))
	for k, v := range a.Headers {
		h[k] = v
	}
	return map[string]any{"status": json.Number(strconv.Itoa(a.Status)), "headers": h, "body": a.Body}
}

// document is the input as the compiled engine reads it
// (irvm.Document): field by field, each value converted when a policy
// reads it, for a policy that only dots into its input; whole otherwise.
// A policy that reads three arguments gets those three converted, not the
// call's whole body.
type document struct{ in *policies.Input }

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
		v, err := ast.InterfaceToValue(in.Annotations())
		return v, err == nil
	case "budget":
		v, err := ast.InterfaceToValue(in.Budgets())
		return v, err == nil
	case "answer":
		if in.Answer == nil {
			return nil, false
		}
		v, err := ast.InterfaceToValue(answerValue(in.Answer))
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
	case "budget":
		b, ok := in.Budgets()[field]
		if !ok {
			return nil, false
		}
		v, err := ast.InterfaceToValue(b)
		return v, err == nil
	case "answer":
		if in.Answer == nil {
			return nil, false
		}
		a, ok := answerValue(in.Answer)[field]
		if !ok {
			return nil, false
		}
		v, err := ast.InterfaceToValue(a)
		return v, err == nil
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
	inputKeys   = []string{"answer", "arguments", "budget", "caller", "protocol", "request", "server", "tool", "tool_annotations", "trace_id"}
	requestKeys = []string{"method", "host", "path", "path_vars", "query", "headers"}
	callerKeys  = []string{"agent", "session"}
)
