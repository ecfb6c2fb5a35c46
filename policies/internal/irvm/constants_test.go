package irvm_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/toolgate/toolgate/policies/internal/irvm"
)

// TestConstants: which rules a Program makes once and shares between
// evaluations (Program.Constants), and that what it shares gives every
// evaluation the value it would have made itself.
func TestConstants(t *testing.T) {
	p := prepare(t, "x = data.p.deny", `package p
organisms := {"human", "mouse", "rat"}
limits := {"ids": count(organisms) * 10}
now := time.now_ns()
pick := rand.intn("p", 1000000)
tool := input.tool
twice := {x | some x in organisms; x != tool}
deny contains "organism not allowed" if not input.organism in organisms
deny contains "too many ids" if count(input.ids) > limits.ids
deny contains "no time" if now < 0
deny contains "no pick" if pick < 0
deny contains "no twice" if count(twice) > 3
`)
	got := p.Constants()
	for _, want := range []string{"g0.data.p.organisms", "g0.data.p.limits"} {
		if !slices.Contains(got, want) {
			t.Errorf("Constants() = %v, want it to name %s", got, want)
		}
	}
	for _, not := range []string{"now", "pick", "tool", "twice", "deny"} {
		for _, name := range got {
			if strings.HasSuffix(name, "."+not) {
				t.Errorf("Constants() = %v names %s: its value may differ between evaluations", got, name)
			}
		}
	}
	// Many evaluations at once, the first ones racing to make the shared
	// value (run with -race): each decides as its own input says.
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 100 {
				org := []string{"human", "cat"}[(g+i)%2]
				ids := make([]any, (g*7+i)%40)
				in := ast.NewTerm(ast.MustInterfaceToValue(map[string]any{"organism": org, "ids": ids, "tool": "t"}))
				rs, err := p.Eval(context.Background(), in, irvm.Options{})
				if err != nil {
					t.Error(err)
					return
				}
				want := ast.NewSet()
				if org == "cat" {
					want.Add(ast.StringTerm("organism not allowed"))
				}
				if len(ids) > 30 {
					want.Add(ast.StringTerm("too many ids"))
				}
				if v := result(t, rs); v.Compare(want) != 0 {
					t.Errorf("organism %s, %d ids: deny = %v, want %v", org, len(ids), v, want)
					return
				}
			}
		})
	}
	wg.Wait()
}

// TestConstantsNotUnderWith: a rule made once outside a with block is not
// what a with block reads, and one made inside a with block is not kept.
func TestConstantsNotUnderWith(t *testing.T) {
	p := prepare(t, "x = data.p.r", `package p
base := {"a": 1}
size := count(base)
r := [size, inner, size]
inner := x if {
	x := size with count as mycount
}
mycount(_) := 42
`)
	for range 3 {
		rs, err := p.Eval(context.Background(), nil, irvm.Options{})
		if err != nil {
			t.Fatal(err)
		}
		want := ast.MustParseTerm(`[1, 42, 1]`).Value
		if got := result(t, rs); got.Compare(want) != 0 {
			t.Fatalf("r = %v, want %v", got, want)
		}
	}
}

// TestConstantsNotRebuilt: a policy with a large allow-list builds it
// once, not on every evaluation. Without sharing, each evaluation made a
// set of 2,000 strings (thousands of allocations).
func TestConstantsNotRebuilt(t *testing.T) {
	p := prepare(t, "x = data.p.deny", allowList(2000))
	in := ast.NewTerm(ast.MustInterfaceToValue(map[string]any{"host": "host-1999.example"}))
	eval := func() {
		rs, err := p.Eval(context.Background(), in, irvm.Options{Deadline: time.Now().Add(time.Minute)})
		if err != nil {
			t.Fatal(err)
		}
		if got := result(t, rs); got.Compare(ast.NewSet()) != 0 {
			t.Fatalf("deny = %v, want none", got)
		}
	}
	eval()
	if n := testing.AllocsPerRun(20, eval); n > 30 {
		t.Errorf("%.0f allocations per evaluation, want at most 30 (14 when written): the allow-list is rebuilt", n)
	}
}

// BenchmarkAllowList is one decision of a policy with a 2,000-name
// allow-list.
func BenchmarkAllowList(b *testing.B) {
	p := prepare(b, "x = data.p.deny", allowList(2000))
	in := ast.NewTerm(ast.MustInterfaceToValue(map[string]any{"host": "host-1999.example"}))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := p.Eval(context.Background(), in, irvm.Options{}); err != nil {
			b.Fatal(err)
		}
	}
}

// allowList is a policy refusing a host not among n names.
func allowList(n int) string {
	var b strings.Builder
	b.WriteString("package p\nallowed := {")
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%q", fmt.Sprintf("host-%d.example", i))
	}
	b.WriteString("}\ndeny contains \"host not allowed\" if not input.host in allowed\n")
	return b.String()
}
