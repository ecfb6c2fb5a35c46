package rego

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/toolgate/toolgate/policies"
)

func benchInput() *policies.Input {
	return &policies.Input{
		Tool: "bench",
		Arguments: map[string]any{
			"query": "EGFR kinase inhibitors", "organism": "human", "limit": json.Number("20"),
			"filters": map[string]any{"phase_min": json.Number("2"), "modality": "small_molecule"},
			"ids":     []any{"P00533", "P04626"},
		},
		Request: policies.Request{Method: "POST", Host: "127.0.0.1:1", Path: "/bench/policy", Headers: map[string]string{"content-type": "application/json"}},
		Caller:  policies.Caller{Agent: "a", Session: "s"},
		TraceID: "4bf92f3577b34da6a3ce929d0e0e4736",
	}
}

// BenchmarkRegoDecision is the cost of one decision of a 5-rule policy
// through a Set (deadline context included), as the pipeline pays it, on
// the compiled engine (the default) and in OPA's interpreter.
func BenchmarkRegoDecision(b *testing.B) {
	p, err := Load("bench", "../testdata/bench")
	if err != nil {
		b.Fatal(err)
	}
	c, err := p.Compiled(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	b.Run(policies.EngineCompiled, func(b *testing.B) { benchRegoDecision(b, c) })
	b.Run(policies.EngineInterpreter, func(b *testing.B) { benchRegoDecision(b, p) })
	b.Run(policies.EngineCompiled+"-cold", func(b *testing.B) { benchColdDecision(b, c) })
}

// coldBuf is what benchColdDecision writes between two decisions: twice
// this machine's per-core L2 cache (1 MiB), as the upstream, the load
// generator and the rest of the call push the policy's code and data out
// of it in the proxy.
var coldBuf = make([]byte, 2<<20)

// benchColdDecision is benchRegoDecision with the core's caches filled
// with other data before each decision, timing the decisions alone
// (decision-ns): what a decision costs in the proxy, where the same policy
// takes 2 to 2.5 times its warm figure (docs/performance.md, fourteenth
// pass).
func benchColdDecision(b *testing.B, p *Policy) {
	set := policies.NewSet("bench", []policies.Bound{{Policy: p, Mode: policies.ModeEnforce}}, 10*time.Second, false)
	in := benchInput()
	ctx := context.Background()
	var spent time.Duration
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for j := 0; j < len(coldBuf); j += 64 {
			coldBuf[j]++
		}
		t0 := time.Now()
		if d := set.Check(ctx, in); !d.Allow {
			b.Fatal(d.Detail)
		}
		spent += time.Since(t0)
	}
	b.ReportMetric(float64(spent.Nanoseconds())/float64(b.N), "decision-ns")
}

func benchRegoDecision(b *testing.B, p *Policy) {
	// A deadline as the pipeline sets one, far enough that a benchmark
	// descheduled on a loaded machine does not time out.
	set := policies.NewSet("bench", []policies.Bound{{Policy: p, Mode: policies.ModeEnforce}}, 10*time.Second, false)
	in := benchInput()
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if d := set.Check(ctx, in); !d.Allow {
			b.Fatal(d.Detail)
		}
	}
}

// listPolicy denies with three PII patterns taken from a list, as teams
// write a growing set of them.
const listPolicy = `package pii
import rego.v1
patterns := [
	` + "`[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\\.[A-Za-z]{2,}`" + `,
	` + "`\\b[0-9]{4}-[0-9]{4}-[0-9]{4}-[0-9]{4}\\b`" + `,
	` + "`secret:[A-Za-z0-9]{8,}`" + `,
]
deny contains "the query holds personal data" if {
	some p in patterns
	regex.match(p, input.arguments.query)
}
`

// BenchmarkRegexList is a decision of listPolicy on the bench call (no
// pattern matches) on the compiled engine.
func BenchmarkRegexList(b *testing.B) {
	p, err := Compile("pii", map[string][]byte{"pii.rego": []byte(listPolicy)})
	if err != nil {
		b.Fatal(err)
	}
	c, err := p.Compiled(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	benchRegoDecision(b, c)
}
