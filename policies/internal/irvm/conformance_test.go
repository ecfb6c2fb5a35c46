package irvm_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/open-policy-agent/opa/v1/storage/inmem"
	"github.com/open-policy-agent/opa/v1/test/cases"
	"github.com/open-policy-agent/opa/v1/topdown"
	"github.com/open-policy-agent/opa/v1/util"

	// toolgate's process-wide builtin fences (no network, no files), as
	// every engine runs with them.
	"github.com/toolgate/toolgate/policies/internal/irvm"
	_ "github.com/toolgate/toolgate/policies/rego"
)

// conformanceCase is one of OPA's conformance cases and the syntax its
// file is written in.
type conformanceCase struct {
	cases.TestCase
	version ast.RegoVersion
	name    string // "v1/<note>"
}

// loadConformance reads every case of OPA's conformance suite (v0 and v1
// syntax) from the OPA module in the module cache, the version go.mod
// names.
func loadConformance(t *testing.T) []conformanceCase {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/open-policy-agent/opa").Output()
	if err != nil {
		t.Fatalf("finding OPA's module: %v", err)
	}
	root := filepath.Join(strings.TrimSpace(string(out)), "v1", "test", "cases", "testdata")
	var all []conformanceCase
	for _, v := range []struct {
		dir     string
		version ast.RegoVersion
	}{{"v0", ast.RegoV0}, {"v1", ast.RegoV1}} {
		set, err := cases.Load(filepath.Join(root, v.dir))
		if err != nil {
			t.Fatal(err)
		}
		for _, tc := range set.Sorted().Cases {
			all = append(all, conformanceCase{TestCase: tc, version: v.version, name: v.dir + "/" + tc.Note})
		}
	}
	return all
}

// exceptions reads testdata/conformance_exceptions.txt: "ENGINE CASE ::
// REASON" per line; # starts a comment.
func exceptions(t *testing.T) map[string]string {
	t.Helper()
	f, err := os.Open("../../testdata/conformance_exceptions.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		key, reason, ok := strings.Cut(line, " :: ")
		if !ok || strings.TrimSpace(reason) == "" {
			t.Fatalf("conformance_exceptions.txt: %q has no reason", line)
		}
		out[key] = reason
	}
	return out
}

// outcome is a case's result on one engine: its bindings as a set of
// objects, or its error.
type outcome struct {
	results ast.Set
	err     error
}

func modules(tc conformanceCase) ([]*ast.Module, error) {
	var ms []*ast.Module
	for i, src := range tc.Modules {
		m, err := ast.ParseModuleWithOpts(fmt.Sprintf("test-%d.rego", i), src, ast.ParserOptions{RegoVersion: tc.version, Capabilities: caps(tc)})
		if err != nil {
			return nil, err
		}
		ms = append(ms, m)
	}
	return ms, nil
}

// caps are the capabilities toolgate runs with: every builtin (the
// network ones are fenced process-wide), allow_net empty.
func caps(tc conformanceCase) *ast.Capabilities {
	c := ast.CapabilitiesForThisVersion(ast.CapabilitiesExperimentalKeywords(tc.ExperimentalKeywords))
	c.AllowNet = []string{}
	return c
}

func input(tc conformanceCase) *ast.Term {
	switch {
	case tc.InputTerm != nil:
		return ast.MustParseTerm(*tc.InputTerm)
	case tc.Input != nil:
		return ast.NewTerm(ast.MustInterfaceToValue(*tc.Input))
	}
	return nil
}

