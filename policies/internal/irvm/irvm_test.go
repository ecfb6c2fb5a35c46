package irvm_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/topdown"

	"github.com/toolgate/toolgate/policies/internal/irvm"
)

func prepare(t testing.TB, query, module string) *irvm.Program {
	t.Helper()
	q := irvm.Query{Query: query}
	if module != "" {
		q.Modules = []*ast.Module{ast.MustParseModuleWithOpts(module, ast.ParserOptions{RegoVersion: ast.RegoV1})}
	}
	p, err := irvm.Prepare(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// result is the value bound to x in the only result, nil when there is none.
func result(t testing.TB, rs []*ast.Term) ast.Value {
	t.Helper()
	switch len(rs) {
	case 0:
		return nil
	case 1:
		v := rs[0].Value.(ast.Object).Get(ast.StringTerm("x"))
		if v == nil {
			t.Fatalf("result %v binds no x", rs)
		}
		return v.Value
	}
	t.Fatalf("%d results: %v", len(rs), rs)
	return nil
}

func TestEvalResult(t *testing.T) {
	p := prepare(t, "x = data.p.deny", `package p
deny contains msg if {
	some id in input.ids
	startswith(id, "bad")
	msg := sprintf("id %s is refused", [id])
}`)
	in := ast.NewTerm(ast.MustInterfaceToValue(map[string]any{"ids": []any{"ok1", "bad2", "bad3"}}))
	rs, err := p.Eval(context.Background(), in, irvm.Options{StrictBuiltinErrors: true})
	if err != nil {
		t.Fatal(err)
	}
	want := ast.MustParseTerm(`{"id bad2 is refused", "id bad3 is refused"}`).Value
	if got := result(t, rs); got.Compare(want) != 0 {
		t.Fatalf("deny = %v, want %v", got, want)
	}
	// Undefined input: the rule iterates over nothing.
	rs, err = p.Eval(context.Background(), nil, irvm.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := result(t, rs); got.Compare(ast.NewSet()) != 0 {
		t.Fatalf("deny without input = %v, want an empty set", got)
	}
}

func TestInputKeys(t *testing.T) {
	for _, c := range []struct {
		name, module string
		want         []string
		fields       map[string][]string // InputFields of want's keys; absent: nil (all)
	}{
		{"dotted", `package p
deny contains "limit" if input.arguments.limit > 50
deny contains "tool" if input.tool == "x"
inject["X"] := input.trace_id`, []string{"arguments", "tool"}, map[string][]string{"arguments": {"limit"}}}, // inject is not in the query: not planned
		{"through a rule", `package p
args := input.arguments
deny contains "q" if args.q == ""`, []string{"arguments"}, nil},
		{"fields of two keys", `package p
deny contains "a" if input.arguments.a > 1
deny contains "b" if input.arguments.b.c == "x"
deny contains "h" if input.request.headers["user-agent"] == ""`, []string{"arguments", "request"},
			map[string][]string{"arguments": {"a", "b"}, "request": {"headers"}}},
		{"an argument iterated", `package p
deny contains "a" if input.arguments.a > 1
deny contains k if some k, _ in input.arguments`, []string{"arguments"}, nil},
		{"an argument counted", `package p
deny contains "a" if count(input.arguments) > 3`, []string{"arguments"}, nil},
		{"with", `package p
deny contains "q" if input.a.q == ""
test_q if deny["q"] with input.a as {"q": ""}`, []string{"a"}, map[string][]string{"a": {"q"}}},
		{"none", `package p
deny contains "x" if false`, []string{}, nil},
		{"walked", `package p
deny contains "x" if walk(input, [_, "forbidden"])`, nil, nil},
		{"iterated", `package p
deny contains k if some k, _ in input`, nil, nil},
		{"whole", `package p
deny contains "x" if count(input) > 3`, nil, nil},
		{"passed to a function", `package p
f(doc) := doc.a
deny contains "x" if f(input) == 1`, nil, nil},
		{"dynamic key", `package p
deny contains "x" if input[input.k] == 1`, nil, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := prepare(t, "x = data.p.deny", c.module)
			if got := p.InputKeys(); !slices.Equal(got, c.want) || (got == nil) != (c.want == nil) {
				t.Fatalf("InputKeys() = %q, want %q", got, c.want)
			}
			for _, k := range c.want {
				if got, want := p.InputFields(k), c.fields[k]; !slices.Equal(got, want) || (got == nil) != (want == nil) {
					t.Errorf("InputFields(%q) = %q, want %q", k, got, want)
				}
			}
		})
	}
}

// TestCancel: an evaluation past its context's deadline stops within a few
// milliseconds with OPA's cancel error, however long the policy would run.
func TestCancel(t *testing.T) {
	p := prepare(t, "x = data.p.n", `package p
n := count([1 | some a in numbers.range(1, 5000); some b in numbers.range(1, 5000); a == b])`)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := p.Eval(ctx, nil, irvm.Options{})
	took := time.Since(start)
	var te *topdown.Error
	if !errors.As(err, &te) || te.Code != topdown.CancelErr {
		t.Fatalf("err = %v, want %s", err, topdown.CancelErr)
	}
	if took > 500*time.Millisecond {
		t.Fatalf("stopped after %v; the deadline was 20ms", took)
	}
	// So does Options.Deadline, with an error that says so, even inside a
	// builtin that runs long.
	big := prepare(t, "x = data.p.n", `package p
n := count(numbers.range(1, 100000000))`)
	start = time.Now()
	_, err = big.Eval(context.Background(), nil, irvm.Options{Deadline: time.Now().Add(20 * time.Millisecond)})
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 500*time.Millisecond {
		t.Fatalf("numbers.range past Options.Deadline: err = %v after %v, want context.DeadlineExceeded soon after 20ms", err, time.Since(start))
	}
	start = time.Now()
	_, err = p.Eval(context.Background(), nil, irvm.Options{Deadline: time.Now().Add(20 * time.Millisecond)})
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 500*time.Millisecond {
		t.Fatalf("past Options.Deadline: err = %v after %v, want context.DeadlineExceeded soon after 20ms", err, time.Since(start))
	}
	// Options.Cancel stops it too.
	c := topdown.NewCancel()
	c.Cancel()
	if _, err := p.Eval(context.Background(), nil, irvm.Options{Cancel: c}); !errors.As(err, &te) || te.Code != topdown.CancelErr {
		t.Fatalf("with a cancelled Cancel: err = %v", err)
	}
}

func TestBuiltinErrors(t *testing.T) {
	p := prepare(t, "x = data.p.n", `package p
n := to_number(input.s)`)
	in := ast.NewTerm(ast.MustInterfaceToValue(map[string]any{"s": "abc"}))
	_, err := p.Eval(context.Background(), in, irvm.Options{StrictBuiltinErrors: true})
	var te *topdown.Error
	if !errors.As(err, &te) || te.Code != topdown.BuiltinErr {
		t.Fatalf("strict: err = %v, want %s", err, topdown.BuiltinErr)
	}
	rs, err := p.Eval(context.Background(), in, irvm.Options{})
	if err != nil || result(t, rs) != nil {
		t.Fatalf("not strict: %v, %v; want undefined", rs, err)
	}
}

func TestConflict(t *testing.T) {
	p := prepare(t, "x = data.p.v", `package p
v := 1 if input.a
v := 2 if input.b`)
	in := ast.NewTerm(ast.MustInterfaceToValue(map[string]any{"a": true, "b": true}))
	_, err := p.Eval(context.Background(), in, irvm.Options{})
	var te *topdown.Error
	if !errors.As(err, &te) || te.Code != topdown.ConflictErr {
		t.Fatalf("err = %v, want %s", err, topdown.ConflictErr)
	}
}

// TestTime: time.now_ns is one instant for a whole evaluation, Options.Time
// when given.
func TestTime(t *testing.T) {
	p := prepare(t, "a = time.now_ns(); b = time.now_ns(); x = [a, b]", "")
	at := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	rs, err := p.Eval(context.Background(), nil, irvm.Options{Time: at})
	if err != nil {
		t.Fatal(err)
	}
	want := ast.MustParseTerm(fmt.Sprintf("[%d, %d]", at.UnixNano(), at.UnixNano())).Value
	if got := result(t, rs); got.Compare(want) != 0 {
		t.Fatalf("x = %v, want %v", got, want)
	}
}

// TestConcurrent: one Program, many goroutines, each its own input (run
// with -race).
func TestConcurrent(t *testing.T) {
	p := prepare(t, "x = data.p.deny", `package p
deny contains sprintf("%d is over 10", [n]) if {
	some n in input.ns
	n > 10
}`)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				n := g*1000 + i
				in := ast.NewTerm(ast.MustInterfaceToValue(map[string]any{"ns": []any{n, 1}}))
				rs, err := p.Eval(context.Background(), in, irvm.Options{})
				if err != nil {
					t.Error(err)
					return
				}
				want := ast.NewSet()
				if n > 10 {
					want.Add(ast.StringTerm(fmt.Sprintf("%d is over 10", n)))
				}
				if got := result(t, rs); got.Compare(want) != 0 {
					t.Errorf("input %d: deny = %v, want %v", n, got, want)
					return
				}
			}
		})
	}
	wg.Wait()
}

