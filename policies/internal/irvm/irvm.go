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
// finds target plugins only by a global registry) but answers only to
// Prepare, so nothing else in the process can run a query on it.
//
// Every evaluation is bounded (Options): by its deadline, read before
// builtin calls (every clockEvery calls, or once clockBytes of values were
// built) and at each value an iterating builtin (walk, numbers.range, ...)
// yields, and by a budget of the bytes of values it builds.
package irvm

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/ir"
	"github.com/open-policy-agent/opa/v1/metrics"
	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/open-policy-agent/opa/v1/storage/inmem"
	"github.com/open-policy-agent/opa/v1/topdown"
	"github.com/open-policy-agent/opa/v1/topdown/builtins"
	"github.com/open-policy-agent/opa/v1/topdown/print"
)

// target is the name of this package's OPA target.
const target = "toolgate-ir"

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
// made an ast term, every function's frame size known. It is immutable and
// safe for concurrent use.
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
}

type function struct {
	index   int
	f       *ir.Func
	nlocals int
	memo    bool // a rule (input and data are its only parameters): one value per evaluation
}

// callee is what a CallStmt calls: a planned function or a builtin.
type callee struct {
	fn       *function
	builtin  topdown.BuiltinFunc
	name     string
	relation bool // the builtin yields many values: collected into an array
	void     bool // the builtin yields nothing
	loc      *ast.Location
}

func compile(pol *ir.Policy, custom map[string]*topdown.Builtin) (*Program, error) {
	if pol.Plans == nil || len(pol.Plans.Plans) != 1 {
		return nil, errors.New("irvm: the policy must have exactly one plan")
	}
	p := &Program{
		plan:    pol.Plans.Plans[0],
		calls:   map[*ir.CallStmt]*callee{},
		dynamic: map[string]*function{},
	}
	if pol.Static != nil {
		for _, s := range pol.Static.Strings {
			p.strings = append(p.strings, ast.StringTerm(s.Value))
		}
		for _, f := range pol.Static.Files {
			p.files = append(p.files, f.Value)
		}
	}
	p.numbers = make([]*ast.Term, len(p.strings))
	byName := map[string]*function{}
	if pol.Funcs != nil {
		for i, f := range pol.Funcs.Funcs {
			fn := &function{index: i, f: f, memo: len(f.Params) == 2}
			fn.nlocals = int(f.Return) + 1
			for _, l := range f.Params {
				fn.nlocals = max(fn.nlocals, int(l)+1)
			}
			p.funcs = append(p.funcs, fn)
			byName[f.Name] = fn
			if len(f.Path) > 0 {
				p.dynamic[strings.Join(f.Path, "/")] = fn
			}
		}
	}
	var err error
	prepare := func(blocks []*ir.Block) int {
		n := 2 // input and data
		visit := func(s ir.Stmt) {
			n = max(n, maxLocal(s)+1)
			if !supported(s) {
				err = fmt.Errorf("irvm: the plan holds a %T statement, which this engine does not run", s)
				return
			}
			switch s := s.(type) {
			case *ir.MakeNumberRefStmt:
				if s.Index < 0 || s.Index >= len(p.strings) {
					err = fmt.Errorf("irvm: number constant %d out of range", s.Index)
					return
				}
				p.numbers[s.Index] = ast.NumberTerm(json.Number(p.strings[s.Index].Value.(ast.String)))
			case *ir.CallStmt:
				c := &callee{name: s.Func}
				if loc := s.GetLocation(); loc != nil && loc.File >= 0 && loc.File < len(p.files) {
					c.loc = &ast.Location{File: p.files[loc.File], Row: loc.Row, Col: loc.Col}
				}
				if fn, ok := byName[s.Func]; ok {
					c.fn = fn
				} else if b, ok := custom[s.Func]; ok && b != nil {
					c.builtin, c.relation, c.void = b.Func, b.Decl.Relation, b.Decl.Decl.Result() == nil
					p.needsTime = true // it may read BuiltinContext.Time
				} else if bi := topdown.GetBuiltin(s.Func); bi != nil {
					c.builtin = bi
					p.needsTime = p.needsTime || timeBuiltins[s.Func]
					if d := ast.BuiltinMap[s.Func]; d != nil {
						c.relation, c.void = d.Relation, d.Decl.Result() == nil
					}
				} else {
					err = fmt.Errorf("irvm: call of unknown function %q", s.Func)
					return
				}
				p.calls[s] = c
			}
		}
		for _, b := range blocks {
			walkBlock(b, visit)
		}
		return n
	}
	p.nlocals = prepare(p.plan.Blocks)
	for _, fn := range p.funcs {
		fn.nlocals = max(fn.nlocals, prepare(fn.f.Blocks))
	}
	if err != nil {
		return nil, err
	}
	p.inputKeys = p.readsOfInput()
	if p.inputKeys != nil {
		p.inputFields = p.fieldsOfInput()
	}
	return p, nil
}

