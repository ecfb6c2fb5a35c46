package wasm

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/bucketing"
	"github.com/toolgate/toolgate/policies"
	"github.com/toolgate/toolgate/policies/rego"
)

// benchInput is the input of policies' BenchmarkRegoDecision: a call the
// bench policy allows.
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

// benchDecide runs decisions of ev through a policies.Set, as the pipeline
// pays them (the Set's deadline context included), and checks each.
func benchDecide(b *testing.B, ev policies.Evaluator) {
	set := policies.NewSet("bench", []policies.Bound{{Policy: ev, Mode: policies.ModeEnforce}}, 0, false)
	in := benchInput()
	ctx := context.Background()
	if d := set.Check(ctx, in); !d.Allow || (ev.Name() != "allow" && d.Inject["X-Trace-Id"] != in.TraceID) {
		b.Fatalf("%s: %+v", ev.Name(), d)
	}
	refused := 0
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if d := set.Check(ctx, in); !d.Allow {
			if d.Reason != bucketing.ReasonPolicyTimeout {
				b.Fatal(d.Detail)
			}
			refused++ // a stall of the shared machine past the deadline
		}
	}
	b.StopTimer()
	if refused*100 > b.N {
		b.Fatalf("%d of %d calls timed out", refused, b.N)
	}
	b.ReportMetric(float64(refused)/float64(b.N), "timeouts/op")
}

func benchPolicy(b *testing.B, file string, o Options) *Policy {
	ctx := context.Background()
	e := newEngine(b)
	p, err := e.LoadFile(ctx, file, "testdata/"+file+".wasm", o)
	if err != nil {
		b.Fatal(err)
	}
	return p
}

// BenchmarkWASMDecision is the cost of one decision of the bench policy
// (policies/testdata/bench) per way of running it, same run: pooled WASM
// instances of the Rego compiled by CompileRego and of the Go port, a
// fresh instance per call, the in-process Rego interpreter and the
// compiled engine (policies/irvm).
func BenchmarkWASMDecision(b *testing.B) {
	b.Run("rego-wasm-pooled", func(b *testing.B) {
		benchDecide(b, benchPolicy(b, "bench_rego", Options{}))
	})
	// A Go module's first calls (its runtime warming up) can run past the
	// default 10ms on a loaded machine: Go modules get a longer deadline,
	// as docs/wasm-abi.md advises.
	b.Run("go-wasm-pooled", func(b *testing.B) {
		benchDecide(b, benchPolicy(b, "bench_go", Options{Deadline: 100 * time.Millisecond}))
	})
	b.Run("wat-wasm-pooled", func(b *testing.B) {
		benchDecide(b, benchPolicy(b, "allow", Options{}))
	})
	b.Run("rego-wasm-fresh", func(b *testing.B) {
		p := benchPolicy(b, "bench_rego", Options{})
		benchDecide(b, freshEach{p})
	})
	b.Run("rego-interpreter", func(b *testing.B) {
		benchDecide(b, benchInterpreter(b, benchSource(b, false)))
	})
	b.Run("rego-compiled", func(b *testing.B) {
		benchDecide(b, benchCompiled(b, benchInterpreter(b, benchSource(b, false))))
	})
	// The same policy without its regex.match rule: what the regex costs.
	// (OPA's WASM runtime compiles a regular expression on every
	// evaluation; CompileRego sends regex.match to the host, which caches
	// compiled patterns as the interpreter does.)
	b.Run("noregex/rego-wasm-pooled", func(b *testing.B) {
		mod, err := CompileRego(context.Background(), map[string][]byte{"bench.rego": benchSource(b, true)})
		if err != nil {
			b.Fatal(err)
		}
		e := newEngine(b)
		p, err := e.Load(context.Background(), "bench", mod, Options{})
		if err != nil {
			b.Fatal(err)
		}
		benchDecide(b, p)
	})
	b.Run("noregex/rego-interpreter", func(b *testing.B) {
		benchDecide(b, benchInterpreter(b, benchSource(b, true)))
	})
	b.Run("noregex/rego-compiled", func(b *testing.B) {
		benchDecide(b, benchCompiled(b, benchInterpreter(b, benchSource(b, true))))
	})
	// A small policy, the same rule three ways: the WAT module (a scan of
	// the input for "forbidden"), and its Rego twin compiled to WASM and
	// interpreted.
	b.Run("small/wat-wasm-pooled", func(b *testing.B) {
		benchDecide(b, benchPolicy(b, "allow", Options{}))
	})
	b.Run("small/rego-wasm-pooled", func(b *testing.B) {
		mod, err := CompileRego(context.Background(), map[string][]byte{"small.rego": []byte(smallRego)})
		if err != nil {
			b.Fatal(err)
		}
		p, err := newEngine(b).Load(context.Background(), "allow", mod, Options{})
		if err != nil {
			b.Fatal(err)
		}
		benchDecide(b, p)
	})
	b.Run("small/rego-interpreter", func(b *testing.B) {
		benchDecide(b, benchSmall(b))
	})
	b.Run("small/rego-compiled", func(b *testing.B) {
		benchDecide(b, benchCompiled(b, benchSmall(b)))
	})
}

// smallRego is the WAT module allow.wat's rule in Rego: deny a call when a
// string anywhere in its input holds "forbidden".
const smallRego = `package small

deny contains {"msg": "input holds a forbidden word", "path": "/arguments"} if {
	walk(input, [_, v])
	is_string(v)
	contains(v, "forbidden")
}
`

func benchSource(b *testing.B, noRegex bool) []byte {
	src, err := os.ReadFile("../policies/testdata/bench/bench.rego")
	if err != nil {
		b.Fatal(err)
	}
	if !noRegex {
		return src
	}
	var keep []string
	for _, l := range strings.Split(string(src), "\n") {
		if !strings.Contains(l, "regex.match") {
			keep = append(keep, l)
		}
	}
	return []byte(strings.Join(keep, "\n"))
}

func benchSmall(b *testing.B) *rego.Policy {
	r, err := rego.Compile("allow", map[string][]byte{"small.rego": []byte(smallRego)})
	if err != nil {
		b.Fatal(err)
	}
	return r
}

// benchCompiled is r on the compiled engine.
func benchCompiled(b *testing.B, r *rego.Policy) *rego.Policy {
	c, err := r.Compiled(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	return c
}

func benchInterpreter(b *testing.B, src []byte) *rego.Policy {
	r, err := rego.Compile("bench", map[string][]byte{"bench.rego": src})
	if err != nil {
		b.Fatal(err)
	}
	return r
}

// freshEach evaluates each call on a fresh instance, closed after it.
type freshEach struct{ p *Policy }

func (f freshEach) Name() string { return f.p.Name() }
func (f freshEach) Eval(ctx context.Context, in *policies.Input) (policies.Result, error) {
	return f.p.evalFresh(ctx, in)
}