// TestResultsKept: a caller may keep an evaluation's results, and the
// values in them, while the Program runs on: later evaluations (through
// Eval and EvalDocument, each making more terms than one block holds, see
// eval.term) never change them.
func TestResultsKept(t *testing.T) {
	p := prepare(t, "x = data.p.r", `package p
r := {"args": input.args, "tool": input.tool, "ids": [sprintf("%s-%d", [id, i]) | some i, id in input.args.ids], "big": {n | some n in numbers.range(1, 40)}}`)
	in := func(i int) ast.Object {
		return ast.MustInterfaceToValue(map[string]any{
			"tool": fmt.Sprintf("tool%d", i),
			"args": map[string]any{"ids": []any{fmt.Sprintf("a%d", i), fmt.Sprintf("b%d", i)}, "n": i},
		}).(ast.Object)
	}
	type kept struct {
		rs   []*ast.Term
		want ast.Value
	}
	big := make([]string, 40)
	for n := range big {
		big[n] = fmt.Sprint(n + 1)
	}
	var all []kept
	for i := range 50 {
		var rs []*ast.Term
		var err error
		if i%2 == 0 {
			rs, err = p.Eval(context.Background(), ast.NewTerm(in(i)), irvm.Options{})
		} else {
			rs, err = p.EvalDocument(context.Background(), irvm.ObjectDocument(in(i)), irvm.Options{})
		}
		if err != nil {
			t.Fatal(err)
		}
		got := result(t, rs)
		want := ast.MustParseTerm(fmt.Sprintf(`{"args": {"ids": ["a%d", "b%d"], "n": %d}, "tool": "tool%d", "ids": ["a%d-0", "b%d-1"], "big": {%s}}`,
			i, i, i, i, i, i, strings.Join(big, ", "))).Value
		if got.Compare(want) != 0 {
			t.Fatalf("evaluation %d: x = %v, want %v", i, got, want)
		}
		all = append(all, kept{rs, ast.MustParseTerm(got.String()).Value})
	}
	for i, k := range all {
		if got := result(t, k.rs); got.Compare(k.want) != 0 {
			t.Errorf("evaluation %d: x became %v after later evaluations, was %v", i, got, k.want)
		}
	}
}