// fieldsOfInput finds, for the input's top-level keys, which of their
// keys the plan reads. A local assigned input.k that is only ever dotted
// with constant keys reads those keys of input.k; any other read of it
// (passed to a function, iterated, copied, dotted with a computed key)
// reads input.k whole. OPA's planner numbers a rule body's locals afresh
// in each of a function's top-level blocks (one per rule body), and a
// value goes from one such block to the next only through a copy (a read
// that counts as whole), so each top-level block is a scope; within one,
// the analysis keeps for each local every input key it may hold and every
// key it is dotted with, wherever: a superset, never less than what is
// read.
func (p *Program) fieldsOfInput() map[string][]string {
	fields := map[string]map[string]bool{}
	all := map[string]bool{}
	scope := func(block *ir.Block) {
		from := map[ir.Local]map[string]bool{} // the input keys each local may hold
		dots := map[ir.Local]map[string]bool{} // the constant keys each local is dotted with
		whole := map[ir.Local]bool{}           // locals read otherwise
		add := func(m map[ir.Local]map[string]bool, l ir.Local, k string) {
			if m[l] == nil {
				m[l] = map[string]bool{}
			}
			m[l][k] = true
		}
		str := func(op ir.Operand) (string, bool) {
			k, ok := op.Value.(ir.StringIndex)
			if !ok {
				return "", false
			}
			return string(p.strings[k].Value.(ast.String)), true
		}
		walkBlock(block, func(s ir.Stmt) {
			if d, ok := s.(*ir.DotStmt); ok {
				src, isLocal := d.Source.Value.(ir.Local)
				if k, constKey := str(d.Key); isLocal && constKey {
					if src == ir.Input {
						add(from, d.Target, k)
					} else {
						add(dots, src, k)
					}
					return
				}
			}
			accesses(s, func(l ir.Local) { whole[l] = true }, func(ir.Local) {})
		})
		for l, keys := range from {
			for k := range keys {
				if whole[l] {
					all[k] = true
					continue
				}
				if fields[k] == nil {
					fields[k] = map[string]bool{}
				}
				maps.Copy(fields[k], dots[l])
			}
		}
	}
	for _, b := range p.plan.Blocks {
		scope(b)
	}
	for _, fn := range p.funcs {
		for _, b := range fn.f.Blocks {
			scope(b)
		}
	}
	out := map[string][]string{}
	for k, fs := range fields {
		if !all[k] {
			out[k] = slices.Sorted(maps.Keys(fs))
		}
	}
	return out
}

// InputFields are the keys of input[key] the plan can read, sorted; nil
// when it may read input[key] whole, or when InputKeys leaves key out. A
// caller may leave the other fields out of input[key]: the result is the
// same.
func (p *Program) InputFields(key string) []string { return p.inputFields[key] }

// InputKeys are the top-level keys of the input the plan can read, sorted;
// nil when it may read the input whole (it passes input to a builtin,
// iterates over it, returns it...). A caller may leave the other keys out
// of the input it gives Eval: the result is the same.
func (p *Program) InputKeys() []string { return p.inputKeys }

// readsOfInput finds the input's keys the plan reads: the input (local 0
// in the plan and in every function, which takes it as its first
// parameter) may only be dotted with a constant key, handed on as a
// function's first argument, or replaced by a with.
func (p *Program) readsOfInput() []string {
	keys := map[string]bool{}
	whole := false
	isInput := func(op ir.Operand) bool { l, ok := op.Value.(ir.Local); return ok && l == ir.Input }
	visit := func(s ir.Stmt) {
		switch s := s.(type) {
		case *ir.DotStmt:
			if isInput(s.Source) {
				if k, ok := s.Key.Value.(ir.StringIndex); ok {
					keys[string(p.strings[k].Value.(ast.String))] = true
				} else {
					whole = true
				}
			}
			if isInput(s.Key) {
				whole = true
			}
			return
		case *ir.CallStmt:
			for i, a := range s.Args {
				if isInput(a) && (i != 0 || p.calls[s].fn == nil) {
					whole = true
				}
			}
			return
		case *ir.CallDynamicStmt:
			for i, a := range s.Args {
				if a == ir.Input && i != 0 {
					whole = true
				}
			}
			return
		case *ir.WithStmt:
			if isInput(s.Value) {
				whole = true
			}
			return
		}
		accesses(s, func(l ir.Local) { whole = whole || l == ir.Input }, func(ir.Local) {})
	}
	for _, b := range p.plan.Blocks {
		walkBlock(b, visit)
	}
	for _, fn := range p.funcs {
		for _, b := range fn.f.Blocks {
			walkBlock(b, visit)
		}
	}
	if whole {
		return nil
	}
	return append([]string{}, slices.Sorted(maps.Keys(keys))...) // not nil when there are none
}

// timeBuiltins are OPA's builtins that read BuiltinContext.Time (as of
// OPA 1.22: topdown's time.go and tokens.go; http.send is refused).
var timeBuiltins = map[string]bool{
	ast.NowNanos.Name:        true,
	ast.JWTDecodeVerify.Name: true,
	ast.HTTPSend.Name:        true,
}

func walkBlock(b *ir.Block, visit func(ir.Stmt)) {
	if b == nil {
		return
	}
	for _, s := range b.Stmts {
		visit(s)
		switch s := s.(type) {
		case *ir.BlockStmt:
			for _, c := range s.Blocks {
				walkBlock(c, visit)
			}
		case *ir.ScanStmt:
			walkBlock(s.Block, visit)
		case *ir.NotStmt:
			walkBlock(s.Block, visit)
		case *ir.WithStmt:
			walkBlock(s.Block, visit)
		}
	}
}

// maxLocal is the highest local a statement names (not those of the
// blocks it holds), -1 when none.
func maxLocal(s ir.Stmt) int {
	m := -1
	f := func(x ir.Local) { m = max(m, int(x)) }
	accesses(s, f, f)
	return m
}

