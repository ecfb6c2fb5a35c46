// Package rego runs toolgate's Rego policies with OPA: it reads a policy's
// files, compiles them once for OPA's interpreter or for toolgate's
// compiled engine (policies/internal/irvm), runs their unit tests, and
// writes the decision rule the wasm engine compiles (DecisionRego). It
// also fences, for the whole process, the OPA builtins that could reach
// the network, files or the environment (see sandbox.go).
//
// A Policy satisfies policies.Evaluator; Host is the policies.RegoHost that
// cmd gives policies.Config.Load. It is the only package besides wasm that
// links OPA.
package rego

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/metrics"
	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/open-policy-agent/opa/v1/storage/inmem"
	"github.com/open-policy-agent/opa/v1/tester"
	"github.com/open-policy-agent/opa/v1/topdown"

	"github.com/toolgate/toolgate/policies"
	"github.com/toolgate/toolgate/policies/internal/irvm"
)

// deniedBuiltins are the Rego builtins a toolgate policy may not call: they
// reach the network, the environment or the clock of the host, and a policy
// that can wait on the network can stall calls.
var deniedBuiltins = map[string]bool{
	"http.send":          true,
	"net.lookup_ip_addr": true,
	"opa.runtime":        true,
}

// capabilities is this OPA's builtins minus deniedBuiltins, and no host
// for the builtins that may reach one (AllowNet empty, not nil: nil would
// allow every host). Every engine gives them to every builtin call.
var capabilities = func() *ast.Capabilities {
	c := ast.CapabilitiesForThisVersion()
	kept := c.Builtins[:0]
	for _, b := range c.Builtins {
		if !deniedBuiltins[b.Name] {
			kept = append(kept, b)
		}
	}
	c.Builtins = kept
	c.AllowNet = []string{}
	return c
}()

// noMetrics is shared by every evaluation: toolgate reads no OPA metrics.
var noMetrics = metrics.NoOp()

// Policy is one compiled Rego policy: its modules parsed, compiled and its
// decision query prepared once; Eval never compiles. It is immutable and
// safe for concurrent use.
type Policy struct {
	name     string
	pkg      string                 // the decision package, e.g. "toolgate.bounds"
	query    rego.PreparedEvalQuery // the interpreter's
	program  *irvm.Program          // the compiled engine's
	shapes   *shapeProgram          // the compiled engine's first pass, when the rules take one (shapes.go)
	decision []*ast.Module          // the modules the decision reads (tests excluded), by file name
	modules  map[string]*ast.Module // every module, tests included
	tests    int
	version  string
	engine   string // policies.EngineInterpreter or policies.EngineCompiled
}

var _ policies.Evaluator = (*Policy)(nil)

// Load reads a policy from a .rego file or a folder of them (searched
// recursively); files ending in _test.rego hold its unit tests.
func Load(name, path string) (*Policy, error) {
	files, err := Read(path)
	if err != nil {
		return nil, fmt.Errorf("policy %q: %w", name, err)
	}
	return Compile(name, files)
}

// Read reads a .rego file, or every .rego file below a folder (hidden
// entries skipped), by path: the files Load compiles.
func Read(path string) (map[string][]byte, error) {
	files := map[string][]byte{}
	info, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !info.IsDir() {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		files[path] = b
		return files, nil
	}
	err = filepath.WalkDir(path, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p != path && strings.HasPrefix(d.Name(), ".") {
			// Hidden entries are skipped: a Kubernetes ConfigMap volume shows
			// every file twice, once in a hidden "..2026_..." folder.
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() || !strings.HasSuffix(p, ".rego") {
			return nil
		}
		b, err := os.ReadFile(p)
		files[p] = b
		return err
	})
	if err != nil {
		return nil, err
	}
	return files, nil
}

