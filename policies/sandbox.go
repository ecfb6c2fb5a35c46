package policies

import (
	"encoding/json"
	"errors"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/topdown"
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
var errOutside = errors.New("toolgate policies may not reach the network, files or the environment")

func refuseBuiltin(name string) topdown.BuiltinFunc {
	return func(topdown.BuiltinContext, []*ast.Term, func(*ast.Term) error) error {
		return &topdown.Error{Code: topdown.BuiltinErr, Message: name + ": " + errOutside.Error()}
	}
}

// localSchemaOnly wraps json.match_schema or json.verify_schema (whose
// schema is operand i) so that a schema that could load another
// document is refused before OPA's loader sees it: a $ref that is not a
// fragment of the schema itself ("#/definitions/x"), or an $id or id
// naming a URI (a base against which a relative $ref would resolve, as
// file:///etc/ does). Remote hosts are also refused by the capabilities'
// empty allow_net; file: references are not, so this is what keeps files
// out.
func localSchemaOnly(f topdown.BuiltinFunc, i int) topdown.BuiltinFunc {
	return func(bctx topdown.BuiltinContext, ops []*ast.Term, iter func(*ast.Term) error) error {
		if i < len(ops) {
			if ref, bad := outsideRef(ops[i].Value); bad {
				return &topdown.Error{Code: topdown.BuiltinErr, Location: bctx.Location,
					Message: "json schema: the reference " + ref + " is refused: " + errOutside.Error() + "; only local references (#/...) are allowed"}
			}
		}
		return f(bctx, ops, iter)
	}
}

// outsideRef finds, in a schema given as an object or as JSON text, a
// $ref that is not a local fragment or an $id or id that names a URI:
// its key, and true.
func outsideRef(v ast.Value) (string, bool) {
	if s, ok := v.(ast.String); ok {
		var doc any
		if err := json.Unmarshal([]byte(s), &doc); err != nil {
			return "", false // not JSON: OPA's builtin says so
		}
		var err error
		if v, err = ast.InterfaceToValue(doc); err != nil {
			return "", false
		}
	}
	found, bad := "", false
	var visit func(v ast.Value, depth int)
	visit = func(v ast.Value, depth int) {
		if bad || depth > maxInputDepth {
			bad = bad || depth > maxInputDepth
			found = "nested too deep"
			return
		}
		switch x := v.(type) {
		case ast.Object:
			x.Until(func(k, val *ast.Term) bool {
				key, _ := k.Value.(ast.String)
				if str, ok := val.Value.(ast.String); ok {
					switch key {
					case "$ref":
						bad = !strings.HasPrefix(string(str), "#")
					case "$id", "id":
						bad = strings.Contains(string(str), ":") || strings.HasPrefix(string(str), "/")
					}
					if bad {
						found = string(key)
						return true
					}
				}
				visit(val.Value, depth+1)
				return bad
			})
		case *ast.Array:
			for i := 0; i < x.Len() && !bad; i++ {
				visit(x.Elem(i).Value, depth+1)
			}
		}
	}
	visit(v, 0)
	return found, bad
}