// accesses calls read with each local a statement reads and write with
// each it writes (a local it changes in place, such as an array appended
// to, is both); not those of the blocks it holds.
func accesses(s ir.Stmt, read, write func(ir.Local)) {
	r := func(xs ...ir.Local) {
		for _, x := range xs {
			read(x)
		}
	}
	w := func(xs ...ir.Local) {
		for _, x := range xs {
			write(x)
		}
	}
	o := func(ops ...ir.Operand) {
		for _, op := range ops {
			if x, ok := op.Value.(ir.Local); ok {
				read(x)
			}
		}
	}
	switch s := s.(type) {
	case *ir.ReturnLocalStmt:
		r(s.Source)
	case *ir.CallStmt:
		o(s.Args...)
		w(s.Result)
	case *ir.CallDynamicStmt:
		r(s.Args...)
		o(s.Path...)
		w(s.Result)
	case *ir.DotStmt:
		o(s.Source, s.Key)
		w(s.Target)
	case *ir.LenStmt:
		o(s.Source)
		w(s.Target)
	case *ir.ScanStmt:
		r(s.Source)
		w(s.Key, s.Value)
	case *ir.AssignIntStmt:
		w(s.Target)
	case *ir.AssignVarStmt:
		o(s.Source)
		w(s.Target)
	case *ir.AssignVarOnceStmt:
		o(s.Source)
		r(s.Target)
		w(s.Target)
	case *ir.ResetLocalStmt:
		w(s.Target)
	case *ir.MakeNullStmt:
		w(s.Target)
	case *ir.MakeNumberIntStmt:
		w(s.Target)
	case *ir.MakeNumberRefStmt:
		w(s.Target)
	case *ir.MakeArrayStmt:
		w(s.Target)
	case *ir.MakeObjectStmt:
		w(s.Target)
	case *ir.MakeSetStmt:
		w(s.Target)
	case *ir.EqualStmt:
		o(s.A, s.B)
	case *ir.NotEqualStmt:
		o(s.A, s.B)
	case *ir.IsArrayStmt:
		o(s.Source)
	case *ir.IsObjectStmt:
		o(s.Source)
	case *ir.IsSetStmt:
		o(s.Source)
	case *ir.IsDefinedStmt:
		r(s.Source)
	case *ir.IsUndefinedStmt:
		r(s.Source)
	case *ir.ArrayAppendStmt:
		o(s.Value)
		r(s.Array)
		w(s.Array)
	case *ir.ObjectInsertStmt:
		o(s.Key, s.Value)
		r(s.Object)
		w(s.Object)
	case *ir.ObjectInsertOnceStmt:
		o(s.Key, s.Value)
		r(s.Object)
		w(s.Object)
	case *ir.ObjectMergeStmt:
		r(s.A, s.B)
		w(s.Target)
	case *ir.SetAddStmt:
		o(s.Value)
		r(s.Set)
		w(s.Set)
	case *ir.WithStmt:
		o(s.Value)
		r(s.Local)
		w(s.Local)
	case *ir.ResultSetAddStmt:
		r(s.Value)
	}
}

// Outcomes of running a block, besides a break index (0, 1, ...: leave
// that many enclosing blocks beyond this one).
const (
	completed = -1      // every statement ran
	unwind    = 1 << 30 // a return or an error: leave every block
)

// Why an evaluation stops early.
const (
	stopNot = iota
	stopCancelled
	stopDeadline
)

// stopped says whether the evaluation must stop, and why.
func (e *eval) stopped() int {
	switch {
	case e.ctx.Err() != nil || e.o.Cancel != nil && e.o.Cancel.Cancelled():
		return stopCancelled
	case !e.o.Deadline.IsZero() && time.Now().After(e.o.Deadline):
		return stopDeadline
	}
	return stopNot
}

// builtinCancel is what builtins that run long (numbers.range,
// strings.replace_n, ...) poll, as topdown.Cancel: cancelled when the
// evaluation must stop, by ctx, Options.Cancel or Options.Deadline, with
// no timer; the clock is read every 64 polls.
type builtinCancel struct {
	e     *eval
	polls int
}

func (c *builtinCancel) Cancel() {}

func (c *builtinCancel) Cancelled() bool {
	c.polls++
	return c.polls%64 == 0 && c.e.stopped() != stopNot
}

// ErrDeadline is the error of an evaluation past Options.Deadline.
var ErrDeadline = fmt.Errorf("irvm: evaluation past its deadline: %w", context.DeadlineExceeded)

// checkEvery is how many loop iterations and calls run between two checks
// for cancellation.
const checkEvery = 256

// Options are an evaluation's settings.
type Options struct {
	// Cancel, when set and cancelled, stops the evaluation (as does ctx).
	Cancel topdown.Cancel
	// Deadline, when set, stops the evaluation once passed, with an error
	// that wraps context.DeadlineExceeded: cheaper than a context with a
	// timer for evaluations that mostly take microseconds.
	Deadline time.Time
	// StrictBuiltinErrors makes a builtin's error the evaluation's error;
	// without it the builtin's call is undefined, as in OPA.
	StrictBuiltinErrors bool
	// Time is what time.now_ns returns; default: the evaluation's start.
	Time time.Time
	// Seed is the source of rand.intn and friends; default crypto/rand.
	Seed io.Reader
	// PrintHook receives print() output; default: none.
	PrintHook print.Hook
	// MaxBytes bounds the bytes of values the evaluation builds (strings
	// and collections that builtins return, values iterating builtins
	// yield, collections the plan fills), an estimate counted as they are
	// made; past it the evaluation ends with ErrBudget. Default
	// DefaultMaxBytes; negative: no bound.
	MaxBytes int64
}

