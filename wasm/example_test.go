package wasm_test

import (
	"context"
	"fmt"

	"github.com/toolgate/toolgate/policies"
	"github.com/toolgate/toolgate/wasm"
)

// A Rego policy compiled to WASM, loaded into a pooled, sandboxed policy
// and asked about one call.
func ExampleEngine_Load() {
	ctx := context.Background()
	module, err := wasm.CompileRego(ctx, map[string][]byte{"limit.rego": []byte(`package limit
deny contains {"msg": "limit must be at most 50", "path": "/limit"} if input.arguments.limit > 50
`)})
	if err != nil {
		panic(err)
	}
	e, err := wasm.NewEngine(ctx, wasm.EngineOptions{CacheDir: "off"})
	if err != nil {
		panic(err)
	}
	defer e.Close(ctx)
	p, err := e.Load(ctx, "limit", module, wasm.Options{})
	if err != nil {
		panic(err)
	}
	res, err := p.Eval(ctx, &policies.Input{Tool: "search", Arguments: map[string]any{"limit": 80}})
	if err != nil {
		panic(err)
	}
	fmt.Println(p.ABI(), res.Denies[0].Path, res.Denies[0].Message)
	// Output: opa/1.3 /limit limit must be at most 50
}
