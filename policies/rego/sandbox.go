package rego

import (
	"encoding/json"
	"errors"
	"net/url"
	"strconv"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/topdown"

	"github.com/toolgate/toolgate/policies"
)

// The builtins below are replaced, for the whole process, by ones that
// cannot reach outside it, whatever engine or tool calls them (the
// interpreter, the compiled engine, the wasm engine's host builtins, the
// tester running a policy's unit tests). The network builtins are also
// left out of the capabilities, so a policy that names them is refused
// when it is compiled; their replacements are a second fence.
func init() {
	for _, name := range []string{"http.send", "net.lookup_ip_addr", "opa.runtime"} {
		topdown.RegisterBuiltinFunc(name, refuseBuiltin(name))
	}
	// The schema is the second operand of json.match_schema, the first of
	// json.verify_schema (OPA's interpreter passes the output too).
	topdown.RegisterBuiltinFunc("json.match_schema", localSchemaOnly(topdown.GetBuiltin("json.match_schema"), 1))
	topdown.RegisterBuiltinFunc("json.verify_schema", localSchemaOnly(topdown.GetBuiltin("json.verify_schema"), 0))
}

// errOutside is the error of a builtin that would reach outside the
// process.
var errOutside = errors.New("toolgate policies.policies may not reach the network, files or the environment")

func refuseBuiltin(name string) topdown.BuiltinFunc {
	return func(topdown.BuiltinContext, []*ast.Term, func(*ast.Term) error) error {
		return &topdown.Error{Code: topdown.BuiltinErr, Message: name + ": " + errOutside.Error()}
	}
}

// localSchemaOnly wraps json.match_schema or json.verify_schema (whose
// schema is operand i) so that a schema that could load another
// document, or send OPA's validator into endless recursion, is refused
// before OPA's loader sees it (outsideRef). Remote hosts are also refused
// by the capabilities' empty allow_net; file: references are not, so this
// is what keeps files out.
func localSchemaOnly(f topdown.BuiltinFunc, i int) topdown.BuiltinFunc {
	return func(bctx topdown.BuiltinContext, ops []*ast.Term, iter func(*ast.Term) error) error {
		if i < len(ops) {
			if ref, bad := outsideRef(ops[i].Value); bad {
				return &topdown.Error{Code: topdown.BuiltinErr, Location: bctx.Location,
					Message: "json schema refused (" + ref + "): a policy's schema may only $ref parts of itself (#/...), without cycles; it may not reach the network or files"}
			}
		}
		return f(bctx, ops, iter)
	}
}

// outsideRef finds a reason to refuse a schema (given as an object or as
// JSON text) before OPA's loader sees it: a $ref that is not a local
// fragment, an $id or id that names a URI, a $ref that does not resolve
// to a part of the schema, or $refs that lead back where they started
// without descending into the document (OPA's validator recurses on such
// a cycle until the Go stack overflows, which ends the process: a schema
// {"$ref": "#"} from a call's arguments took the sidecar down). Its words
// name the problem, never the reference; true when refused.
func outsideRef(v ast.Value) (string, bool) {
	var doc any
	if s, ok := v.(ast.String); ok {
		if err := json.Unmarshal([]byte(s), &doc); err != nil {
			return "", false // not JSON: OPA's builtin says so
		}
	} else {
		var err error
		if doc, err = ast.JSON(v); err != nil {
			return "", false
		}
	}
	refs := map[string]string{} // the pointer of each object holding a $ref, to its target's
	reason := ""
	var visit func(x any, ptr string, depth int)
	visit = func(x any, ptr string, depth int) {
		if reason != "" {
			return
		}
		if depth > policies.MaxInputDepth {
			reason = "nested too deep"
			return
		}
		switch x := x.(type) {
		case map[string]any:
			if r, ok := x["$ref"].(string); ok {
				if !strings.HasPrefix(r, "#") {
					reason = "$ref to another document"
					return
				}
				refs[ptr] = r[1:]
			}
			for _, k := range []string{"$id", "id"} {
				if id, ok := x[k].(string); ok && (strings.Contains(id, ":") || strings.HasPrefix(id, "/")) {
					reason = k + " naming a URI"
					return
				}
			}
			for k, e := range x {
				visit(e, ptr+"/"+escapePointer(k), depth+1)
			}
		case []any:
			for i, e := range x {
				visit(e, ptr+"/"+strconv.Itoa(i), depth+1)
			}
		}
	}
	visit(doc, "", 0)
	if reason != "" {
		return reason, true
	}
	if len(refs) == 0 {
		return "", false
	}
	// Every $ref must resolve to a part of the schema.
	for from, frag := range refs {
		target, ok := resolvePointer(doc, frag)
		if !ok {
			return "$ref that does not resolve", true
		}
		refs[from] = target
	}
	// No cycle through $refs and the keywords that apply to the same
	// document (allOf, anyOf, oneOf, not, if, then, else, dependencies).
	const (
		unseen = iota
		open
		done
	)
	state := map[string]int{}
	var cyclic func(ptr string, depth int) bool
	cyclic = func(ptr string, depth int) bool {
		switch {
		case state[ptr] == open || depth > policies.MaxInputDepth:
			return true
		case state[ptr] == done:
			return false
		}
		state[ptr] = open
		node, _ := lookupPointer(doc, ptr)
		if obj, ok := node.(map[string]any); ok {
			if to, ok := refs[ptr]; ok && cyclic(to, depth+1) {
				return true
			}
			for _, k := range []string{"allOf", "anyOf", "oneOf"} {
				if arr, ok := obj[k].([]any); ok {
					for i := range arr {
						if cyclic(ptr+"/"+k+"/"+strconv.Itoa(i), depth+1) {
							return true
						}
					}
				}
			}
			for _, k := range []string{"not", "if", "then", "else"} {
				if _, ok := obj[k]; ok && cyclic(ptr+"/"+k, depth+1) {
					return true
				}
			}
			for _, k := range []string{"dependencies", "dependentSchemas"} {
				if deps, ok := obj[k].(map[string]any); ok {
					for name := range deps {
						if cyclic(ptr+"/"+k+"/"+escapePointer(name), depth+1) {
							return true
						}
					}
				}
			}
		}
		state[ptr] = done
		return false
	}
	for from := range refs {
		if cyclic(from, 0) {
			return "$ref cycle", true
		}
	}
	return "", false
}

// resolvePointer reads a $ref's fragment (after "#") as a JSON pointer,
// percent-decoded, into doc: the pointer, re-escaped, of the part it
// names, and whether there is one.
func resolvePointer(doc any, frag string) (string, bool) {
	frag, err := url.PathUnescape(frag)
	if err != nil || frag != "" && !strings.HasPrefix(frag, "/") {
		return "", false
	}
	if _, ok := lookupPointer(doc, frag); !ok {
		return "", false
	}
	return frag, true
}

// lookupPointer is the part of doc a JSON pointer names.
func lookupPointer(doc any, ptr string) (any, bool) {
	if ptr == "" {
		return doc, true
	}
	for _, tok := range strings.Split(ptr[1:], "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch x := doc.(type) {
		case map[string]any:
			v, ok := x[tok]
			if !ok {
				return nil, false
			}
			doc = v
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(x) {
				return nil, false
			}
			doc = x[i]
		default:
			return nil, false
		}
	}
	return doc, true
}

func escapePointer(k string) string {
	return strings.ReplaceAll(strings.ReplaceAll(k, "~", "~0"), "/", "~1")
}
