package irvm

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/ir"
	"github.com/open-policy-agent/opa/v1/topdown"
)

// Compiling: a plan made into a Program, and which statements it runs.

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
					if s.Func == ast.RegexMatch.Name && len(s.Args) == 2 {
						if i, ok := s.Args[0].Value.(ir.StringIndex); ok && int(i) < len(p.strings) {
							if pat, ok := p.strings[i].Value.(ast.String); ok {
								c.literals = regexLiterals(string(pat))
							}
						} else {
							c.patterns = &literalCache{}
						}
					}
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
	p.markConstants()
	p.findBindings()
	p.inputKeys = p.readsOfInput()
	if p.inputKeys != nil {
		p.inputFields = p.fieldsOfInput()
	}
	return p, nil
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