// DefaultMaxBytes is Options.MaxBytes's default: 64 MiB.
const DefaultMaxBytes = 64 << 20

// ErrBudget is the error of an evaluation that built more than
// Options.MaxBytes of values.
var ErrBudget = errors.New("irvm: the evaluation built more values than its budget allows")

// Eval runs the plan on input (nil: undefined) and returns its result set:
// one object per result, keyed by the query's variables, each result once,
// in the order the plan found them.
func (p *Program) Eval(ctx context.Context, input *ast.Term, o Options) ([]*ast.Term, error) {
	e := evals.Get().(*eval)
	e.ctx, e.p, e.o = ctx, p, o
	e.limit = o.MaxBytes
	if e.limit == 0 {
		e.limit = DefaultMaxBytes
	}
	defer e.release()
	fr := &frame{l: e.alloc(p.nlocals)}
	fr.l[ir.Input] = input
	fr.l[ir.Data] = emptyObject
	for _, b := range p.plan.Blocks {
		if e.block(fr, b) == unwind {
			break
		}
	}
	if e.err != nil {
		return nil, e.err
	}
	return slices.Clone(e.results), nil
}

// evals keeps evaluation states (their slabs, operand buffers and builtin
// context) for reuse.
var evals = sync.Pool{New: func() any {
	e := &eval{}
	e.iter = e.collect
	e.cancel.e = e
	return e
}}

// release clears what the evaluation held and returns it to evals.
func (e *eval) release() {
	clear(e.slab[:cap(e.slab)])
	e.slab = e.slab[:0]
	clear(e.docRefs)
	e.docRefs = e.docRefs[:0]
	clear(e.memo)
	e.memo = e.memo[:0]
	clear(e.memoBase)
	if e.bctx != nil {
		*e.bctx = topdown.BuiltinContext{}
		e.bctxSet = false
	}
	clear(e.results)
	e.results = e.results[:0]
	e.ctx, e.p, e.o, e.err, e.steps, e.cancel.polls, e.spent, e.fn = nil, nil, Options{}, nil, 0, 0, 0, nil
	e.calls, e.spentAtClock = 0, 0
	evals.Put(e)
}

// emptyObject is the data document. Nothing changes it: a with on data
// copies it.
var emptyObject = ast.ObjectTerm()

type eval struct {
	ctx      context.Context
	p        *Program
	o        Options
	memo     [][]*ast.Term // a frame per with block: each rule's memoized value
	memoBase []*ast.Term   // the outermost frame's, kept for the next evaluation
	results  []*ast.Term   // the result set, each result once
	bctx     *topdown.BuiltinContext
	bctxSet  bool        // bctx holds this evaluation's context
	ops      []*ast.Term // a builtin call's operands
	// iter (e.collect) receives a builtin's values into out, or all for
	// a relation.
	iter         func(*ast.Term) error
	relation     bool
	out          *ast.Term
	all          []*ast.Term
	cancel       builtinCancel
	slab         []*ast.Term // where frames' locals are cut from
	docRefs      []*ast.Term // the docRefs of input keys made so far
	steps        int
	fn           *function // the function running, nil in the query
	spent        int64     // bytes of values built, as charge counts them
	calls        int       // builtin calls since the clock was last read before one
	spentAtClock int64     // spent when the clock was last read before a builtin call
	limit        int64     // Options.MaxBytes, or no bound when <= 0
	err          error
}

// frame is a function call's locals and its return value.
type frame struct {
	l   []*ast.Term
	ret *ast.Term
}

// alloc cuts n cleared locals from the slab.
func (e *eval) alloc(n int) []*ast.Term {
	if cap(e.slab)-len(e.slab) < n {
		e.slab = make([]*ast.Term, 0, max(64, 2*n))
	}
	l := e.slab[len(e.slab) : len(e.slab)+n]
	e.slab = e.slab[:len(e.slab)+n]
	return l
}

func (e *eval) fail(err error) int {
	if e.err == nil {
		e.err = err
	}
	return unwind
}

// tick counts a loop iteration or a call; every checkEvery, it checks for
// cancellation.
func (e *eval) tick() bool {
	e.steps++
	if e.steps%checkEvery != 0 {
		return true
	}
	switch e.stopped() {
	case stopCancelled:
		e.fail(&topdown.Error{Code: topdown.CancelErr, Message: "caller cancelled query execution"})
		return false
	case stopDeadline:
		e.fail(ErrDeadline)
		return false
	}
	return true
}

var boolTerms = [2]*ast.Term{ast.InternedTerm(false), ast.InternedTerm(true)}

func (e *eval) operand(fr *frame, op ir.Operand) *ast.Term {
	switch v := op.Value.(type) {
	case ir.Local:
		return fr.l[v]
	case ir.StringIndex:
		return e.p.strings[v]
	case ir.Bool:
		if v {
			return boolTerms[1]
		}
		return boolTerms[0]
	}
	return nil
}

// value is an operand's value, nil when undefined.
func (e *eval) value(fr *frame, op ir.Operand) ast.Value {
	if t := e.operand(fr, op); t != nil {
		return t.Value
	}
	return nil
}

func compare(a, b *ast.Term) int {
	switch {
	case a == nil || b == nil:
		if a == b {
			return 0
		}
		return 1
	case a == b:
		return 0
	}
	return ast.Compare(a.Value, b.Value)
}