// interpreter runs the case in OPA's interpreter, with its data.
func interpreter(ctx context.Context, tc conformanceCase) outcome {
	ms, err := modules(tc)
	if err != nil {
		return outcome{err: err}
	}
	opts := []func(*rego.Rego){
		rego.Query(tc.Query),
		rego.SetRegoVersion(tc.version),
		rego.Capabilities(caps(tc)),
		rego.StrictBuiltinErrors(tc.StrictError),
	}
	if tc.Data != nil {
		opts = append(opts, rego.Store(inmem.NewFromObject(*tc.Data)))
	}
	for _, m := range ms {
		opts = append(opts, rego.ParsedModule(m))
	}
	pq, err := rego.New(opts...).PrepareForEval(ctx)
	if err != nil {
		return outcome{err: err}
	}
	var eo []rego.EvalOption
	if in := input(tc); in != nil {
		eo = append(eo, rego.EvalParsedInput(in.Value))
	}
	rs, err := pq.Eval(ctx, eo...)
	if err != nil {
		return outcome{err: err}
	}
	set := ast.NewSet()
	for _, r := range rs {
		obj := ast.NewObject()
		for k, v := range r.Bindings {
			obj.Insert(ast.StringTerm(k), ast.NewTerm(ast.MustInterfaceToValue(v)))
		}
		set.Add(ast.NewTerm(obj))
	}
	return outcome{results: set}
}

// compiled runs the case on the compiled engine: refused (ErrData) when
// it has data.
func compiled(ctx context.Context, tc conformanceCase) (outcome, *irvm.Program) {
	ms, err := modules(tc)
	if err != nil {
		return outcome{err: err}, nil
	}
	q := irvm.Query{Query: tc.Query, Modules: ms, Capabilities: caps(tc), RegoVersion: tc.version}
	if tc.Data != nil {
		q.Data = *tc.Data
	}
	prog, err := irvm.Prepare(ctx, q)
	if err != nil {
		return outcome{err: err}, nil
	}
	o := compiledOnce(ctx, tc, prog)
	// Again: the rules Program.Constants names now give the value the
	// first evaluation made, shared.
	if again := compiledOnce(ctx, tc, prog); !sameOutcome(o, again) {
		return outcome{err: fmt.Errorf("a second evaluation differs: %v, %v after %v, %v", again.results, again.err, o.results, o.err)}, prog
	}
	return o, prog
}

// sameOutcome reports whether two evaluations gave the same results, or
// errors of the same text.
func sameOutcome(a, b outcome) bool {
	if (a.err == nil) != (b.err == nil) {
		return false
	}
	if a.err != nil {
		return a.err.Error() == b.err.Error()
	}
	return a.results.Compare(b.results) == 0
}

// compiledOnce evaluates prog once on the case's input.
func compiledOnce(ctx context.Context, tc conformanceCase, prog *irvm.Program) outcome {
	rs, err := prog.Eval(ctx, input(tc), irvm.Options{StrictBuiltinErrors: tc.StrictError})
	if err != nil {
		return outcome{err: err}
	}
	// As the interpreter's results reach the rego package's caller: as
	// JSON (sets as arrays, keys as strings).
	set := ast.NewSet()
	for _, r := range rs {
		j, err := ast.JSON(r.Value)
		if err != nil {
			return outcome{err: err}
		}
		set.Add(ast.NewTerm(ast.MustInterfaceToValue(j)))
	}
	return outcome{results: set}
}

