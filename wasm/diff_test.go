package wasm

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/toolgate/toolgate/policies"
	"github.com/toolgate/toolgate/policies/rego"
)

// TestDifferential: the same Rego policy decided by OPA's interpreter
// (rego.Compile), on the compiled engine (Rego.Compiled) and as
// WASM compiled by CompileRego gives the same result, error or not, on
// generated inputs: nested objects and arrays, unicode strings, numbers
// of every shape. testdata/rego_builtins
// calls host builtins (sprintf, units, net, time), one of which fails on
// some inputs.
func TestDifferential(t *testing.T) {
	e := newEngine(t)
	ctx := context.Background()
	for _, dir := range []string{"../policies/testdata/bench", "testdata/rego", "testdata/rego_builtins"} {
		files := map[string][]byte{}
		paths, _ := filepath.Glob(filepath.Join(dir, "*.rego"))
		for _, p := range paths {
			files[filepath.Base(p)] = must(os.ReadFile(p))
		}
		t.Run(filepath.Base(dir), func(t *testing.T) {
			interp, err := rego.Compile("p", files)
			if err != nil {
				t.Fatal(err)
			}
			planned, err := interp.Compiled(ctx)
			if err != nil {
				t.Fatal(err)
			}
			mod, err := CompileRego(ctx, files)
			if err != nil {
				t.Fatal(err)
			}
			compiled, err := e.Load(ctx, "p", mod, Options{Deadline: time.Second})
			if err != nil {
				t.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(4, uint64(len(dir))))
			denied, failed, injected, n := 0, 0, 0, 600
			for i := range n {
				in := genInput(rng)
				want, werr := interp.Eval(ctx, in)
				got, gerr := compiled.Eval(ctx, in)
				if (werr != nil) != (gerr != nil) || werr == nil && !equalResult(got, want) {
					doc, _ := in.AppendJSON(nil)
					t.Fatalf("input %d %s\ninterpreter: %s %v\nwasm:        %s %v", i, doc,
						must(json.Marshal(want)), werr, must(json.Marshal(got)), gerr)
				}
				// The compiled engine runs OPA's builtins: even their
				// errors read the same.
				pgot, perr := planned.Eval(ctx, in)
				if fmt.Sprint(werr) != fmt.Sprint(perr) || werr == nil && !equalResult(pgot, want) {
					doc, _ := in.AppendJSON(nil)
					t.Fatalf("input %d %s\ninterpreter: %s %v\ncompiled:    %s %v", i, doc,
						must(json.Marshal(want)), werr, must(json.Marshal(pgot)), perr)
				}
				switch {
				case werr != nil:
					failed++
				case len(want.Denies) > 0 || !want.Allowed:
					denied++
				case len(want.Inject) > 0:
					injected++
				}
			}
			// The generator must exercise both outcomes.
			if denied < n/10 || denied > n*9/10 {
				t.Fatalf("%d of %d inputs denied: the generator does not exercise the policy", denied, n)
			}
			// The host builtins' policy fails on some inputs (a builtin
			// error) and injects headers from builtins on others.
			if filepath.Base(dir) == "rego_builtins" && (failed < n/20 || failed > n/2 || injected < n/20) {
				t.Fatalf("%d of %d inputs failed, %d injected: the generator does not exercise the builtins", failed, n, injected)
			}
			t.Logf("%d inputs, %d denied, %d failed, %d allowed with injected headers, same decisions", n, denied, failed, injected)
		})
	}
}

var (
	genWords = []string{"human", "mouse", "rat", "cat", "EGFR kinase", "mail me at a.b@example.org", "日本語", "ünïcode", "ÜNÏCODE here",
		"emoji 🙂", "🧬🧪", "Xylophone", "x", "", "e\u0301", "tab\tand\nnewline", `quote " and \ backslash`, "\u2028", "ｆｕｌｌｗｉｄｔｈ", "deep",
		"longer than eight", "Ωmega", "résumé@example.fr"}
	genKeys = []string{"query", "organism", "limit", "ids", "title", "note", "filters", "items", "tags", "a", "ключ", "キー", "id"}
)

func genInput(rng *rand.Rand) *policies.Input {
	args := map[string]any{}
	for _, k := range genKeys[:9] {
		if rng.IntN(4) == 0 {
			continue
		}
		switch k {
		case "query", "organism", "title", "note":
			args[k] = genWords[rng.IntN(len(genWords))]
		case "limit":
			args[k] = genNumber(rng)
		case "ids", "tags":
			arr := make([]any, rng.IntN(25))
			for i := range arr {
				arr[i] = genWords[rng.IntN(6)]
			}
			args[k] = arr
		case "filters":
			f := map[string]any{}
			for range rng.IntN(4) {
				f[genKeys[rng.IntN(len(genKeys))]] = genValue(rng, 2)
			}
			args[k] = f
		case "items":
			arr := make([]any, rng.IntN(4))
			for i := range arr {
				arr[i] = genValue(rng, 2)
			}
			args[k] = arr
		}
	}
	if rng.IntN(5) == 0 {
		args["a"] = map[string]any{"b": map[string]any{"c": map[string]any{"d": genWords[rng.IntN(len(genWords))]}}}
	}
	agents := []string{"", "agent-1", "blocked-agent", "агент"}
	return &policies.Input{
		Tool:      "tool",
		Arguments: args,
		Request:   policies.Request{Method: "POST", Host: "h", Path: "/p", Query: map[string][]string{"q": {"1"}}, Headers: map[string]string{"x-a": "b"}},
		Caller:    policies.Caller{Agent: agents[rng.IntN(len(agents))], Session: "s"},
		TraceID:   fmt.Sprintf("%032x", rng.Uint64()),
	}
}

func genNumber(rng *rand.Rand) json.Number {
	switch rng.IntN(5) {
	case 0:
		return json.Number(fmt.Sprint(rng.IntN(100)))
	case 1:
		return json.Number(fmt.Sprint(-rng.IntN(100)))
	case 2:
		return json.Number(fmt.Sprintf("%.3f", rng.Float64()*100))
	case 3:
		return json.Number("50")
	}
	return json.Number("5e1")
}

func genValue(rng *rand.Rand, depth int) any {
	switch n := rng.IntN(7); {
	case n == 0:
		return nil
	case n == 1:
		return rng.IntN(2) == 0
	case n == 2:
		return genNumber(rng)
	case n == 3 || depth == 0:
		return genWords[rng.IntN(len(genWords))]
	case n == 4:
		arr := make([]any, rng.IntN(3))
		for i := range arr {
			arr[i] = genValue(rng, depth-1)
		}
		return arr
	}
	m := map[string]any{}
	for range rng.IntN(3) {
		m[genKeys[rng.IntN(len(genKeys))]] = genValue(rng, depth-1)
	}
	return m
}
