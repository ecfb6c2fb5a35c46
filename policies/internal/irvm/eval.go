package irvm

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/ir"
	"github.com/open-policy-agent/opa/v1/metrics"
	"github.com/open-policy-agent/opa/v1/topdown"
	"github.com/open-policy-agent/opa/v1/topdown/builtins"
	"github.com/open-policy-agent/opa/v1/topdown/print"
)

// Evaluation: a Program run over an input, within its deadline and budget.

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
	return p.eval(ctx, input, nil, o)
}

// eval is Eval on input, or on doc when not nil.
func (p *Program) eval(ctx context.Context, input *ast.Term, doc Document, o Options) ([]*ast.Term, error) {
	e, fr := p.start(ctx, input, doc, o)
	defer e.release()
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

// ErrNoVars is EvalVars's error for a Program whose Vars are nil.
var ErrNoVars = errors.New("irvm: the plan does not bind the query's variables in one place; use EvalDocument")

// EvalVars is EvalDocument for a Program with Vars: it puts the values of
// the one result's variables in vals (len(Vars()), in their order)
// instead of building the result's object, and says whether there is a
// result; without one, vals is left as it was.
func (p *Program) EvalVars(ctx context.Context, doc Document, o Options, vals []*ast.Term) (bool, error) {
	if p.bindNames == nil {
		return false, ErrNoVars
	}
	if len(vals) != len(p.bindNames) {
		return false, fmt.Errorf("irvm: %d values for %d variables", len(vals), len(p.bindNames))
	}
	var input *ast.Term
	if p.inputKeys == nil {
		input, doc = ast.NewTerm(doc.Value()), nil
	}
	e, fr := p.start(ctx, input, doc, o)
	defer e.release()
	if e.block(fr, p.bindHead) != completed || e.err != nil {
		return false, e.err
	}
	// As the plan's ObjectInsert statements would, value by value.
	for i, s := range p.bindInserts {
		t := e.operand(fr, s.Value)
		if t == nil {
			return false, e.internal(s.GetLocation(), "insert into a value that is not an object")
		}
		if !e.charge(2 * elemBytes) {
			return false, e.err
		}
		vals[i] = t
	}
	return true, nil
}

// start takes an evaluation state from evals, made ready to run p on
// input, or on doc when not nil, and the plan's frame.
func (p *Program) start(ctx context.Context, input *ast.Term, doc Document, o Options) (*eval, *frame) {
	e := evals.Get().(*eval)
	e.ctx, e.p, e.o = ctx, p, o
	e.limit = o.MaxBytes
	if e.limit == 0 {
		e.limit = DefaultMaxBytes
	}
	fr := e.frame(e.alloc(p.nlocals))
	if doc != nil {
		input = e.ref(doc, "")
	}
	fr.l[ir.Input] = input
	fr.l[ir.Data] = emptyObject
	return e, fr
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
	if cap(e.frames) > maxKeptFrames {
		e.frames = nil
	}
	clear(e.frames[:cap(e.frames)])
	e.frames = e.frames[:0]
	clear(e.docRefs)
	e.docRefs = e.docRefs[:0]
	e.terms, e.refs = chunk[ast.Term]{}, chunk[refTerm]{}
	if n := int32(min(e.nterms, maxTermsPerChunk)); n > e.p.terms.Load() {
		e.p.terms.Store(n) // a race between two stores loses one: harmless
	}
	e.nterms = 0
	clear(e.memo)
	e.memo = e.memo[:0]
	clear(e.memoBase)
	if e.bctx != nil {
		*e.bctx = topdown.BuiltinContext{}
		e.bctxSet = false
	}
	// What builtins keep for the rest of an evaluation (rand.intn's
	// values, uuid.rfc4122's) goes with it.
	if len(e.cache) > maxKeptCache {
		e.cache = nil
	}
	clear(e.cache)
	clear(e.results)
	e.results = e.results[:0]
	e.ctx, e.p, e.o, e.err, e.steps, e.cancel.polls, e.spent, e.fn = nil, nil, Options{}, nil, 0, 0, 0, nil
	e.calls, e.spentAtClock = 0, 0
	evals.Put(e)
}

// maxKeptCache bounds the entries of the builtin cache a pooled evaluation
// keeps (cleared); a larger one is dropped.
const maxKeptCache = 64

// maxKeptFrames bounds the frame slab a pooled evaluation keeps; a larger
// one, cut for a deep call chain, is dropped.
const maxKeptFrames = 256

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
	bctxSet  bool           // bctx holds this evaluation's context
	cache    builtins.Cache // bctx's Cache, cleared at release
	ops      []*ast.Term    // a builtin call's operands
	// iter (e.collect) receives a builtin's values into out, or all for
	// a relation.
	iter         func(*ast.Term) error
	relation     bool
	out          *ast.Term
	all          []*ast.Term
	cancel       builtinCancel
	slab         []*ast.Term     // where frames' locals are cut from
	frames       []frame         // where frames are cut from
	docRefs      []*ast.Term     // the docRefs of input keys made so far
	terms        chunk[ast.Term] // dropped at release
	nterms       int             // terms cut from terms
	refs         chunk[refTerm]  // dropped at release
	steps        int
	fn           *function // the function running, nil in the query
	spent        int64     // bytes of values built, as charge counts them
	calls        int       // builtin calls since the clock was last read before one
	spentAtClock int64     // spent when the clock was last read before a builtin call
	limit        int64     // Options.MaxBytes, or no bound when <= 0
	err          error
}

