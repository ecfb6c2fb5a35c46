package irvm_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/open-policy-agent/opa/v1/topdown"
	"github.com/open-policy-agent/opa/v1/types"

	"github.com/toolgate/toolgate/policies/internal/irvm"
)

// TestBudget checks that an evaluation that builds more values than
// Options.MaxBytes ends with ErrBudget, whether the plan fills a
// collection or a builtin returns big values, and that the same query
// runs with a budget that suffices.
func TestBudget(t *testing.T) {
	for _, c := range []struct{ name, query string }{
		{"comprehension", `x = count([i | some i in numbers.range(1, 30000)])`},
		{"strings", `x = count([s | some i in numbers.range(1, 600); s := concat("", ["a", json.marshal(numbers.range(1, 500))])])`},
		{"walk", `x = count([p | walk(numbers.range(1, 20000), [p, _])])`},
	} {
		p := prepare(t, c.query, "")
		_, err := p.Eval(context.Background(), nil, irvm.Options{MaxBytes: 1 << 20})
		if !errors.Is(err, irvm.ErrBudget) {
			t.Errorf("%s with a 1 MiB budget: %v, want ErrBudget", c.name, err)
		}
		if _, err := p.Eval(context.Background(), nil, irvm.Options{MaxBytes: 64 << 20}); err != nil {
			t.Errorf("%s with a 64 MiB budget: %v", c.name, err)
		}
	}
}

// TestDeadlineInsideWalk checks that walk stops at the deadline as it
// yields values, rather than after collecting every path: over arrays
// nested 900 deep with 20,000 numbers at the bottom (18 million path
// elements), an evaluation with a 20 ms deadline ends with ErrDeadline
// well within a second.
func TestDeadlineInsideWalk(t *testing.T) {
	var v *ast.Term
	bottom := make([]*ast.Term, 20000)
	for i := range bottom {
		bottom[i] = ast.InternedTerm(i)
	}
	v = ast.ArrayTerm(bottom...)
	for range 900 {
		v = ast.ArrayTerm(v)
	}
	in := ast.ObjectTerm(ast.Item(ast.StringTerm("a"), v))
	p := prepare(t, `x = count([p | walk(input, [p, _])])`, "")
	start := time.Now()
	_, err := p.Eval(context.Background(), in, irvm.Options{Deadline: start.Add(20 * time.Millisecond), MaxBytes: -1})
	el := time.Since(start)
	if !errors.Is(err, irvm.ErrDeadline) {
		t.Fatalf("walk past the deadline: %v, want ErrDeadline", err)
	}
	if el > time.Second {
		t.Fatalf("walk took %v with a 20 ms deadline", el)
	}
	t.Logf("stopped after %v", el)
}

// TestDataRefused checks that a query with data is refused when prepared,
// and that the target cannot be used through the rego package.
func TestDataRefused(t *testing.T) {
	_, err := irvm.Prepare(context.Background(), irvm.Query{Query: "x = data.a", Data: map[string]any{"a": 1}})
	if !errors.Is(err, irvm.ErrData) {
		t.Fatalf("Prepare with data: %v, want ErrData", err)
	}
	_, err = rego.New(rego.Query("x = 1"), rego.Target("toolgate-ir")).PrepareForEval(context.Background())
	if !errors.Is(err, irvm.ErrNotPrepare) {
		t.Fatalf("the target through the rego package: %v, want ErrNotPrepare", err)
	}
}

// TestCapabilitiesReachBuiltins checks that every builtin call gets the
// query's capabilities (what OPA's builtins read allow_net from): a
// builtin registered for this test reports the allow_net it sees.
func TestCapabilitiesReachBuiltins(t *testing.T) {
	decl := &ast.Builtin{Name: "toolgate_test.allow_net", Decl: types.NewFunction(nil, types.A)}
	ast.RegisterBuiltin(decl)
	topdown.RegisterBuiltinFunc(decl.Name, func(bctx topdown.BuiltinContext, _ []*ast.Term, iter func(*ast.Term) error) error {
		if bctx.Capabilities == nil {
			return iter(ast.StringTerm("no capabilities"))
		}
		return iter(ast.NewTerm(ast.MustInterfaceToValue(bctx.Capabilities.AllowNet)))
	})
	caps := ast.CapabilitiesForThisVersion()
	caps.Builtins = append(caps.Builtins, decl)
	caps.AllowNet = []string{}
	p, err := irvm.Prepare(context.Background(), irvm.Query{Query: "x = toolgate_test.allow_net()", Capabilities: caps})
	if err != nil {
		t.Fatal(err)
	}
	rs, err := p.Eval(context.Background(), nil, irvm.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := result(t, rs); got.Compare(ast.NewArray()) != 0 {
		t.Fatalf("allow_net seen by a builtin: %v, want []", got)
	}
}
