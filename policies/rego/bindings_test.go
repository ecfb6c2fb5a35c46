package rego

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/toolgate/toolgate/policies"
)

// TestCompiledBindingsBothWays: the compiled engine's result read where
// the plan binds the variables (irvm.Program.EvalVars, what EvalBefore
// does) and read from the result set (EvalDocument, the way for a plan
// that binds them otherwise) are the same bindings, and decide the same,
// for each shape of decision package, with and without a rule firing.
func TestCompiledBindingsBothWays(t *testing.T) {
	policiesByName := map[string]string{
		"partial deny and inject": `package b.p
deny contains {"msg": "n too big", "path": "/n"} if input.arguments.n > 10
inject["X-Trace"] := input.trace_id
`,
		"complete deny, allow without default": `package b.c
deny := {"n is 3"} if input.arguments.n == 3
allow if input.arguments.n < 5
`,
		"allow with default, complete inject, approval": `package b.a
default allow := true
allow := false if input.arguments.n == 4
inject := {"X-N": sprintf("%v", [input.arguments.n])} if input.arguments.n
approval := {"reason": "big"} if input.arguments.n > 100
`,
		"answer rules": `package b.r
withhold contains "w" if input.arguments.n == 6
redact contains "/n" if input.arguments.n == 7
`,
		"no decision rule": `package b.none
helper := 1
`,
		"empty set rule filled by another rule": `package b.e
deny contains m if { some m in extra }
extra contains "seven" if input.arguments.n == 7
extra contains "eight" if input.arguments.n == 8
`,
	}
	for name, src := range policiesByName {
		t.Run(name, func(t *testing.T) {
			c, err := mustRego(t, "b", src).compiledEngine(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if c.program.Vars() == nil {
				t.Fatalf("the plan of %q binds its variables otherwise: EvalVars is not exercised", decisionQuery(c.pkg, c.decision, " = "))
			}
			for n := range 10 {
				in := &policies.Input{Tool: "t", Arguments: map[string]any{"n": n}, TraceID: "tr"}
				if n == 9 {
					in.Arguments = map[string]any{"n": 300}
				}
				var buf [maxVars]*ast.Term
				byVars, verr := c.evalCompiled(context.Background(), in, time.Time{}, buf[:0])
				bySet, serr := c.evalCompiled(context.Background(), in, time.Time{}, nil)
				if verr != nil || serr != nil {
					t.Fatalf("n=%d: errors %v, %v", n, verr, serr)
				}
				if got, want := asMap(byVars), asMap(bySet); !reflect.DeepEqual(got, want) {
					t.Errorf("n=%d: by the plan's bindings %v, from the result set %v", n, got, want)
				}
				fv, okv := fastResult(byVars)
				fs, oks := fastResult(bySet)
				if okv != oks || !reflect.DeepEqual(fv, fs) {
					t.Errorf("n=%d: fastResult %+v %v by the plan's bindings, %+v %v from the result set", n, fv, okv, fs, oks)
				}
				dv, errv := resultDoc(byVars)
				ds, errs := resultDoc(bySet)
				if !reflect.DeepEqual(dv, ds) || (errv == nil) != (errs == nil) {
					t.Errorf("n=%d: resultDoc %v %v by the plan's bindings, %v %v from the result set", n, dv, errv, ds, errs)
				}
			}
		})
	}
}

// asMap is b as variable name to value, nil when b is undefined.
func asMap(b bindings) map[string]string {
	if !b.defined {
		return nil
	}
	m := map[string]string{}
	for i, name := range b.names {
		m[name] = b.vals[i].String()
	}
	return m
}
