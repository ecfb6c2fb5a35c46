package rego

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/policies"
)

// manyRules is a policy of n deny rules, each keyed on input.tool: the
// shape where OPA's interpreter indexes rules and the compiled engine
// evaluates every one.
func manyRules(n int) map[string][]byte {
	var b strings.Builder
	b.WriteString("package many\n")
	for i := range n {
		fmt.Fprintf(&b, "deny contains \"tool_%d is refused\" if { input.tool == \"tool_%d\"; input.arguments.n > 10 }\n", i, i)
	}
	return map[string][]byte{"many.rego": []byte(b.String())}
}

// BenchmarkRuleCount is one decision of a policy of N rules keyed on
// input.tool, on each in-process engine: where the engines break even,
// which sets maxCompiledRules.
func BenchmarkRuleCount(b *testing.B) {
	for _, n := range []int{10, 30, 50, 100, 300, 1000} {
		p, err := Compile("many", manyRules(n))
		if err != nil {
			b.Fatal(err)
		}
		c, err := p.compiledEngine(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		in := &policies.Input{Tool: "tool_3", Arguments: map[string]any{"n": 1}}
		for _, e := range []*Policy{c, p} {
			b.Run(fmt.Sprintf("rules=%d/%s", n, e.Engine()), func(b *testing.B) {
				set := policies.NewSet("t", []policies.Bound{{Policy: e, Mode: policies.ModeEnforce}}, time.Minute, false)
				ctx := context.Background()
				b.ReportAllocs()
				for b.Loop() {
					if d := set.Check(ctx, in); !d.Allow {
						b.Fatal(d.Detail)
					}
				}
			})
		}
	}
}