// Compile compiles a policy from its files (name to Rego v1 source).
// Every non-test file must declare the same package: that package is the
// decision document, read for deny, allow and inject. Builtins that reach
// the network or the environment (http.send, net.lookup_ip_addr,
// opa.runtime) are refused at compile time.
func Compile(name string, files map[string][]byte) (*Policy, error) {
	if len(files) == 0 {
		return nil, fmt.Errorf("policy %q: no .rego files", name)
	}
	names := make([]string, 0, len(files))
	for f := range files {
		names = append(names, f)
	}
	sort.Strings(names)
	h := sha256.New()
	p := &Policy{name: name, modules: map[string]*ast.Module{}}
	for _, f := range names {
		h.Write([]byte(f))
		h.Write([]byte{0})
		h.Write(files[f])
		h.Write([]byte{0})
		m, err := ast.ParseModuleWithOpts(f, string(files[f]), ast.ParserOptions{RegoVersion: ast.RegoV1})
		if err != nil {
			return nil, fmt.Errorf("policy %q: %w", name, err)
		}
		p.modules[f] = m
		if strings.HasSuffix(f, "_test.rego") {
			p.tests++
			continue
		}
		p.decision = append(p.decision, m)
		pkg := strings.TrimPrefix(m.Package.Path.String(), "data.")
		switch {
		case p.pkg == "":
			p.pkg = pkg
		case p.pkg != pkg:
			return nil, fmt.Errorf("policy %q: %s declares package %s, but another file declares %s; one policy is one package", name, f, pkg, p.pkg)
		}
	}
	if p.pkg == "" {
		return nil, fmt.Errorf("policy %q: only test files; add the policy's own .rego file", name)
	}
	p.version = hex.EncodeToString(h.Sum(nil))[:12]
	// Compile everything (tests included) once to report every error with
	// its location, with the restricted builtins.
	all := ast.NewCompiler().WithCapabilities(capabilities).WithEnablePrintStatements(false)
	if all.Compile(p.modules); all.Failed() {
		return nil, fmt.Errorf("policy %q: %w", name, all.Errors)
	}
	p.engine = policies.EngineInterpreter
	var err error
	if p.query, err = p.prepare(); err != nil {
		return nil, fmt.Errorf("policy %q: the decision rules have the wrong shape (deny must be a set, allow a boolean, inject an object): %w", name, err)
	}
	return p, nil
}

// maxCompiledRules is the number of rules in a policy's decision package
// past which Compiled keeps the policy in OPA's interpreter: the
// interpreter indexes rules (it evaluates only those whose conditions on
// input can hold), the compiled engine evaluates every rule, and with
// rules keyed on input.tool the two break even at about 100 rules
// (BenchmarkRuleCount; docs/policies.md#engines).
const maxCompiledRules = 100

// Compiled is the policy on the compiled engine: the same decision query,
// planned once by OPA's planner and run by package irvm. A policy whose
// decision package holds more than maxCompiledRules rules stays in the
// interpreter, where it runs faster (Engine says which).
func (p *Policy) Compiled(ctx context.Context) (*Policy, error) {
	if p.rules() > maxCompiledRules {
		return p, nil
	}
	return p.compiledEngine(ctx)
}

// rules counts the rules of the decision package.
func (p *Policy) rules() int {
	n := 0
	for _, m := range p.decision {
		n += len(m.Rules)
	}
	return n
}

// compiledEngine is the policy on the compiled engine, whatever its size.
func (p *Policy) compiledEngine(ctx context.Context) (*Policy, error) {
	c := *p
	c.engine = policies.EngineCompiled
	var err error
	if c.program, err = irvm.Prepare(ctx, irvm.Query{
		Query:        decisionQuery(p.pkg, p.decision, " = "),
		Modules:      p.decision,
		Capabilities: capabilities,
	}); err != nil {
		return nil, fmt.Errorf("policy %q cannot run on the compiled engine (use engine: interpreter): %w", p.name, err)
	}
	c.shapes = p.shapeProgram()
	return &c, nil
}

// shapeProgram compiles the decision modules and returns their shapes
// program, nil when they take none.
func (p *Policy) shapeProgram() *shapeProgram {
	mods := make(map[string]*ast.Module, len(p.decision))
	for i, m := range p.decision {
		mods[strconv.Itoa(i)] = m
	}
	comp := ast.NewCompiler().WithCapabilities(capabilities).WithEnablePrintStatements(false)
	if comp.Compile(mods); comp.Failed() {
		return nil
	}
	return newShapeProgram(p.pkg, comp.Modules)
}

