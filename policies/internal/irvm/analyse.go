package irvm

import (
	"maps"
	"slices"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/ir"
)

// Analysis: which parts of the input a plan reads, from its statements.

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

// markConstants marks the rules whose value is the same in every
// evaluation: a rule (input and data its only parameters) that reads
// neither, calls only builtins whose value depends on their operands
// alone and only rules so marked, and holds no with or dynamic call. Its
// value, once made outside any with block, is kept by the Program and
// shared by every later evaluation: an allow-list such as
// organisms := {"human", "mouse"} is built once, not on every call.
//
// Sharing a value between evaluations is sound only if no statement ever
// changes a value it did not make: the plan changes values in place
// (SetAdd, ObjectInsert, ObjectInsertOnce, ArrayAppend) only in the local
// a Make statement of the same function filled. Where any function
// breaks that rule, nothing is marked.
func (p *Program) markConstants() {
	for _, fn := range p.funcs {
		if !makesWhatItChanges(fn.f.Blocks) {
			return
		}
	}
	if !makesWhatItChanges(p.plan.Blocks) {
		return
	}
	const (
		unknown = iota
		visiting
		yes
		no
	)
	state := make([]int, len(p.funcs))
	var constant func(fn *function) bool
	constant = func(fn *function) bool {
		switch state[fn.index] {
		case yes:
			return true
		case no, visiting: // a cycle is not followed
			return false
		}
		state[fn.index] = visiting
		ok := fn.memo
		visit := func(s ir.Stmt) {
			if !ok {
				return
			}
			switch s := s.(type) {
			case *ir.WithStmt, *ir.CallDynamicStmt:
				ok = false
				return
			case *ir.CallStmt:
				c := p.calls[s]
				switch {
				case c.fn != nil && c.fn.memo && ruleArgs(s.Args):
					// A rule called with input and data as they are:
					// constant if it is.
					ok = constant(c.fn)
					return
				case c.fn != nil:
					ok = false // a function of arguments: read below
				default:
					ok = pureBuiltin(s.Func)
				}
				if !ok {
					// A function call's arguments are read below; the
					// callee itself must be constant in them, which is not
					// followed: not marked.
					return
				}
			}
			accesses(s, func(l ir.Local) {
				if l == ir.Input || l == ir.Data {
					ok = false
				}
			}, func(ir.Local) {})
		}
		for _, b := range fn.f.Blocks {
			walkBlock(b, visit)
		}
		if ok {
			state[fn.index] = yes
		} else {
			state[fn.index] = no
		}
		return ok
	}
	for _, fn := range p.funcs {
		fn.constant = constant(fn)
	}
}

// ruleArgs reports whether a call's arguments are input and data, as
// they are.
func ruleArgs(args []ir.Operand) bool {
	if len(args) != 2 {
		return false
	}
	a, aok := args[0].Value.(ir.Local)
	b, bok := args[1].Value.(ir.Local)
	return aok && bok && a == ir.Input && b == ir.Data
}

// pureBuiltin reports whether a builtin's value depends on its operands
// alone: one of OPA's, not marked nondeterministic, reading no clock, and
// not one that prints or traces.
func pureBuiltin(name string) bool {
	d := ast.BuiltinMap[name]
	if d == nil || d.Nondeterministic || timeBuiltins[name] {
		return false
	}
	switch name {
	case ast.Print.Name, ast.InternalPrint.Name, ast.Trace.Name, ast.OPARuntime.Name:
		return false
	}
	return true
}

// makesWhatItChanges reports whether every statement of blocks that
// changes a local's value in place (SetAdd, ObjectInsert,
// ObjectInsertOnce, ArrayAppend) changes a value a Make statement made
// there: walking back from it, the first statement certain to have run
// that fills the local is a Make statement, and nothing that may have run
// in between (an earlier block, a nested block, an earlier turn of an
// enclosing loop) filled it otherwise. Then no value made elsewhere, such
// as a rule's value another evaluation shares, is ever changed.
func makesWhatItChanges(blocks []*ir.Block) bool {
	ok := true
	var walk func(b *ir.Block, outer []level)
	walk = func(b *ir.Block, outer []level) {
		for i, s := range b.Stmts {
			if !ok {
				return
			}
			here := append(outer, level{stmts: b.Stmts[:i]})
			if l, changes := changedLocal(s); changes && !madeHere(l, here) {
				ok = false
				return
			}
			switch s := s.(type) {
			case *ir.BlockStmt:
				for j, c := range s.Blocks {
					walk(c, append(here, before(s.Blocks[:j])...))
				}
			case *ir.ScanStmt:
				walk(s.Block, append(here, level{loop: s.Block}))
			case *ir.NotStmt:
				walk(s.Block, here)
			case *ir.WithStmt:
				walk(s.Block, here)
			}
		}
	}
	for i, b := range blocks {
		walk(b, before(blocks[:i]))
	}
	return ok
}

// before is the levels of blocks run one after another ahead of another
// block: a block whose statements cannot fail or break certainly ran
// whole; any other may have stopped anywhere.
func before(blocks []*ir.Block) []level {
	levels := make([]level, len(blocks))
	for i, b := range blocks {
		levels[i] = level{maybe: blocks[i : i+1]}
		if runsWhole(b) {
			levels[i] = level{stmts: b.Stmts}
		}
	}
	return levels
}

// runsWhole reports whether none of a block's statements can fail or
// break out of it.
func runsWhole(b *ir.Block) bool {
	for _, s := range b.Stmts {
		switch s.(type) {
		case *ir.MakeSetStmt, *ir.MakeObjectStmt, *ir.MakeArrayStmt, *ir.MakeNullStmt,
			*ir.MakeNumberIntStmt, *ir.MakeNumberRefStmt, *ir.AssignIntStmt,
			*ir.AssignVarStmt, *ir.ResetLocalStmt, *ir.NopStmt:
		default:
			return false
		}
	}
	return true
}

