package irvm_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/open-policy-agent/opa/v1/test/cases"
	"github.com/open-policy-agent/opa/v1/test/cases/testdata"
	"github.com/open-policy-agent/opa/v1/topdown"
	"github.com/open-policy-agent/opa/v1/util"

	"github.com/toolgate/toolgate/policies/irvm"
)

func loadCases(t *testing.T) []cases.TestCase {
	var all []cases.TestCase
	err := fs.WalkDir(testdata.V1, "v1", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".yaml") {
			return err
		}
		b, err := fs.ReadFile(testdata.V1, path)
		if err != nil {
			return err
		}
		var s cases.Set
		if err := util.Unmarshal(b, &s); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		for _, c := range s.Cases {
			c.Filename = path
			all = append(all, c)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return all
}

func options(tc cases.TestCase) []func(*rego.Rego) {
	opts := []func(*rego.Rego){
		rego.Query(tc.Query),
		rego.SetRegoVersion(ast.RegoV1),
		rego.Capabilities(ast.CapabilitiesForThisVersion(ast.CapabilitiesExperimentalKeywords(tc.ExperimentalKeywords))),
		rego.StrictBuiltinErrors(true),
	}
	for i, m := range tc.Modules {
		opts = append(opts, rego.Module(fmt.Sprintf("module-%d.rego", i), m))
	}
	return opts
}

// input is the case's input document, nil when it has none.
func input(tc cases.TestCase) ast.Value {
	switch {
	case tc.InputTerm != nil:
		return ast.MustParseTerm(*tc.InputTerm).Value
	case tc.Input != nil:
		return ast.MustInterfaceToValue(*tc.Input)
	}
	return nil
}

// run evaluates the case on target ("" for OPA's interpreter) with in as
// the input.
func run(ctx context.Context, tc cases.TestCase, target string, in ast.Value) (rego.ResultSet, error) {
	opts := options(tc)
	if target != "" {
		opts = append(opts, rego.Target(target))
	}
	pq, err := rego.New(opts...).PrepareForEval(ctx)
	if err != nil {
		return nil, fmt.Errorf("prepare: %w", err)
	}
	var eo []rego.EvalOption
	if in != nil {
		eo = append(eo, rego.EvalParsedInput(in))
	}
	return pq.Eval(ctx, eo...)
}

// code is an evaluation error's OPA code.
func code(err error) string {
	var te *topdown.Error
	if errors.As(err, &te) {
		return te.Code
	}
	var ae ast.Errors
	if errors.As(err, &ae) && len(ae) > 0 {
		return ae[0].Code
	}
	return "other: " + err.Error()
}

// prune keeps only keys of the input object in (all of it when keys is
// nil or in is not an object).
func prune(in ast.Value, keys []string) ast.Value {
	obj, ok := in.(ast.Object)
	if !ok || keys == nil {
		return in
	}
	out := ast.NewObject()
	for _, k := range keys {
		if v := obj.Get(ast.StringTerm(k)); v != nil {
			out.Insert(ast.StringTerm(k), v)
		}
	}
	return out
}

// TestConformance runs OPA's own conformance cases (the ones OPA runs
// against its interpreter and its wasm target) through the interpreter and
// through this package's target, each with strict builtin errors, and
// requires the same result set, or errors of the same code. Each case runs
// once more on the compiled engine with the input cut down to the keys
// Program.InputKeys names. Cases that need a data document are left out:
// the compiled engine's data is always empty.
func TestConformance(t *testing.T) {
	ctx := context.Background()
	var ran, results, errs, pruned int
	for _, tc := range loadCases(t) {
		if tc.Data != nil || len(tc.Env) > 0 {
			continue
		}
		ran++
		name := strings.TrimPrefix(tc.Filename, "v1/") + "/" + tc.Note
		in := input(tc)
		want, werr := run(ctx, tc, "", in)
		got, gerr := run(ctx, tc, irvm.Target, in)
		switch {
		case werr != nil && gerr != nil:
			if code(werr) != code(gerr) {
				t.Errorf("%s: interpreter error %v, compiled error %v", name, werr, gerr)
				continue
			}
			errs++
			continue
		case werr != nil || gerr != nil:
			t.Errorf("%s: interpreter error %v, compiled error %v", name, werr, gerr)
			continue
		}
		w, g := resultValue(want), resultValue(got)
		if w.Compare(g) != 0 {
			t.Errorf("%s:\n interpreter %v\n compiled    %v", name, w, g)
			continue
		}
		results++
		prog, err := irvm.Prepare(ctx, options(tc)...)
		if err != nil {
			t.Errorf("%s: Prepare: %v", name, err)
			continue
		}
		if prog.InputKeys() == nil || in == nil {
			continue
		}
		cut, cerr := run(ctx, tc, irvm.Target, prune(in, prog.InputKeys()))
		if cerr != nil || resultValue(cut).Compare(w) != 0 {
			t.Errorf("%s: with the input cut to %v: %v %v, want %v", name, prog.InputKeys(), resultValue(cut), cerr, w)
			continue
		}
		pruned++
	}
	t.Logf("%d cases: %d same results (%d again with the input cut to its keys read), %d same errors", ran, results, pruned, errs)
	if ran < 1000 {
		t.Fatalf("only %d cases ran; OPA's conformance suite has over 1,000", ran)
	}
}

func resultValue(rs rego.ResultSet) ast.Value {
	set := ast.NewSet()
	for _, r := range rs {
		obj := ast.NewObject()
		for k, v := range r.Bindings {
			if strings.HasPrefix(k, "__") || strings.HasPrefix(k, "$") {
				continue
			}
			obj.Insert(ast.StringTerm(k), ast.NewTerm(ast.MustInterfaceToValue(v)))
		}
		set.Add(ast.NewTerm(obj))
	}
	return set
}
