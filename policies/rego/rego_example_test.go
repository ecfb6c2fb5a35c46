package rego_test

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/toolgate/toolgate/policies"
	"github.com/toolgate/toolgate/policies/rego"
)

// ExampleLoad loads one of the example policies, runs its unit tests,
// and decides two calls.
func ExampleLoad() {
	p, err := rego.Load("bounds", filepath.Join("..", "..", "examples", "policies", "bounds"))
	if err != nil {
		fmt.Println(err)
		return
	}
	results, _ := p.RunTests(context.Background())
	passed := 0
	for _, r := range results {
		if r.Pass {
			passed++
		}
	}
	fmt.Printf("%s: %d/%d tests pass\n", p.Package(), passed, len(results))

	set := policies.NewSet("pubmed_search", []policies.Bound{{Policy: p, Mode: policies.ModeEnforce}}, 0, false)
	for _, retmax := range []int{20, 500} {
		d := set.Check(context.Background(), &policies.Input{
			Tool:      "pubmed_search",
			Arguments: map[string]any{"term": "crispr", "retmax": retmax},
		})
		if d.Allow {
			fmt.Printf("retmax=%d: allowed\n", retmax)
			continue
		}
		fmt.Printf("retmax=%d: %s/%s: %s\n", retmax, d.Code, d.Reason, d.Detail)
	}
	// Output:
	// toolgate.bounds: 5/5 tests pass
	// retmax=20: allowed
	// retmax=500: validation/policy_denied: Tool 'pubmed_search' refused by policy 'bounds': retmax must be at most 100
}
