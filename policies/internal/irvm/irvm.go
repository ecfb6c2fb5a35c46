// Package irvm runs Rego policies in Go from OPA's plan of them: the
// intermediate representation (package ir) that OPA's planner makes of a
// compiled query and that OPA's WebAssembly compiler turns into wasm.
//
// Prepare parses, compiles, type-checks and plans a query with OPA's own
// front end (rego.PrepareForEval, on this package's target) and returns
// the Program; its Eval then walks the plan's statements over ast values
// and calls OPA's own builtin implementations (topdown), so values,
// comparisons and builtins behave exactly as in OPA's interpreter. What it
// saves is the interpreter's search machinery (unification, bindings,
// rule indexing and the virtual-document cache), which is most of the
// cost of evaluating a small policy: see docs/performance.md.
//
// Where it cannot be right it refuses rather than answer: a query with
// data (Query.Data not empty) is refused, the data document being always
// empty; a plan holding a statement this package does not run is refused
// at Prepare. The package is internal: its OPA target is registered (OPA
// finds target plugins only by a global registry), at init (see there),
// but answers only to Prepare, so nothing else in the process can run a
// query on it.
//
// A rule whose value cannot differ between evaluations (it reads neither
// input nor data and calls only pure builtins and rules like it; see
// markConstants) is made once, outside any with block, and shared by
// every later evaluation of the Program.
//
// Every evaluation is bounded (Options): by its deadline, read before
// builtin calls (every clockEvery calls, or once clockBytes of values were
// built) and at each value an iterating builtin (walk, numbers.range, ...)
// yields, and by a budget of the bytes of values it builds.
package irvm

import (
	"context"
	"errors"
	"sync/atomic"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/ir"
	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/open-policy-agent/opa/v1/storage/inmem"
	"github.com/open-policy-agent/opa/v1/topdown"
)

// target is the name of this package's OPA target.
const target = "toolgate-ir"

// init puts this package's target in OPA's registry of target plugins,
// where OPA finds them. It must happen before any query is prepared or
// evaluated: OPA reads that registry without its lock on every evaluation
// (PreparedEvalQuery.Eval looks up the target), so registering later, on
// the first Prepare, would race with evaluations already running.
func init() { rego.RegisterPlugin(target, plugin{}) }

type plugin struct{}

func (plugin) IsTarget(t string) bool { return t == target }

// ErrNotPrepare is the error of the target used other than through Prepare.
var ErrNotPrepare = errors.New("irvm: the toolgate-ir target runs only through irvm.Prepare")

func (plugin) PrepareForEval(ctx context.Context, pol *ir.Policy, opts ...rego.PrepareOption) (rego.TargetPluginEval, error) {
	slot, ok := ctx.Value(slotKey{}).(*prepareSlot)
	if !ok {
		return nil, ErrNotPrepare
	}
	cfg := &rego.PrepareConfig{}
	for _, o := range opts {
		o(cfg)
	}
	p, err := compile(pol, cfg.BuiltinFuncs())
	if err != nil {
		return nil, err
	}
	p.caps = slot.caps
	slot.p = p
	return refused{}, nil
}

type slotKey struct{}

type prepareSlot struct {
	p    *Program
	caps *ast.Capabilities
}

// refused is the rego package's evaluation of a query on this target:
// never run, as Prepare hands out the Program instead.
type refused struct{}

func (refused) Eval(context.Context, *rego.EvalContext, ast.Value) (ast.Value, error) {
	return nil, ErrNotPrepare
}

// ErrData is Prepare's error for a query given data: the compiled engine's
// data document is always empty, and a query that reads data would be
// answered as if it were.
var ErrData = errors.New("irvm: the compiled engine has no data document; a query with data must run in OPA's interpreter")

// Query is what Prepare plans.
type Query struct {
	// Query is the query, such as "x = data.p.deny". Its variables are the
	// keys of each result's object; declare them with = (x = ...), as OPA
	// may rename those declared with :=.
	Query string
	// Modules are the parsed modules the query may read.
	Modules []*ast.Module
	// Capabilities are the builtins the query may call and what they may
	// reach (AllowNet); given to the compiler and to every builtin call.
	// Default: OPA's for this version, which lets builtins reach any host.
	Capabilities *ast.Capabilities
	// RegoVersion is the query's syntax; default ast.RegoV1.
	RegoVersion ast.RegoVersion
	// Data is refused when not empty (ErrData).
	Data map[string]any
}

// Prepare prepares q: parsed, compiled, type-checked and planned by OPA,
// made ready to run.
func Prepare(ctx context.Context, q Query) (*Program, error) {
	if len(q.Data) > 0 {
		return nil, ErrData
	}
	v := q.RegoVersion
	if v == ast.RegoUndefined {
		v = ast.RegoV1
	}
	opts := []func(*rego.Rego){
		rego.Query(q.Query),
		rego.SetRegoVersion(v),
		rego.Store(inmem.New()),
		rego.Target(target),
	}
	if q.Capabilities != nil {
		opts = append(opts, rego.Capabilities(q.Capabilities))
	}
	for _, m := range q.Modules {
		opts = append(opts, rego.ParsedModule(m))
	}
	slot := &prepareSlot{caps: q.Capabilities}
	if _, err := rego.New(opts...).PrepareForEval(context.WithValue(ctx, slotKey{}, slot)); err != nil {
		return nil, err
	}
	if slot.p == nil {
		return nil, errors.New("irvm: OPA did not hand the plan to this package's target")
	}
	return slot.p, nil
}

// Program is a plan made ready to run: every call resolved, every constant
// made an ast term, every function's frame size known. It is safe for
// concurrent use; what changes after Prepare (the values of rules made
// once, the size of the next evaluation's first block of terms) changes
// atomically.
type Program struct {
	plan        *ir.Plan
	caps        *ast.Capabilities // given to every builtin call
	nlocals     int
	files       []string
	needsTime   bool                // a builtin it calls reads the evaluation's time
	inputKeys   []string            // the input's top-level keys the plan reads; nil: it may read all of it
	inputFields map[string][]string // for a top-level key, the keys of its object the plan reads; absent: all
	strings     []*ast.Term         // Static.Strings as ast.String
	numbers     []*ast.Term         // Static.Strings as ast.Number, where a MakeNumberRefStmt reads one
	funcs       []*function
	calls       map[*ir.CallStmt]*callee
	dynamic     map[string]*function // by path joined with "/", for CallDynamicStmt
	terms       atomic.Int32         // the most terms an evaluation made, up to maxTermsPerChunk
	// Where the plan binds the query's variables, when in one place
	// (findBindings): their names, the statements that insert their
	// values into the result's object, and the plan's block up to there.
	bindNames   []string
	bindInserts []*ir.ObjectInsertStmt
	bindHead    *ir.Block
}

type function struct {
	index   int
	f       *ir.Func
	nlocals int
	memo    bool // a rule (input and data are its only parameters): one value per evaluation
	// constant: the rule's value is the same in every evaluation
	// (markConstants); value holds it once made outside any with block.
	constant bool
	value    atomic.Pointer[ast.Term]
}

// callee is what a CallStmt calls: a planned function or a builtin.
type callee struct {
	fn       *function
	builtin  topdown.BuiltinFunc
	name     string
	relation bool // the builtin yields many values: collected into an array
	void     bool // the builtin yields nothing
	loc      *ast.Location
	// literals are what every match of a regex.match's constant pattern
	// contains; patterns holds those of the patterns it is given at run
	// time when the pattern is not a constant (prefilter.go).
	literals []string
	patterns *literalCache
}
