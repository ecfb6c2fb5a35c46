package irvm

import (
	"context"
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/ir"
)

// SharedEmptiesEmpty reports whether emptySet and emptyObject, which lazy
// Make statements share between evaluations, are still empty: the
// conformance test checks it after the whole suite ran.
func SharedEmptiesEmpty() bool {
	return emptySet.Value.(ast.Set).Len() == 0 && emptyObject.Value.(ast.Object).Len() == 0
}

// TestLazyMakes runs hand-written plans that build a set, read it and
// insert into it in various orders: a Make statement is lazy (markLazy)
// only where no read of its local can come before an insert, and every
// plan gives x the set the plan's statements say, evaluated twice.
func TestLazyMakes(t *testing.T) {
	loc := func(n int) ir.Operand { return ir.Operand{Value: ir.Local(n)} }
	str := func(i int) ir.Operand { return ir.Operand{Value: ir.StringIndex(i)} }
	// Strings: 0 "x", 1 "a", 2 "b". Locals: 2 the set, 3 an alias of it,
	// 4 the result, 5 an array, 6 and 7 a scan's key and value.
	makeSet := &ir.MakeSetStmt{Target: 2}
	result := func(x int) []ir.Stmt {
		return []ir.Stmt{
			&ir.MakeObjectStmt{Target: 4},
			&ir.ObjectInsertStmt{Object: 4, Key: str(0), Value: loc(x)},
			&ir.ResultSetAddStmt{Value: 4},
		}
	}
	array := []ir.Stmt{
		&ir.MakeArrayStmt{Target: 5, Capacity: 2},
		&ir.ArrayAppendStmt{Array: 5, Value: str(1)},
		&ir.ArrayAppendStmt{Array: 5, Value: str(2)},
	}
	cat := func(parts ...[]ir.Stmt) []ir.Stmt {
		var out []ir.Stmt
		for _, p := range parts {
			out = append(out, p...)
		}
		return out
	}
	for _, c := range []struct {
		name  string
		stmts []ir.Stmt
		lazy  bool
		want  string
	}{
		{"made, never filled", cat([]ir.Stmt{makeSet}, result(2)), true, `set()`},
		{"filled, then read", cat([]ir.Stmt{makeSet, &ir.SetAddStmt{Set: 2, Value: str(1)}}, result(2)), true, `{"a"}`},
		{"filled in a nested block, then read", cat([]ir.Stmt{makeSet, &ir.BlockStmt{Blocks: []*ir.Block{
			{Stmts: []ir.Stmt{&ir.SetAddStmt{Set: 2, Value: str(1)}}},
		}}}, result(2)), true, `{"a"}`},
		{"copied, then filled: the copy sees the insert", cat([]ir.Stmt{makeSet,
			&ir.AssignVarStmt{Source: loc(2), Target: 3},
			&ir.SetAddStmt{Set: 2, Value: str(1)}}, result(3)), false, `{"a"}`},
		{"read and filled in one loop", cat([]ir.Stmt{makeSet}, array, []ir.Stmt{&ir.ScanStmt{Source: 5, Key: 6, Value: 7, Block: &ir.Block{Stmts: []ir.Stmt{
			&ir.AssignVarStmt{Source: loc(2), Target: 3},
			&ir.SetAddStmt{Set: 2, Value: loc(7)},
		}}}}, result(3)), false, `{"a", "b"}`},
		{"filled in a loop, read after", cat([]ir.Stmt{makeSet}, array, []ir.Stmt{&ir.ScanStmt{Source: 5, Key: 6, Value: 7, Block: &ir.Block{Stmts: []ir.Stmt{
			&ir.SetAddStmt{Set: 2, Value: loc(7)},
		}}}}, result(2)), true, `{"a", "b"}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			pol := &ir.Policy{
				Static: &ir.Static{Strings: []*ir.StringConst{{Value: "x"}, {Value: "a"}, {Value: "b"}}},
				Plans:  &ir.Plans{Plans: []*ir.Plan{{Name: "eval", Blocks: []*ir.Block{{Stmts: c.stmts}}}}},
			}
			p, err := compile(pol, nil)
			if err != nil {
				t.Fatal(err)
			}
			if p.lazy[makeSet] != c.lazy {
				t.Errorf("the set's Make is lazy: %v, want %v", p.lazy[makeSet], c.lazy)
			}
			want := ast.MustParseTerm(c.want).Value
			for i := range 2 {
				rs, err := p.Eval(context.Background(), nil, Options{})
				if err != nil || len(rs) != 1 {
					t.Fatalf("evaluation %d: %v, %v", i, rs, err)
				}
				if got := rs[0].Value.(ast.Object).Get(ast.StringTerm("x")); got == nil || got.Value.Compare(want) != 0 {
					t.Errorf("evaluation %d: x = %v, want %v", i, got, want)
				}
			}
			if !SharedEmptiesEmpty() {
				t.Fatal("a shared empty value was changed")
			}
		})
	}
}