// block runs a block's statements: completed, or the index of a break (0
// when a statement is undefined or false), or unwind.
func (e *eval) block(fr *frame, b *ir.Block) int {
	for _, s := range b.Stmts {
		switch s := s.(type) {
		case *ir.DotStmt:
			t := e.dot(e.value(fr, s.Source), e.operand(fr, s.Key))
			if t == nil {
				return 0
			}
			fr.l[s.Target] = t
		case *ir.AssignVarStmt:
			fr.l[s.Target] = e.operand(fr, s.Source)
		case *ir.AssignVarOnceStmt:
			t := e.operand(fr, s.Source)
			if old := fr.l[s.Target]; old != nil && compare(old, t) != 0 {
				return e.fail(e.conflict(s.GetLocation(), e.conflictMessage()))
			}
			fr.l[s.Target] = t
		case *ir.EqualStmt:
			if compare(e.operand(fr, s.A), e.operand(fr, s.B)) != 0 {
				return 0
			}
		case *ir.NotEqualStmt:
			if compare(e.operand(fr, s.A), e.operand(fr, s.B)) == 0 {
				return 0
			}
		case *ir.CallStmt:
			t, r := e.call(fr, s)
			if r != completed {
				return r
			}
			fr.l[s.Result] = t
		case *ir.BlockStmt:
			for _, c := range s.Blocks {
				if r := e.block(fr, c); r > 0 {
					return r - 1
				}
			}
		case *ir.BreakStmt:
			return int(s.Index)
		case *ir.ScanStmt:
			if r := e.scan(fr, s); r != completed {
				return r
			}
		case *ir.NotStmt:
			switch r := e.block(fr, s.Block); {
			case r == completed:
				return 0
			case r > 0:
				return r - 1
			}
		case *ir.IsDefinedStmt:
			if fr.l[s.Source] == nil {
				return 0
			}
		case *ir.IsUndefinedStmt:
			if fr.l[s.Source] != nil {
				return 0
			}
		case *ir.ResetLocalStmt:
			fr.l[s.Target] = nil
		case *ir.ReturnLocalStmt:
			fr.ret = fr.l[s.Source]
			return unwind
		case *ir.ResultSetAddStmt:
			if t := fr.l[s.Value]; t != nil && !slices.ContainsFunc(e.results, func(r *ast.Term) bool { return r.Equal(t) }) {
				e.results = append(e.results, t)
			}
		case *ir.MakeNullStmt:
			fr.l[s.Target] = ast.InternedNullTerm
		case *ir.MakeNumberIntStmt:
			fr.l[s.Target] = ast.InternedTerm(int(s.Value))
		case *ir.AssignIntStmt:
			fr.l[s.Target] = ast.InternedTerm(int(s.Value))
		case *ir.MakeNumberRefStmt:
			fr.l[s.Target] = e.p.numbers[s.Index]
		case *ir.MakeArrayStmt:
			fr.l[s.Target] = ast.NewTerm(ast.NewArrayWithCapacity(int(s.Capacity)))
		case *ir.MakeObjectStmt:
			fr.l[s.Target] = ast.ObjectTerm()
		case *ir.MakeSetStmt:
			fr.l[s.Target] = ast.SetTerm()
		case *ir.LenStmt:
			n, ok := length(e.value(fr, s.Source))
			if !ok {
				return 0
			}
			fr.l[s.Target] = ast.InternedTerm(n)
		case *ir.IsArrayStmt:
			if _, ok := e.value(fr, s.Source).(*ast.Array); !ok {
				return 0
			}
		case *ir.IsObjectStmt:
			if _, ok := e.value(fr, s.Source).(ast.Object); !ok {
				return 0
			}
		case *ir.IsSetStmt:
			if _, ok := e.value(fr, s.Source).(ast.Set); !ok {
				return 0
			}
		case *ir.ArrayAppendStmt:
			t := fr.l[s.Array]
			arr, ok := valueOf(t).(*ast.Array)
			v := e.operand(fr, s.Value)
			if !ok || v == nil {
				return e.fail(e.internal(s.GetLocation(), "append to a value that is not an array"))
			}
			if !e.charge(elemBytes) {
				return unwind
			}
			// A new term: the array may already be shared.
			fr.l[s.Array] = ast.NewTerm(arr.Append(v))
		case *ir.ObjectInsertStmt:
			obj, ok := valueOf(fr.l[s.Object]).(ast.Object)
			k, v := e.operand(fr, s.Key), e.operand(fr, s.Value)
			if !ok || k == nil || v == nil {
				return e.fail(e.internal(s.GetLocation(), "insert into a value that is not an object"))
			}
			if !e.charge(2 * elemBytes) {
				return unwind
			}
			obj.Insert(k, v)
		case *ir.ObjectInsertOnceStmt:
			obj, ok := valueOf(fr.l[s.Object]).(ast.Object)
			k, v := e.operand(fr, s.Key), e.operand(fr, s.Value)
			if !ok || k == nil || v == nil {
				return e.fail(e.internal(s.GetLocation(), "insert into a value that is not an object"))
			}
			if old := obj.Get(k); old != nil {
				if compare(old, v) != 0 {
					return e.fail(e.conflict(s.GetLocation(), "object keys must be unique"))
				}
				continue
			}
			if !e.charge(2 * elemBytes) {
				return unwind
			}
			obj.Insert(k, v)
		case *ir.ObjectMergeStmt:
			a, aok := valueOf(fr.l[s.A]).(ast.Object)
			b, bok := valueOf(fr.l[s.B]).(ast.Object)
			if !aok || !bok {
				return e.fail(e.conflict(s.GetLocation(), "object keys must be unique"))
			}
			if !e.charge(2 * elemBytes * int64(a.Len()+b.Len())) {
				return unwind
			}
			m, ok := a.Merge(b)
			if !ok {
				return e.fail(e.conflict(s.GetLocation(), "object keys must be unique"))
			}
			fr.l[s.Target] = ast.NewTerm(m)
		case *ir.SetAddStmt:
			set, ok := valueOf(fr.l[s.Set]).(ast.Set)
			v := e.operand(fr, s.Value)
			if !ok || v == nil {
				return e.fail(e.internal(s.GetLocation(), "add to a value that is not a set"))
			}
			if !e.charge(elemBytes) {
				return unwind
			}
			set.Add(v)
		case *ir.WithStmt:
			if r := e.with(fr, s); r != completed {
				return r
			}
		case *ir.CallDynamicStmt:
			if r := e.callDynamic(fr, s); r != completed {
				return r
			}
		case *ir.NopStmt:
		default:
			return e.fail(e.internal(s.GetLocation(), fmt.Sprintf("statement %T is not supported", s)))
		}
	}
	return completed
}

