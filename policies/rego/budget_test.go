package rego

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/toolgate/toolgate/policies"
	"github.com/toolgate/toolgate/policies/budget"
)

// budgetPolicy reads the budget counters two ways: a dotted path into a
// budget, and the whole input.budget object.
const budgetPolicy = `package toolgate.pace

deny contains "half of the session budget is spent" if {
	b := input.budget.limits.session_calls
	b.calls * 2 >= b.limit_calls
}

deny contains "the same call again" if {
	input.budget.repeats >= 2
}

deny contains "no budget seen" if {
	count(input.budget) == 0
	input.arguments.strict == true
}
`

// TestBudgetInputOnEveryEngine feeds the counters of a real budget engine
// to a Rego policy, on OPA's interpreter and the compiled engine, call by
// call: both deny once half of the session's budget is spent, and once a
// call is repeated; without budgets, input.budget is {}. The wire form the
// WASM engine reads carries the same object.
func TestBudgetInputOnEveryEngine(t *testing.T) {
	interp, err := Compile("pace", map[string][]byte{"pace.rego": []byte(budgetPolicy)})
	if err != nil {
		t.Fatal(err)
	}
	compiled, err := interp.Compiled(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	cfg := budget.Config{
		Limits: []budget.Limit{{Name: "session_calls", Per: []string{"session"}, Calls: 6, Window: time.Hour}},
		Loops:  budget.LoopConfig{MaxRepeats: 10},
	}
	if err := cfg.Validate([]string{"search"}, nil); err != nil {
		t.Fatal(err)
	}
	eng := budget.New(&cfg, nil)
	ctx := context.Background()
	tests := []struct {
		name string
		term string
		want string // the deny message, or "" to allow
	}{
		{"first call", "a", ""},
		{"second call, other arguments", "b", ""},
		{"third call, other arguments", "c", ""},
		{"fourth call: 3 of 6 spent", "d", "half of the session budget is spent"},
	}
	for _, tc := range tests {
		c := &budget.Call{Tool: "search", Session: "s1", Args: map[string]any{"term": tc.term}}
		in := &policies.Input{Tool: "search", Arguments: c.Args, Protocol: "http", Budget: eng.Counters(c)}
		for _, p := range []*Policy{interp, compiled} {
			res, err := p.Eval(ctx, in)
			if err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			got := ""
			if len(res.Denies) > 0 {
				got = res.Denies[0].Message
			}
			if got != tc.want {
				t.Errorf("%s (%s engine): deny %q, want %q; input.budget %v", tc.name, engineOf(p, compiled), got, tc.want, in.Budget)
			}
		}
		if v := eng.Admit(ctx, c); v.Refused {
			t.Fatalf("%s: refused %+v", tc.name, v)
		}
	}

	// A repeated call: repeats counts the identical calls before this one.
	cfg2 := budget.Config{Loops: budget.LoopConfig{MaxRepeats: 10, Window: time.Minute}}
	if err := cfg2.Validate([]string{"search"}, nil); err != nil {
		t.Fatal(err)
	}
	eng2 := budget.New(&cfg2, nil)
	c := &budget.Call{Tool: "search", Session: "s1", Args: map[string]any{"term": "x"}}
	for range 2 {
		eng2.Admit(ctx, c)
	}
	in := &policies.Input{Tool: "search", Arguments: c.Args, Protocol: "http", Budget: eng2.Counters(c)}
	for _, p := range []*Policy{interp, compiled} {
		res, err := p.Eval(ctx, in)
		if err != nil || len(res.Denies) != 1 || res.Denies[0].Message != "the same call again" {
			t.Errorf("repeated call (%s engine): %+v %v", engineOf(p, compiled), res.Denies, err)
		}
	}

	// No budgets: input.budget is {}.
	none := &policies.Input{Tool: "search", Arguments: map[string]any{"strict": true}, Protocol: "http"}
	for _, p := range []*Policy{interp, compiled} {
		res, err := p.Eval(ctx, none)
		if err != nil || len(res.Denies) != 1 || res.Denies[0].Message != "no budget seen" {
			t.Errorf("no budgets (%s engine): %+v %v", engineOf(p, compiled), res.Denies, err)
		}
	}

	// The wire form (the WASM engines' input) holds the same counters.
	raw, err := in.AppendJSON(nil)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Budget struct {
			Repeats int64 `json:"repeats"`
		} `json:"budget"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil || doc.Budget.Repeats != 2 {
		t.Errorf("wire form: repeats %d (%v) in %s", doc.Budget.Repeats, err, raw)
	}
}

func engineOf(p, compiled *Policy) string {
	if p == compiled {
		return "compiled"
	}
	return "interpreter"
}