// prepare prepares the decision query in the interpreter.
func (p *Policy) prepare() (rego.PreparedEvalQuery, error) {
	return rego.New(p.options()...).PrepareForEval(context.Background())
}

// options are the decision query's, on any engine.
func (p *Policy) options() []func(*rego.Rego) {
	return queryOptions(decisionQuery(p.pkg, p.decision, " = "), p.decision)
}

// queryOptions prepare query over modules as every toolgate query is:
// restricted builtins, strict builtin errors, Rego v1, no data.
func queryOptions(query string, modules []*ast.Module) []func(*rego.Rego) {
	opts := []func(*rego.Rego){
		rego.Query(query),
		rego.Capabilities(capabilities),
		rego.StrictBuiltinErrors(true),
		rego.SetRegoVersion(ast.RegoV1),
		rego.Store(inmem.New()),
	}
	for _, m := range modules {
		opts = append(opts, rego.ParsedModule(m))
	}
	return opts
}

// decisionQuery reads only the decision rules the package defines (deny,
// allow, inject, approval, and the answer rules withhold and redact) rather than the whole package document, so helper rules
// are evaluated only as far as the decision needs them. A partial rule
// (deny contains ..., inject[k] := ...) is always defined, empty when no
// rule fires, and is read directly; a rule that may be undefined (allow
// without a default, a complete deny or inject) is read through a
// comprehension that is defined either way. bind is how each is bound:
// " := " in a rule body, " = " in a query whose variables must keep their
// names.
func decisionQuery(pkg string, modules []*ast.Module, bind string) string {
	type kind struct{ defined, partial, hasDefault bool }
	rules := map[string]*kind{}
	for _, m := range modules {
		for _, r := range m.Rules {
			ref := r.Head.Ref()
			if len(ref) == 0 {
				continue
			}
			name := strings.Trim(ref[0].Value.String(), `"`)
			k := rules[name]
			if k == nil {
				k = &kind{partial: true}
				rules[name] = k
			}
			k.defined = true
			k.hasDefault = k.hasDefault || r.Default
			if r.Head.RuleKind() != ast.MultiValue && len(ref) < 2 {
				k.partial = false
			}
		}
	}
	ref := "data." + pkg
	var parts []string
	if k := rules["deny"]; k != nil {
		if k.partial {
			parts = append(parts, "deny"+bind+ref+".deny")
		} else {
			parts = append(parts, "deny"+bind+"[m | some m in "+ref+".deny]")
		}
	}
	if k := rules["allow"]; k != nil {
		if k.hasDefault {
			parts = append(parts, "allow"+bind+"["+ref+".allow]")
		} else {
			parts = append(parts, "allow"+bind+"[a | a := "+ref+".allow]")
		}
	}
	if k := rules["inject"]; k != nil {
		if k.partial {
			parts = append(parts, "inject"+bind+ref+".inject")
		} else {
			parts = append(parts, "inject"+bind+"{k: v | some k, v in "+ref+".inject}")
		}
	}
	if k := rules["approval"]; k != nil {
		parts = append(parts, "approval"+bind+"[a | a := "+ref+".approval]")
	}
	// The answer rules (policies bound to a tool's answers), read as deny.
	for _, name := range []string{"withhold", "redact"} {
		if k := rules[name]; k != nil {
			if k.partial {
				parts = append(parts, name+bind+ref+"."+name)
			} else {
				parts = append(parts, name+bind+"[m | some m in "+ref+"."+name+"]")
			}
		}
	}
	if len(parts) == 0 {
		return "true"
	}
	return strings.Join(parts, "; ")
}

// Name is the policy's name.
func (p *Policy) Name() string { return p.name }

// Package is the decision package, such as "toolgate.bounds".
func (p *Policy) Package() string { return p.pkg }

// Version is a content hash of the policy's files.
func (p *Policy) Version() string { return p.version }

// Engine is EngineInterpreter or EngineCompiled.
func (p *Policy) Engine() string { return p.engine }

// FirstPass reports whether the compiled engine decides the policy's
// common calls in its first pass over the rules (shapes.go).
func (p *Policy) FirstPass() bool { return p.shapes != nil }