func valueOf(t *ast.Term) ast.Value {
	if t == nil {
		return nil
	}
	return t.Value
}

// scan runs s's block once per element of its source, as OPA's wasm
// compiler lays it out: a break 0 (or an undefined statement) goes on with
// the next element, a break 1 leaves the scan, a deeper one leaves blocks
// around it.
func (e *eval) scan(fr *frame, s *ir.ScanStmt) int {
	r := completed
	each := func(k, v *ast.Term) bool {
		if !e.tick() {
			r = unwind
			return true
		}
		fr.l[s.Key], fr.l[s.Value] = k, v
		if r = e.block(fr, s.Block); r <= 0 {
			r = completed
		}
		return r != completed
	}
	switch src := valueOf(fr.l[s.Source]).(type) {
	case *ast.Array:
		for i := 0; i < src.Len(); i++ {
			if each(ast.InternedTerm(i), src.Elem(i)) {
				break
			}
		}
	case ast.Object:
		src.Until(each)
	case ast.Set:
		src.Until(func(x *ast.Term) bool { return each(x, x) })
	}
	switch {
	case r == completed || r == 1:
		return completed
	case r == unwind:
		return unwind
	}
	return r - 2
}

// with runs s's block with a local (input, most often) replaced, or one
// path inside it upserted, and memoized rule values set aside.
func (e *eval) with(fr *frame, s *ir.WithStmt) int {
	saved := fr.l[s.Local]
	t := e.operand(fr, s.Value)
	if len(s.Path) > 0 {
		t = upsert(saved, e.p.strings, s.Path, t)
	}
	fr.l[s.Local] = t
	e.memo = append(e.memo, nil)
	r := e.block(fr, s.Block)
	e.memo = e.memo[:len(e.memo)-1]
	fr.l[s.Local] = saved
	switch {
	case r == completed:
		return completed
	case r == 0:
		return 0
	case r == unwind:
		return unwind
	}
	return r - 1
}

// upsert is a copy of doc (an object, or a new one) with v at path, every
// object on the way copied, never changed.
func upsert(doc *ast.Term, strs []*ast.Term, path []int, v *ast.Term) *ast.Term {
	obj := copyObject(valueOf(doc))
	key := strs[path[0]]
	if len(path) == 1 {
		obj.Insert(key, v)
		return ast.NewTerm(obj)
	}
	obj.Insert(key, upsert(obj.Get(key), strs, path[1:], v))
	return ast.NewTerm(obj)
}

func copyObject(v ast.Value) ast.Object {
	if r, ok := v.(docRef); ok {
		v = r.value()
	}
	src, ok := v.(ast.Object)
	if !ok {
		return ast.NewObject()
	}
	dst := ast.NewObjectWithCapacity(src.Len() + 1)
	src.Foreach(func(k, v *ast.Term) { dst.Insert(k, v) })
	return dst
}

// call runs a CallStmt: its value, or a block outcome (0 when undefined).
func (e *eval) call(fr *frame, s *ir.CallStmt) (*ast.Term, int) {
	c := e.p.calls[s]
	if c.fn != nil {
		t, ok := e.invoke(c.fn, func(l []*ast.Term) {
			for i, p := range c.fn.f.Params {
				if i < len(s.Args) {
					l[p] = e.operand(fr, s.Args[i])
				}
			}
		})
		switch {
		case e.err != nil:
			return nil, unwind
		case !ok:
			return nil, 0
		}
		return t, completed
	}
	start := len(e.ops)
	for _, a := range s.Args {
		e.ops = append(e.ops, e.operand(fr, a))
	}
	t, r := e.builtin(c, e.ops[start:])
	clear(e.ops[start:])
	e.ops = e.ops[:start]
	return t, r
}

