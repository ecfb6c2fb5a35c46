package rego

import (
	"context"
	"testing"
	"time"

	"github.com/toolgate/toolgate/policies"
)

// TestManyRulesStayInInterpreter checks that a policy with more rules
// than maxCompiledRules runs in OPA's interpreter when the compiled engine
// is asked for (where it is faster: BenchmarkRuleCount), that the
// configuration says so, and that it decides the same.
func TestManyRulesStayInInterpreter(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		rules int
		want  string
	}{{10, policies.EngineCompiled}, {maxCompiledRules, policies.EngineCompiled}, {maxCompiledRules + 1, policies.EngineInterpreter}, {1000, policies.EngineInterpreter}} {
		p, err := Compile("many", manyRules(c.rules))
		if err != nil {
			t.Fatal(err)
		}
		e, err := p.Compiled(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if e.Engine() != c.want {
			t.Errorf("%d rules: engine %s, want %s", c.rules, e.Engine(), c.want)
		}
		set := policies.NewSet("t", []policies.Bound{{Policy: e, Mode: policies.ModeEnforce}}, time.Minute, false)
		if d := set.Check(ctx, &policies.Input{Tool: "tool_3", Arguments: map[string]any{"n": 11}}); d.Allow || d.Violations[0].Message != "tool_3 is refused" {
			t.Errorf("%d rules: %+v, want tool_3 refused", c.rules, d)
		}
		if d := set.Check(ctx, &policies.Input{Tool: "tool_3", Arguments: map[string]any{"n": 1}}); !d.Allow {
			t.Errorf("%d rules: %+v, want allowed", c.rules, d)
		}
	}
}