// Tests is how many test files the policy has.
func (p *Policy) Tests() int { return p.tests }

// Eval evaluates the prepared decision query against one input.
func (p *Policy) Eval(ctx context.Context, in *policies.Input) (policies.Result, error) {
	return p.EvalBefore(ctx, in, time.Time{})
}

// EvalBefore is Eval bounded by deadline (none when zero) as well as ctx.
// The compiled engine watches the deadline itself, which costs less than a
// context with a timer; OPA's interpreter gets one.
func (p *Policy) EvalBefore(ctx context.Context, in *policies.Input, deadline time.Time) (policies.Result, error) {
	if err := policies.CheckInputDepth(in); err != nil {
		return policies.Result{}, err
	}
	var doc map[string]any
	if p.shapes != nil {
		if res, ok := p.shapes.decide(in, deadline); ok {
			return res, nil
		}
	}
	if p.program != nil {
		var vals [maxVars]*ast.Term
		b, err := p.evalCompiled(ctx, in, deadline, vals[:0])
		if errors.Is(err, errNotObject) {
			return policies.Result{}, fmt.Errorf("data.%s: %w", p.pkg, err)
		}
		if err != nil {
			return policies.Result{}, p.evalError(ctx, err)
		}
		if res, ok := fastResult(b); ok {
			return res, nil
		}
		if doc, err = resultDoc(b); err != nil {
			return policies.Result{}, fmt.Errorf("data.%s: %w", p.pkg, err)
		}
	} else {
		if !deadline.IsZero() {
			var cancel context.CancelFunc
			ctx, cancel = context.WithDeadline(ctx, deadline)
			defer cancel()
		}
		// Cancellation through a callback on ctx rather than OPA's goroutine
		// per evaluation, and no per-evaluation metrics: both cost more than
		// small policies do.
		c := topdown.NewCancel()
		stop := context.AfterFunc(ctx, c.Cancel)
		defer stop()
		rs, err := p.query.Eval(ctx, rego.EvalParsedInput(ast.LazyObject(inputValue(in))),
			rego.EvalExternalCancel(c), rego.EvalMetrics(noMetrics))
		if err != nil {
			return policies.Result{}, p.evalError(ctx, err)
		}
		if len(rs) > 0 {
			doc = rs[0].Bindings
		}
	}
	if doc == nil {
		return policies.Result{Allowed: true}, nil // the package defines nothing: no opinion
	}
	if a, ok := doc["allow"]; ok {
		// [] when allow is undefined, [value] otherwise.
		delete(doc, "allow")
		if arr, ok := a.([]any); ok && len(arr) == 1 {
			doc["allow"] = arr[0]
		}
	}
	res, err := policies.DecodeDecision(doc)
	if err != nil {
		return policies.Result{}, fmt.Errorf("data.%s: %w", p.pkg, err)
	}
	return res, nil
}

// bindings are the compiled engine's result: the decision query's
// variables and their values; defined false when the query has no
// result.
type bindings struct {
	names   []string
	vals    []*ast.Term
	defined bool
}

// errNotObject is evalCompiled's error for a result that is not an
// object.
var errNotObject = errors.New("the decision query's result is not an object")

// get is the value of the variable name, nil when there is none.
func (b *bindings) get(name string) *ast.Term {
	for i, n := range b.names {
		if n == name {
			return b.vals[i]
		}
	}
	return nil
}

// maxVars bounds the variables of a decision query (decisionQuery binds
// six at most) that evalCompiled reads without building the result's
// object.
const maxVars = 8