func (e *eval) builtin(c *callee, ops []*ast.Term) (*ast.Term, int) {
	for _, t := range ops {
		if t == nil {
			return nil, 0
		}
	}
	if e.clockDue() && e.pastDeadline() {
		return nil, e.fail(ErrDeadline)
	}
	bctx := e.builtinContext()
	bctx.Location = c.loc
	e.relation, e.out, e.all = c.relation, nil, nil
	err := c.builtin(*bctx, ops, e.iter)
	out, all := e.out, e.all
	e.out, e.all = nil, nil
	if e.err != nil {
		return nil, unwind // collect stopped it: past the deadline or the budget
	}
	if err != nil {
		if e.stopped() == stopDeadline {
			return nil, e.fail(ErrDeadline) // the builtin saw the deadline pass
		}
		var halt topdown.Halt
		if e.o.StrictBuiltinErrors || errors.As(err, &halt) || e.ctx.Err() != nil {
			return nil, e.fail(builtinError(c, err))
		}
		return nil, 0
	}
	switch {
	case c.relation:
		return ast.ArrayTerm(all...), completed
	case c.void:
		return ast.InternedNullTerm, completed
	case out == nil:
		return nil, 0
	}
	if !e.charge(bytesOf(out)) {
		return nil, unwind
	}
	return out, completed
}

// collect receives a builtin's value; for a relation, one of its values,
// each charged and each checked against the deadline, so an iterating
// builtin (walk) stops at the value that passes either.
func (e *eval) collect(t *ast.Term) error {
	if e.relation {
		if e.pastDeadline() {
			e.fail(ErrDeadline)
			return ErrDeadline
		}
		if !e.charge(bytesOf(t)) {
			return ErrBudget
		}
		e.all = append(e.all, t)
		return nil
	}
	e.out = t
	return nil
}

// Before a builtin call the clock is read when clockEvery calls have run
// since the last read, or when the values built since then passed
// clockBytes: a run of cheap builtins reads it once in clockEvery calls,
// and a call that built a large value (json.marshal of the whole input) is
// never followed by another unchecked. Reading it at every call cost about
// 5% of a small policy's decision.
const (
	clockEvery = 8
	clockBytes = 64 << 10
)

// clockDue says whether the clock is to be read before this builtin call.
func (e *eval) clockDue() bool {
	e.calls++
	if e.calls < clockEvery && e.spent-e.spentAtClock <= clockBytes {
		return false
	}
	e.calls, e.spentAtClock = 0, e.spent
	return true
}

// pastDeadline reads the clock: whether Options.Deadline has passed.
func (e *eval) pastDeadline() bool {
	return !e.o.Deadline.IsZero() && time.Now().After(e.o.Deadline)
}

// elemBytes is what charge counts for one element of a collection: a term
// and its place in the collection.
const elemBytes = 64

// charge counts n bytes of values built: false, the evaluation failed with
// ErrBudget, once they pass the budget.
func (e *eval) charge(n int64) bool {
	e.spent += n
	if e.limit > 0 && e.spent > e.limit {
		e.fail(ErrBudget)
		return false
	}
	return true
}

// bytesOf estimates what a builtin's value cost to build: a string's
// bytes, a collection's elements and, for an array, one level down its
// elements' (a walk's [path, value] counts its path). Values shared with the builtin's
// operands are counted too: an over-estimate, never under one level.
func bytesOf(t *ast.Term) int64 {
	n := int64(elemBytes)
	switch v := t.Value.(type) {
	case ast.String:
		n += int64(len(v))
	case *ast.Array:
		for i := 0; i < v.Len(); i++ {
			n += shallowBytes(v.Elem(i).Value)
		}
	case ast.Object:
		// Not visited (a closure per call would cost an allocation on
		// every decision): its strings were counted as they were made.
		n += 2 * elemBytes * int64(v.Len())
	case ast.Set:
		n += elemBytes * int64(v.Len())
	}
	return n
}

func shallowBytes(v ast.Value) int64 {
	n := int64(elemBytes)
	switch v := v.(type) {
	case ast.String:
		n += int64(len(v))
	case *ast.Array:
		n += 16 * int64(v.Len())
	case ast.Object:
		n += 32 * int64(v.Len())
	case ast.Set:
		n += 16 * int64(v.Len())
	}
	return n
}

func builtinError(c *callee, err error) error {
	var te *topdown.Error
	if errors.As(err, &te) {
		return err
	}
	return &topdown.Error{Code: topdown.BuiltinErr, Message: c.name + ": " + err.Error(), Location: c.loc}
}

func (e *eval) builtinContext() *topdown.BuiltinContext {
	if e.bctxSet {
		return e.bctx
	}
	if e.bctx == nil {
		e.bctx = &topdown.BuiltinContext{}
	}
	e.bctxSet = true
	seed := e.o.Seed
	if seed == nil {
		seed = rand.Reader
	}
	*e.bctx = topdown.BuiltinContext{
		Context:   e.ctx,
		Metrics:   noMetrics,
		Seed:      seed,
		Cancel:    &e.cancel,
		Cache:     builtins.Cache{},
		PrintHook: e.o.PrintHook,

		Capabilities: e.p.caps,
	}
	if e.p.needsTime {
		now := e.o.Time
		if now.IsZero() {
			now = time.Now()
		}
		e.bctx.Time = ast.UIntNumberTerm(uint64(now.UnixNano()))
	}
	return e.bctx
}

var noMetrics = metrics.NoOp()

