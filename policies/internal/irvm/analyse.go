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