// check compares an outcome with the case's own expectation, as OPA's
// topdown tests do (want_error: the text is contained; want_error_code:
// the code; want_result: the same bindings, with sort_bindings and
// ignore_generated_vars): "" when it holds.
func check(tc conformanceCase, o outcome) string {
	if tc.WantError != nil || tc.WantErrorCode != nil {
		if o.err == nil {
			return fmt.Sprintf("got %v, want an error", o.results)
		}
		if tc.WantError != nil && !strings.Contains(o.err.Error(), *tc.WantError) {
			return fmt.Sprintf("error %q, want one containing %q", o.err, *tc.WantError)
		}
		if tc.WantErrorCode != nil && code(o.err) != *tc.WantErrorCode {
			return fmt.Sprintf("error %v (code %s), want code %s", o.err, code(o.err), *tc.WantErrorCode)
		}
		return ""
	}
	if o.err != nil {
		return fmt.Sprintf("error %v", o.err)
	}
	if tc.WantResult == nil {
		return "the case expects nothing"
	}
	want := ast.NewSet()
	for _, b := range *tc.WantResult {
		want.Add(ast.NewTerm(ast.MustInterfaceToValue(b)))
	}
	got := ast.NewSet()
	o.results.Foreach(func(r *ast.Term) {
		obj := ast.NewObject()
		r.Value.(ast.Object).Foreach(func(k, v *ast.Term) {
			name := string(k.Value.(ast.String))
			if tc.IgnoreGeneratedVars && strings.HasPrefix(name, "__localq") {
				return
			}
			if tc.SortBindings {
				if j, err := ast.JSON(v.Value); err == nil {
					if arr, ok := j.([]any); ok {
						slices.SortFunc(arr, util.Compare)
						v = ast.NewTerm(ast.MustInterfaceToValue(arr))
					}
				}
			}
			obj.Insert(k, v)
		})
		got.Add(ast.NewTerm(obj))
	})
	if want.Compare(got) != 0 {
		return fmt.Sprintf("got %v, want %v", got, want)
	}
	return ""
}

// code is an error's OPA code.
func code(err error) string {
	var te *topdown.Error
	if errors.As(err, &te) {
		return te.Code
	}
	var ae ast.Errors
	if errors.As(err, &ae) && len(ae) > 0 {
		return ae[0].Code
	}
	return "none"
}

// TestConformance is the gate of OPA's conformance suite: every case of
// OPA's own suite (v0 and v1 syntax, with and without data), on each
// in-process engine, checked against the case's own expected result and
// with its own strict-error setting, as toolgate runs the engines
// (allow_net empty, the process-wide fences of package policies/rego). The
// compiled engine refuses a case with data (ErrData): an expected
// refusal. Every other difference must be listed, with its reason, in
// policies/testdata/conformance_exceptions.txt, and every listed
// exception must still fail. With -short, one case in ten runs.
//
// Each case runs twice on the compiled engine, the second time on the
// rule values the first made and shared (Program.Constants): the same
// outcome. Each case the compiled engine passes without data runs again with its
// input cut down to what Program.InputKeys and InputFields name, and
// given field by field as a Document: the same results. Each case whose
// plan binds its variables in one place runs again through EvalVars: the
// same result, or the same error, as through EvalDocument.
func TestConformance(t *testing.T) {
	ctx := context.Background()
	exc := exceptions(t)
	seen := map[string]bool{}
	all := loadConformance(t)
	type tally struct{ cases, pass, refused, excepted int }
	counts := map[string]*tally{"interpreter": {}, "compiled": {}}
	var pruned, withConstants, bound int
	start := time.Now()
	for i, tc := range all {
		if testing.Short() && i%10 != 0 {
			continue
		}
		for k, v := range tc.Env {
			t.Setenv(k, v)
		}
		results := map[string]string{}
		results["interpreter"] = check(tc, interpreter(ctx, tc))
		co, prog := compiled(ctx, tc)
		if prog != nil && len(prog.Constants()) > 0 {
			withConstants++
		}
		if tc.Data != nil && len(*tc.Data) > 0 {
			if !errors.Is(co.err, irvm.ErrData) {
				results["compiled"] = fmt.Sprintf("a case with data: %v, want ErrData", co.err)
			} else {
				results["compiled"] = "refused"
			}
		} else {
			results["compiled"] = check(tc, co)
		}
		for _, engine := range []string{"interpreter", "compiled"} {
			c := counts[engine]
			c.cases++
			key := engine + " " + tc.name
			reason, listed := exc[key]
			seen[key] = true
			switch msg := results[engine]; {
			case msg == "refused":
				c.refused++
			case msg == "" && listed:
				t.Errorf("%s: passes, but conformance_exceptions.txt lists it (%s)", key, reason)
			case msg == "":
				c.pass++
			case listed:
				c.excepted++
			default:
				t.Errorf("%s: %s", key, msg)
			}
		}
		if prog != nil && prog.Vars() != nil {
			if msg := checkVars(ctx, tc, prog); msg != "" {
				t.Errorf("compiled %s: %s", tc.name, msg)
			} else {
				bound++
			}
		}
		if results["compiled"] == "" && prog != nil && tc.version == ast.RegoV1 && tc.WantResult != nil && tc.WantError == nil && tc.WantErrorCode == nil {
			if msg := checkInputCuts(ctx, tc, prog); msg != "" {
				t.Errorf("compiled %s: %s", tc.name, msg)
			} else {
				pruned++
			}
		}
	}
	if !testing.Short() {
		for key := range exc {
			if !seen[key] {
				t.Errorf("conformance_exceptions.txt lists %s, which is no case", key)
			}
		}
	}
	for _, e := range []string{"interpreter", "compiled"} {
		c := counts[e]
		t.Logf("%s: %d cases, %d pass, %d refused (data), %d documented exceptions", e, c.cases, c.pass, c.refused, c.excepted)
	}
	t.Logf("%d compiled cases again with the input cut and as a Document; %v", pruned, time.Since(start).Round(time.Millisecond))
	t.Logf("%d compiled cases with rules made once and shared (Program.Constants), each evaluated twice", withConstants)
	t.Logf("%d compiled cases again through EvalVars (Program.Vars)", bound)
	if n := counts["compiled"].cases; n < len(all)/10 || !testing.Short() && n < 4000 {
		t.Fatalf("only %d cases ran; OPA's suite has over 4,000", n)
	}
}