// chunk hands out new T's cut from blocks allocated a few at a time: one
// allocation for an evaluation's terms rather than one per term. What it
// hands out it never writes again, so a value cut from it may be kept (in
// a result, a memo, a rule's shared value) like one made by new. An
// evaluation drops its blocks at release: one kept by the pooled eval
// would keep every value its used part points to alive.
type chunk[T any] struct{ free []T }

func (c *chunk[T]) next(n int) *T {
	if len(c.free) == 0 {
		c.free = make([]T, n)
	}
	t := &c.free[0]
	c.free = c.free[1:]
	return t
}

// An evaluation's first block of terms holds as many as the Program's
// evaluations have made at most (Program.terms), up to maxTermsPerChunk;
// the next ones termsPerChunk.
const (
	termsPerChunk    = 16
	maxTermsPerChunk = 64
)

// term is ast.NewTerm(v), cut from the evaluation's chunk of terms.
func (e *eval) term(v ast.Value) *ast.Term {
	n := termsPerChunk
	if e.nterms == 0 {
		n = max(4, int(e.p.terms.Load()))
	}
	e.nterms++
	t := e.terms.next(n)
	t.Value = v
	return t
}

// frame is a function call's locals and its return value.
type frame struct {
	l   []*ast.Term
	ret *ast.Term
}

// frame cuts a frame holding locals l from the frame slab: frames are
// taken and dropped in call order, so a steady evaluation allocates none.
// A frame is not used after dropFrame (invoke reads its return value
// first) nor after release; the closures that capture one (the iterating
// statements') run within its call.
func (e *eval) frame(l []*ast.Term) *frame {
	if len(e.frames) == cap(e.frames) {
		// The frames handed out stay where they are; the slab the pool
		// keeps grows until it holds an evaluation's deepest call chain.
		e.frames = make([]frame, 0, max(8, 2*cap(e.frames)))
	}
	e.frames = append(e.frames, frame{l: l})
	return &e.frames[len(e.frames)-1]
}

// dropFrame returns fr to the frame slab when it is the slab's last (a new
// slab may have been cut since).
func (e *eval) dropFrame(fr *frame) {
	if n := len(e.frames); n > 0 && &e.frames[n-1] == fr {
		e.frames[n-1] = frame{}
		e.frames = e.frames[:n-1]
	}
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
			fr.l[s.Target] = e.term(ast.NewArrayWithCapacity(int(s.Capacity)))
		case *ir.MakeObjectStmt:
			fr.l[s.Target] = e.term(ast.NewObject())
		case *ir.MakeSetStmt:
			fr.l[s.Target] = e.term(ast.NewSet())
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
			fr.l[s.Array] = e.term(arr.Append(v))
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
			fr.l[s.Target] = e.term(m)
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
	if r, ok := v.(*docRef); ok {
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
	var (
		out *ast.Term
		all []*ast.Term
		err error
	)
	lits := c.literals
	if c.patterns != nil {
		if pat, ok := ops[0].Value.(ast.String); ok {
			lits = c.patterns.get(string(pat))
		}
	}
	if lits != nil && lacksLiteral(ops[1].Value, lits) {
		out = boolTerms[0] // what regex.match gives: no match
	} else {
		bctx := e.builtinContext()
		bctx.Location = c.loc
		e.relation, e.out, e.all = c.relation, nil, nil
		err = c.builtin(*bctx, ops, e.iter)
		out, all = e.out, e.all
		e.out, e.all = nil, nil
	}
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
		return e.term(ast.NewArray(all...)), completed
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
	if e.cache == nil {
		e.cache = builtins.Cache{}
	}
	seed := e.o.Seed
	if seed == nil {
		seed = rand.Reader
	}
	*e.bctx = topdown.BuiltinContext{
		Context:   e.ctx,
		Metrics:   noMetrics,
		Seed:      seed,
		Cancel:    &e.cancel,
		Cache:     e.cache,
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
	// Outside any with block, where nothing the plan reads is replaced.
	shared := fn.constant && len(e.memo) <= 1
	if shared {
		if t := fn.value.Load(); t != nil {
			return t, true
		}
	}
	if fn.memo && len(e.memo) > 0 {
		if top := e.memo[len(e.memo)-1]; top != nil && top[fn.index] != nil {
			return top[fn.index], true
		}
	}
	mark := len(e.slab)
	fr := e.frame(e.alloc(fn.nlocals))
	args(fr.l)
	caller := e.fn
	e.fn = fn
	for _, b := range fn.f.Blocks {
		if r := e.block(fr, b); r == unwind || r > 0 {
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
	ret := fr.ret
	e.dropFrame(fr)
	if e.err != nil || ret == nil {
		return nil, false
	}
	if shared {
		// A deep copy: ret and the terms in it were cut from this
		// evaluation's chunks, which the Program would otherwise keep
		// alive with every other value the evaluation cut from them (its
		// input's, say) for as long as it lives.
		if cp := ret.Copy(); fn.value.CompareAndSwap(nil, cp) {
			ret = cp
		} else {
			ret = fn.value.Load()
		}
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
		top[fn.index] = ret
	}
	return ret, true
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
	case *docRef:
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