// evalCompiled evaluates the decision query on the compiled engine: when
// its plan binds the variables in one place (irvm.Program.Vars), their
// values as the plan leaves them, in vals (cap maxVars, the caller's:
// nothing to allocate); otherwise read from the result set.
func (p *Policy) evalCompiled(ctx context.Context, in *policies.Input, deadline time.Time, vals []*ast.Term) (bindings, error) {
	o := irvm.Options{StrictBuiltinErrors: true, Deadline: deadline}
	if names := p.program.Vars(); names != nil && len(names) <= cap(vals) {
		b := bindings{names: names, vals: vals[:len(names)]}
		var err error
		b.defined, err = p.program.EvalVars(ctx, document{in}, o, b.vals)
		return b, err
	}
	rs, err := p.program.EvalDocument(ctx, document{in}, o)
	if err != nil || len(rs) == 0 {
		return bindings{}, err
	}
	obj, ok := rs[0].Value.(ast.Object) // one result: the query binds each variable once
	if !ok {
		return bindings{}, errNotObject
	}
	b := bindings{defined: true}
	obj.Foreach(func(k, v *ast.Term) {
		name, _ := k.Value.(ast.String)
		b.names = append(b.names, string(name))
		b.vals = append(b.vals, v)
	})
	return b, nil
}

// fastResult reads the compiled engine's result straight into a Result
// in the common case: no deny message, allow true or undefined, inject
// headers that are valid. Anything else (ok false) goes through resultDoc
// and policies.DecodeDecision, which also word its errors.
func fastResult(b bindings) (policies.Result, bool) {
	if !b.defined {
		return policies.Result{}, false
	}
	for _, k := range emptySetNames {
		if v := b.get(k); v != nil {
			if set, isSet := v.Value.(ast.Set); !isSet || set.Len() != 0 {
				return policies.Result{}, false
			}
		}
	}
	if v := b.get("allow"); v != nil {
		// [] when allow is undefined, [true] when it holds.
		arr, isArr := v.Value.(*ast.Array)
		if !isArr || !(arr.Len() == 0 || arr.Len() == 1 && arr.Elem(0).Value.Compare(ast.Boolean(true)) == 0) {
			return policies.Result{}, false
		}
	}
	if v := b.get("approval"); v != nil {
		// [] when approval is undefined; anything else is decoded by
		// policies.DecodeDecision.
		if arr, isArr := v.Value.(*ast.Array); !isArr || arr.Len() != 0 {
			return policies.Result{}, false
		}
	}
	res := policies.Result{Allowed: true}
	if v := b.get("inject"); v != nil {
		inj, isObj := v.Value.(ast.Object)
		if !isObj {
			return policies.Result{}, false
		}
		m := make(map[string]string, inj.Len())
		bad := inj.Until(func(hk, hv *ast.Term) bool {
			hname, nameOK := hk.Value.(ast.String)
			val, valOK := hv.Value.(ast.String)
			if !nameOK || !valOK {
				return true
			}
			header, ok := policies.InjectHeader(string(hname), string(val))
			if ok {
				m[header] = string(val)
			}
			return !ok
		})
		if bad {
			return policies.Result{}, false
		}
		res.Inject = m
	}
	return res, true
}

// emptySetNames are the decision's sets fastResult requires empty.
var emptySetNames = []string{"deny", "withhold", "redact"}

// resultDoc is the compiled engine's result as the decision query's
// bindings (nil when it has none), in the JSON shapes
// policies.DecodeDecision reads.
func resultDoc(b bindings) (map[string]any, error) {
	if !b.defined {
		return nil, nil
	}
	doc := make(map[string]any, len(b.names))
	for i, name := range b.names {
		v, err := ast.JSON(b.vals[i].Value)
		if err != nil {
			return nil, err
		}
		doc[name] = v
	}
	return doc, nil
}

// evalError is an evaluation's error: the context's when it ended it, a
// deadline's as context.DeadlineExceeded.
func (p *Policy) evalError(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return context.DeadlineExceeded
	}
	return regoError(err)
}

// regoError shortens OPA's evaluation errors to one line without input
// values where OPA provides a code.
func regoError(err error) error {
	msg := err.Error()
	if i := strings.IndexByte(msg, '\n'); i >= 0 {
		msg = msg[:i]
	}
	return errors.New(msg)
}

