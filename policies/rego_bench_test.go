package policies

import (
	"context"
	"encoding/json"
	"testing"
)

// benchPolicy is a 5-rule policy of the kinds platform teams write: a bound,
// an allow-list, a PII pattern, a size limit and an injection.
const benchPolicy = `package bench.policy
organisms := {"human", "mouse", "rat"}
deny contains {"msg": "limit must be at most 50", "path": "/limit"} if input.arguments.limit > 50
deny contains {"msg": "organism not allowed", "path": "/organism"} if not input.arguments.organism in organisms
deny contains {"msg": "query holds an e-mail address", "path": "/query"} if regex.match("[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\\.[A-Za-z]{2,}", input.arguments.query)
deny contains "too many ids" if count(input.arguments.ids) > 20
inject["X-Trace-Id"] := input.trace_id
`

func benchInput() *Input {
	return &Input{
		Tool: "bench",
		Arguments: map[string]any{
			"query": "EGFR kinase inhibitors", "organism": "human", "limit": json.Number("20"),
			"filters": map[string]any{"phase_min": json.Number("2"), "modality": "small_molecule"},
			"ids":     []any{"P00533", "P04626"},
		},
		Request: Request{Method: "POST", Host: "127.0.0.1:1", Path: "/bench/policy", Headers: map[string]string{"content-type": "application/json"}},
		Caller:  Caller{Agent: "a", Session: "s"},
		TraceID: "4bf92f3577b34da6a3ce929d0e0e4736",
	}
}

// BenchmarkRegoDecision is the cost of one decision of a 5-rule policy
// through a Set (deadline context included), as the pipeline pays it.
func BenchmarkRegoDecision(b *testing.B) {
	p, err := CompileRego("bench", map[string][]byte{"bench.rego": []byte(benchPolicy)})
	if err != nil {
		b.Fatal(err)
	}
	set := NewSet("bench", []Bound{{Policy: p, Mode: ModeEnforce}}, 0, false)
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