// checkInputCuts runs a case the compiled engine passed again with its
// input cut to what the plan reads, and given as a Document: "" when the
// results are the same.
func checkInputCuts(ctx context.Context, tc conformanceCase, prog *irvm.Program) string {
	in := input(tc)
	if in == nil || prog.InputKeys() == nil {
		return ""
	}
	o := irvm.Options{StrictBuiltinErrors: tc.StrictError}
	whole, err := prog.Eval(ctx, in, o)
	if err != nil {
		return err.Error()
	}
	want := ast.NewSet(whole...)
	cut := prune(in.Value, prog)
	rs, err := prog.Eval(ctx, ast.NewTerm(cut), o)
	if err != nil || ast.NewSet(rs...).Compare(want) != 0 {
		return fmt.Sprintf("with the input cut to %v: %v %v, want %v", cut, rs, err, want)
	}
	if obj, ok := in.Value.(ast.Object); ok {
		byDoc, err := prog.EvalDocument(ctx, irvm.ObjectDocument(obj), o)
		if err != nil || ast.NewSet(byDoc...).Compare(want) != 0 {
			return fmt.Sprintf("given as a Document: %v %v, want %v", byDoc, err, want)
		}
	}
	return ""
}

// checkVars runs a case whose plan binds its variables in one place
// (Program.Vars) through EvalVars and through EvalDocument, its input
// given as a Document: "" when they give the same result, or errors of
// the same text; a case without input is given an empty object, one whose
// input is not an object is not run.
func checkVars(ctx context.Context, tc conformanceCase, prog *irvm.Program) string {
	obj := ast.NewObject()
	if in := input(tc); in != nil {
		var ok bool
		if obj, ok = in.Value.(ast.Object); !ok {
			return ""
		}
	}
	o := irvm.Options{StrictBuiltinErrors: tc.StrictError}
	rs, err := prog.EvalDocument(ctx, irvm.ObjectDocument(obj), o)
	vals := make([]*ast.Term, len(prog.Vars()))
	ok, verr := prog.EvalVars(ctx, irvm.ObjectDocument(obj), o, vals)
	if (err == nil) != (verr == nil) || err != nil && err.Error() != verr.Error() {
		return fmt.Sprintf("EvalVars: error %v, EvalDocument: error %v", verr, err)
	}
	if err != nil {
		return ""
	}
	got := ast.NewSet()
	if ok {
		r := ast.NewObject()
		for i, name := range prog.Vars() {
			r.Insert(ast.StringTerm(name), vals[i])
		}
		got.Add(ast.NewTerm(r))
	}
	if want := ast.NewSet(rs...); got.Compare(want) != 0 {
		return fmt.Sprintf("EvalVars: %v, EvalDocument: %v", got, want)
	}
	return ""
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

// TestConformanceExceptionsSorted keeps the exceptions file readable: one
// entry per case, sorted.
func TestConformanceExceptionsSorted(t *testing.T) {
	b, err := os.ReadFile("../../testdata/conformance_exceptions.txt")
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, line := range strings.Split(string(b), "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			key, _, _ := strings.Cut(line, " :: ")
			keys = append(keys, key)
		}
	}
	if !sort.StringsAreSorted(keys) {
		t.Error("conformance_exceptions.txt is not sorted")
	}
	if len(slices.Compact(slices.Clone(keys))) != len(keys) {
		t.Error("conformance_exceptions.txt lists a case twice")
	}
}