// RunTests runs the policy's test_ rules through OPA's tester. On the
// compiled engine, it runs each of them there too: a test whose outcome
// differs fails, so a policy the compiled engine would decide otherwise
// than the interpreter never takes effect.
func (p *Policy) RunTests(ctx context.Context) ([]policies.TestResult, error) {
	if p.tests == 0 {
		return nil, nil
	}
	compiler := ast.NewCompiler().WithCapabilities(capabilities).WithEnablePrintStatements(true)
	ch, err := tester.NewRunner().
		SetCompiler(compiler).
		SetStore(inmem.New()).
		SetTimeout(10*time.Second).
		SetParallel(1).
		CapturePrintOutput(true).
		RaiseBuiltinErrors(true).
		SetModules(p.modules).
		RunTests(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("policy %q: %w", p.name, err)
	}
	var out []policies.TestResult
	for r := range ch {
		tr := policies.TestResult{Name: r.Package + "." + r.Name, Pass: r.Pass(), Duration: r.Duration}
		if r.Location != nil {
			tr.Location = fmt.Sprintf("%s:%d", r.Location.File, r.Location.Row)
		}
		if r.Error != nil {
			tr.Err = r.Error.Error()
		}
		out = append(out, tr)
	}
	if p.engine == policies.EngineCompiled {
		out = p.compareCompiled(ctx, out)
	}
	// OPA reports tests in no fixed order; report them in file order.
	sort.Slice(out, func(i, j int) bool { return lessLocation(out[i].Location, out[j].Location) })
	return out, nil
}

// compareCompiled evaluates each test rule of results on the compiled
// engine and fails those whose outcome there differs from the tester's.
func (p *Policy) compareCompiled(ctx context.Context, results []policies.TestResult) []policies.TestResult {
	if len(results) == 0 {
		return results
	}
	// One query for every test (see compiledTests); an error in one test
	// fails the whole query: then each test runs alone.
	names := make([]string, len(results))
	for i, r := range results {
		names[i] = r.Name
	}
	outcomes, err := p.compiledTests(ctx, names)
	if err != nil {
		outcomes = make([]error, len(names))
		for i, n := range names {
			o, err := p.compiledTests(ctx, []string{n})
			if err != nil {
				o = []error{err}
			}
			outcomes[i] = o[0]
		}
	}
	for i := range results {
		if r := &results[i]; r.Pass && outcomes[i] != nil {
			r.Pass, r.Err = false, "passes in OPA's interpreter, but not on the compiled engine: "+outcomes[i].Error()
		}
	}
	return results
}

// errTestFailed is a test rule false or undefined on the compiled engine.
var errTestFailed = errors.New("the rule is false or undefined")

// compiledTests evaluates the test rules names (their refs, as
// policies.TestResult.Name: data.pkg.test_x) on the compiled engine: nil for each
// that passes.
func (p *Policy) compiledTests(ctx context.Context, names []string) ([]error, error) {
	// Each test read through a comprehension, so an undefined test does
	// not leave the others undefined: t0 = [v | v := data.pkg.test_a]; ...
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = fmt.Sprintf("t%d = [v | v := %s]", i, n)
	}
	var modules []*ast.Module
	for _, f := range slices.Sorted(maps.Keys(p.modules)) {
		modules = append(modules, p.modules[f])
	}
	prog, err := irvm.Prepare(ctx, irvm.Query{Query: strings.Join(parts, "; "), Modules: modules, Capabilities: capabilities})
	if err != nil {
		return nil, err
	}
	rs, err := prog.Eval(ctx, nil, irvm.Options{StrictBuiltinErrors: true})
	if err != nil {
		return nil, regoError(err)
	}
	var got ast.Object
	if len(rs) == 1 {
		got, _ = rs[0].Value.(ast.Object)
	}
	out := make([]error, len(names))
	for i := range names {
		out[i] = errTestFailed
		if got == nil {
			continue
		}
		if v := got.Get(ast.StringTerm(fmt.Sprintf("t%d", i))); v != nil && v.Value.Compare(ast.NewArray(ast.BooleanTerm(true))) == 0 {
			out[i] = nil
		}
	}
	return out, nil
}

// lessLocation orders "file:line" locations by file, then line number.
func lessLocation(a, b string) bool {
	fa, la, _ := strings.Cut(a, ":")
	fb, lb, _ := strings.Cut(b, ":")
	if fa != fb {
		return fa < fb
	}
	na, _ := strconv.Atoi(la)
	nb, _ := strconv.Atoi(lb)
	return na < nb
}