// invoke calls a planned function, its parameters set by args: its value,
// and whether it is defined.
func (e *eval) invoke(fn *function, args func(l []*ast.Term)) (*ast.Term, bool) {
	if !e.tick() {
		return nil, false
	}
	if fn.memo && len(e.memo) > 0 {
		if top := e.memo[len(e.memo)-1]; top != nil && top[fn.index] != nil {
			return top[fn.index], true
		}
	}
	mark := len(e.slab)
	fr := frame{l: e.alloc(fn.nlocals)}
	args(fr.l)
	caller := e.fn
	e.fn = fn
	for _, b := range fn.f.Blocks {
		if r := e.block(&fr, b); r == unwind || r > 0 {
			break
		}
	}
	e.fn = caller
	// Release the frame when it is the slab's last (a new slab may have
	// been cut since).
	if len(e.slab) == mark+fn.nlocals && &e.slab[mark] == &fr.l[0] {
		clear(fr.l)
		e.slab = e.slab[:mark]
	}
	if e.err != nil || fr.ret == nil {
		return nil, false
	}
	if fn.memo {
		if len(e.memo) == 0 {
			e.memo = append(e.memo, nil)
		}
		top := e.memo[len(e.memo)-1]
		if top == nil {
			if len(e.memo) == 1 && cap(e.memoBase) >= len(e.p.funcs) {
				top = e.memoBase[:len(e.p.funcs)] // cleared by release
			} else {
				top = make([]*ast.Term, len(e.p.funcs))
			}
			if len(e.memo) == 1 {
				e.memoBase = top
			}
			e.memo[len(e.memo)-1] = top
		}
		top[fn.index] = fr.ret
	}
	return fr.ret, true
}

// callDynamic calls the function at a path computed at evaluation time:
// undefined (0) when no function is there, so the plan reads the data
// document instead; a break out of 3 blocks when the function is
// undefined, as OPA's wasm compiler does.
func (e *eval) callDynamic(fr *frame, s *ir.CallDynamicStmt) int {
	parts := make([]string, len(s.Path))
	for i, op := range s.Path {
		str, ok := e.value(fr, op).(ast.String)
		if !ok {
			return 0
		}
		parts[i] = string(str)
	}
	fn := e.p.dynamic[strings.Join(parts, "/")]
	if fn == nil {
		return 0
	}
	t, ok := e.invoke(fn, func(l []*ast.Term) {
		for i, p := range fn.f.Params {
			if i < len(s.Args) {
				l[p] = fr.l[s.Args[i]]
			}
		}
	})
	switch {
	case e.err != nil:
		return unwind
	case !ok:
		return 3
	}
	fr.l[s.Result] = t
	return completed
}

// dot is src[key]: an object's value, an array's element, a set's member;
// nil when undefined.
func (e *eval) dot(src ast.Value, key *ast.Term) *ast.Term {
	if key == nil {
		return nil
	}
	switch s := src.(type) {
	case docRef:
		return e.dotDoc(s, key)
	case ast.Object:
		return s.Get(key)
	case *ast.Array:
		n, ok := key.Value.(ast.Number)
		if !ok {
			return nil
		}
		i, ok := n.Int()
		if !ok || i < 0 || i >= s.Len() {
			return nil
		}
		return s.Elem(i)
	case ast.Set:
		if s.Contains(key) {
			return key
		}
	}
	return nil
}

func length(v ast.Value) (int, bool) {
	switch x := v.(type) {
	case *ast.Array:
		return x.Len(), true
	case ast.Object:
		return x.Len(), true
	case ast.Set:
		return x.Len(), true
	case ast.String:
		return utf8.RuneCountInString(string(x)), true
	}
	return 0, false
}

func (e *eval) location(l *ir.Location) *ast.Location {
	if l == nil {
		return nil
	}
	loc := &ast.Location{Row: l.Row, Col: l.Col}
	if l.File >= 0 && l.File < len(e.p.files) {
		loc.File = e.p.files[l.File]
	}
	return loc
}

// conflictMessage words a complete rule's or a function's conflicting
// values as OPA's interpreter does, naming the rule by its path.
func (e *eval) conflictMessage() string {
	if e.fn == nil || len(e.fn.f.Path) < 2 {
		return "complete rules must not produce multiple outputs"
	}
	path := "data." + strings.Join(e.fn.f.Path[1:], ".") // Path[0] is the plan's generation, "g0"
	if e.fn.memo {
		return "rule " + path + " produced conflicting values"
	}
	return "function " + path + " produced conflicting values for the same inputs"
}

func (e *eval) conflict(l *ir.Location, msg string) error {
	return &topdown.Error{Code: topdown.ConflictErr, Message: msg, Location: e.location(l)}
}

func (e *eval) internal(l *ir.Location, msg string) error {
	return &topdown.Error{Code: topdown.InternalErr, Message: msg, Location: e.location(l)}
}

// supported says whether block runs s.
func supported(s ir.Stmt) bool {
	switch s.(type) {
	case *ir.DotStmt, *ir.AssignVarStmt, *ir.AssignVarOnceStmt, *ir.EqualStmt,
		*ir.NotEqualStmt, *ir.CallStmt, *ir.BlockStmt, *ir.BreakStmt, *ir.ScanStmt,
		*ir.NotStmt, *ir.IsDefinedStmt, *ir.IsUndefinedStmt, *ir.ResetLocalStmt,
		*ir.ReturnLocalStmt, *ir.ResultSetAddStmt, *ir.MakeNullStmt,
		*ir.MakeNumberIntStmt, *ir.AssignIntStmt, *ir.MakeNumberRefStmt,
		*ir.MakeArrayStmt, *ir.MakeObjectStmt, *ir.MakeSetStmt, *ir.LenStmt,
		*ir.IsArrayStmt, *ir.IsObjectStmt, *ir.IsSetStmt, *ir.ArrayAppendStmt,
		*ir.ObjectInsertStmt, *ir.ObjectInsertOnceStmt, *ir.ObjectMergeStmt,
		*ir.SetAddStmt, *ir.WithStmt, *ir.CallDynamicStmt, *ir.NopStmt:
		return true
	}
	return false
}