// TestBuiltinCachePerEvaluation: what builtins keep for the rest of an
// evaluation (rand.intn's value for a key) holds within it and is gone in
// the next, which draws from its own seed.
func TestBuiltinCachePerEvaluation(t *testing.T) {
	p := prepare(t, "x = [rand.intn(\"k\", 1000000), rand.intn(\"k\", 1000000)]", "")
	draw := func(seed byte) ast.Value {
		t.Helper()
		rs, err := p.Eval(context.Background(), nil, irvm.Options{Seed: bytes.NewReader(bytes.Repeat([]byte{seed}, 64))})
		if err != nil {
			t.Fatal(err)
		}
		return result(t, rs)
	}
	a, b := draw(1), draw(2)
	for _, v := range []ast.Value{a, b} {
		if arr := v.(*ast.Array); arr.Elem(0).Value.Compare(arr.Elem(1).Value) != 0 {
			t.Errorf("x = %v: two draws for one key within an evaluation differ", v)
		}
	}
	if a.Compare(b) == 0 {
		t.Errorf("x = %v with either seed: the second evaluation read the first's draw", a)
	}
	if again := draw(1); again.Compare(a) != 0 {
		t.Errorf("x = %v with seed 1 again, was %v", again, a)
	}
}

// TestEvalVars: a query whose plan binds its variables in one place gives
// their values through EvalVars, in the order Vars names them, and says
// when it is undefined; one with many results has no Vars.
func TestEvalVars(t *testing.T) {
	doc := irvm.ObjectDocument(ast.MustParseTerm(`{"a": "A", "b": [1, 2]}`).Value.(ast.Object))
	p := prepare(t, "x = input.a; y = count(input.b)", "")
	if got := p.Vars(); !slices.Equal(got, []string{"x", "y"}) && !slices.Equal(got, []string{"y", "x"}) {
		t.Fatalf("Vars() = %q, want x and y", got)
	}
	vals := make([]*ast.Term, 2)
	ok, err := p.EvalVars(context.Background(), doc, irvm.Options{}, vals)
	if err != nil || !ok {
		t.Fatalf("EvalVars = %v, %v", ok, err)
	}
	want := map[string]string{"x": `"A"`, "y": "2"}
	for i, name := range p.Vars() {
		if vals[i].String() != want[name] {
			t.Errorf("%s = %v, want %s", name, vals[i], want[name])
		}
	}
	if _, err := p.EvalVars(context.Background(), doc, irvm.Options{}, vals[:1]); err == nil {
		t.Error("EvalVars with one place for two values: no error")
	}
	undefined := prepare(t, "x = input.missing", "")
	if ok, err := undefined.EvalVars(context.Background(), doc, irvm.Options{}, make([]*ast.Term, 1)); ok || err != nil {
		t.Errorf("EvalVars of an undefined query = %v, %v; want false, nil", ok, err)
	}
	many := prepare(t, "x = input.b[_]", "")
	if many.Vars() != nil {
		t.Errorf("Vars() of a query with many results = %q, want nil", many.Vars())
	}
	if _, err := many.EvalVars(context.Background(), doc, irvm.Options{}, nil); !errors.Is(err, irvm.ErrNoVars) {
		t.Errorf("EvalVars of a query with many results: %v, want ErrNoVars", err)
	}
}
