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

// prune keeps only the parts of the input object in that prog reads: its
// InputKeys, and of those its InputFields.
func prune(in ast.Value, prog *irvm.Program) ast.Value {
	obj, ok := in.(ast.Object)
	if !ok || prog.InputKeys() == nil {
		return in
	}
	out := ast.NewObject()
	for _, k := range prog.InputKeys() {
		v := obj.Get(ast.StringTerm(k))
		if v == nil {
			continue
		}
		if sub, ok := v.Value.(ast.Object); ok && prog.InputFields(k) != nil {
			cut := ast.NewObject()
			for _, f := range prog.InputFields(k) {
				if fv := sub.Get(ast.StringTerm(f)); fv != nil {
					cut.Insert(ast.StringTerm(f), fv)
				}
			}
			v = ast.NewTerm(cut)
		}
		out.Insert(ast.StringTerm(k), v)
	}
	return out
}

// TestConformance runs OPA's own conformance cases (the ones OPA runs
// against its interpreter and its wasm target) through the interpreter and
// through this package's target, each with strict builtin errors, and
// requires the same result set, or errors of the same code. Each case runs
// once more on the compiled engine with the input cut down to what
// Program.InputKeys and InputFields name. Cases that need a data document are left out:
// the compiled engine's data is always empty.
func TestConformance(t *testing.T) {
	ctx := context.Background()
	var ran, results, errs, pruned, documents int
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
		cut := prune(in, prog)
		got, cerr := run(ctx, tc, irvm.Target, cut)
		if cerr != nil || resultValue(got).Compare(w) != 0 {
			t.Errorf("%s: with the input cut to %v: %v %v, want %v", name, cut, resultValue(got), cerr, w)
			continue
		}
		// And given field by field, as a Document: the same values as
		// Eval's (its result keys are the query's variables, which OPA may
		// have renamed: compare Eval's and EvalDocument's).
		if obj, ok := in.(ast.Object); ok {
			byTerm, err1 := prog.Eval(ctx, ast.NewTerm(in), irvm.Options{StrictBuiltinErrors: true})
			byDoc, err2 := prog.EvalDocument(ctx, irvm.ObjectDocument(obj), irvm.Options{StrictBuiltinErrors: true})
			if err1 != nil || err2 != nil || ast.NewSet(byTerm...).Compare(ast.NewSet(byDoc...)) != 0 {
				t.Errorf("%s: Eval %v %v, EvalDocument %v %v", name, byTerm, err1, byDoc, err2)
				continue
			}
			documents++
		}
		pruned++
	}
	t.Logf("%d cases: %d same results (%d again with the input cut to what is read, %d given as a Document), %d same errors", ran, results, pruned, documents, errs)
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