// level is one step out from a statement: the statements before it in
// its block (certain to have run), or the blocks that may have run before
// its block, or the loop body it is in (run before, in earlier turns).
type level struct {
	stmts []ir.Stmt
	maybe []*ir.Block
	loop  *ir.Block
}

// changedLocal is the local a statement changes in place.
func changedLocal(s ir.Stmt) (ir.Local, bool) {
	switch s := s.(type) {
	case *ir.SetAddStmt:
		return s.Set, true
	case *ir.ObjectInsertStmt:
		return s.Object, true
	case *ir.ObjectInsertOnceStmt:
		return s.Object, true
	case *ir.ArrayAppendStmt:
		return s.Array, true
	}
	return 0, false
}

// madeHere reports whether, walking out through levels (innermost last),
// local l is certainly filled by a Make statement before anything else
// fills it.
func madeHere(l ir.Local, levels []level) bool {
	for i := len(levels) - 1; i >= 0; i-- {
		lv := levels[i]
		if lv.loop != nil && fillsOtherwise(l, []*ir.Block{lv.loop}) {
			return false
		}
		if fillsOtherwise(l, lv.maybe) {
			return false
		}
		for j := len(lv.stmts) - 1; j >= 0; j-- {
			s := lv.stmts[j]
			if made, direct := fills(l, s); direct {
				if made {
					return true
				}
				if _, changes := changedLocal(s); !changes {
					return false
				}
				continue // changed in place: checked on its own
			}
			if fillsOtherwise(l, nested(s)) {
				return false
			}
		}
	}
	return false // a parameter, or nothing: not made here
}

// fills reports whether s itself writes l (direct), and whether by a Make
// statement (made).
func fills(l ir.Local, s ir.Stmt) (made, direct bool) {
	accesses(s, func(ir.Local) {}, func(x ir.Local) {
		if x == l {
			direct = true
		}
	})
	if direct {
		switch s.(type) {
		case *ir.MakeSetStmt, *ir.MakeObjectStmt, *ir.MakeArrayStmt:
			made = true
		}
	}
	return made, direct
}

// fillsOtherwise reports whether any statement in blocks writes l other
// than by a Make statement, an in-place change or a reset.
func fillsOtherwise(l ir.Local, blocks []*ir.Block) bool {
	bad := false
	for _, b := range blocks {
		walkBlock(b, func(s ir.Stmt) {
			if made, direct := fills(l, s); direct && !made {
				switch s.(type) {
				case *ir.SetAddStmt, *ir.ObjectInsertStmt, *ir.ObjectInsertOnceStmt, *ir.ArrayAppendStmt, *ir.ResetLocalStmt:
				default:
					bad = true
				}
			}
		})
	}
	return bad
}

// nested is the blocks a statement holds.
func nested(s ir.Stmt) []*ir.Block {
	switch s := s.(type) {
	case *ir.BlockStmt:
		return s.Blocks
	case *ir.ScanStmt:
		return []*ir.Block{s.Block}
	case *ir.NotStmt:
		return []*ir.Block{s.Block}
	case *ir.WithStmt:
		return []*ir.Block{s.Block}
	}
	return nil
}

// Constants names the rules whose value the Program makes once and
// shares between evaluations (see markConstants), in plan order.
func (p *Program) Constants() []string {
	var names []string
	for _, fn := range p.funcs {
		if fn.constant {
			names = append(names, fn.f.Name)
		}
	}
	return names
}

// findBindings finds where the plan binds the query's variables when it
// binds them in one place: a plan of one block that ends by making the
// result's object, inserting each variable's value under its name, and
// adding that object to the result set, which nothing before does. Then
// EvalVars runs the block up to there (bindHead) and reads the values
// the inserts would insert (bindInserts) instead of building the object.
func (p *Program) findBindings() {
	if len(p.plan.Blocks) != 1 {
		return
	}
	stmts := p.plan.Blocks[0].Stmts
	n := len(stmts)
	if n < 2 {
		return
	}
	add, ok := stmts[n-1].(*ir.ResultSetAddStmt)
	if !ok {
		return
	}
	var names []string
	var inserts []*ir.ObjectInsertStmt
	i := n - 2
	for ; i >= 0; i-- {
		ins, ok := stmts[i].(*ir.ObjectInsertStmt)
		if !ok || ins.Object != add.Value {
			break
		}
		k, kok := ins.Key.Value.(ir.StringIndex)
		if !kok {
			return
		}
		if l, isLocal := ins.Value.Value.(ir.Local); isLocal && l == add.Value {
			return
		}
		name := string(p.strings[k].Value.(ast.String))
		if slices.Contains(names, name) {
			return
		}
		names = append(names, name)
		inserts = append(inserts, ins)
	}
	if i < 0 {
		return
	}
	if mk, ok := stmts[i].(*ir.MakeObjectStmt); !ok || mk.Target != add.Value {
		return
	}
	head := &ir.Block{Stmts: stmts[:i]}
	adds := false
	walkBlock(head, func(s ir.Stmt) {
		if _, ok := s.(*ir.ResultSetAddStmt); ok {
			adds = true
		}
	})
	if adds {
		return
	}
	slices.Reverse(names)
	slices.Reverse(inserts)
	p.bindNames, p.bindInserts, p.bindHead = append([]string{}, names...), inserts, head // not nil when there are none
}

// Vars are the query's variables, in the order EvalVars gives their
// values; nil when the plan does not bind them in one place at its end,
// as OPA's planner does for a query of one expression per variable
// (x = ...; y = ...): then only Eval and EvalDocument run it.
func (p *Program) Vars() []string { return p.bindNames }