// TestRegexLiteralsAgree: regex.match with a constant pattern gives on the
// compiled engine what it gives in OPA's interpreter, on strings that lack
// the pattern's literals (answered without the expression, prefilter.go),
// strings that hold them, and operands that are not strings (the
// builtin's type error, strict or not); with the pattern a constant, or
// taken from a list.
func TestRegexLiteralsAgree(t *testing.T) {
	ctx := context.Background()
	patterns := []string{
		`[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}`, `^ab(cd)+$`, `x{2,}y`, `(?i)secret`, `é+z`,
	}
	inputs := []string{`"EGFR kinase inhibitors"`, `"dana@example.org"`, `"dana@example"`, `"abcdcd"`, `"abcd "`,
		`"xxy"`, `"xy"`, `"SeCrEt"`, `"ééz"`, `"ez"`, `""`, `42`, `["a@b.cd"]`, `null`}
	// agree checks one module on one input: the compiled engine's outcome
	// is the interpreter's.
	agree := func(what, module, in string, strict bool) {
		term := `{"s": ` + in + `}`
		tc := conformanceCase{version: ast.RegoV1, name: what + " " + in}
		tc.Query, tc.Modules, tc.InputTerm, tc.StrictError = "x = data.p.r", []string{module}, &term, strict
		want, got := interpreter(ctx, tc), compiledOutcome(ctx, tc)
		if !sameOutcome(got, want) {
			t.Errorf("%s, input %s, strict %v: compiled %v, %v; interpreter %v, %v", what, in, strict, got.results, got.err, want.results, want.err)
		}
	}
	for _, pat := range patterns {
		// The pattern a constant (prefilter.go's literals at compile time).
		constant := fmt.Sprintf("package p\nr := regex.match(%q, input.s)\n", pat)
		// The pattern computed: taken from a list (prefilter.go's cache).
		listed := fmt.Sprintf("package p\npatterns := [%q, \"z\"]\nr := [m | some p in patterns; m := regex.match(p, input.s)]\n", pat)
		for _, in := range inputs {
			for _, strict := range []bool{false, true} {
				agree(fmt.Sprintf("regex.match(%q)", pat), constant, in, strict)
				agree(fmt.Sprintf("regex.match(%q from a list)", pat), listed, in, strict)
			}
		}
		// The builtin replaced under with, by a function or a value: the
		// replacement decides.
		for _, mock := range []string{"always", "true"} {
			mocked := fmt.Sprintf("package p\nr := x if { x := regex.match(%q, input.s) with regex.match as %s }\nalways(_, _) := true\n", pat, mock)
			for _, in := range inputs {
				agree(fmt.Sprintf("regex.match(%q) with regex.match as %s", pat, mock), mocked, in, false)
			}
		}
	}
}

// compiledOutcome is compiled's outcome.
func compiledOutcome(ctx context.Context, tc conformanceCase) outcome {
	o, _ := compiled(ctx, tc)
	return o
}
