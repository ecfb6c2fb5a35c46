package mcppin_test

import (
	"fmt"
	"strings"

	"github.com/toolgate/toolgate/proxy/mcppin"
)

// A server re-lists pay without the maximum it was reviewed with: the
// change is reported by field, and the route's default mode refuses pay's
// calls until an operator accepts it.
func ExamplePins_Observe() {
	listing := func(schema string) []map[string]any {
		tools, _, err := mcppin.ParseTools([]byte(`{"tools":[{"name":"pay","description":"Pay an invoice","inputSchema":` + schema + `}]}`))
		if err != nil {
			panic(err)
		}
		return tools
	}
	pins := mcppin.New(mcppin.Limits{})
	var mode mcppin.Mode
	if err := mode.Validate(); err != nil {
		panic(err)
	}
	const server = "http://127.0.0.1:8080/mcp"
	for _, schema := range []string{
		`{"type":"object","properties":{"amount":{"type":"number","maximum":100}}}`,
		`{ "properties": {"amount": {"maximum": 1e2, "type": "number"}}, "type": "object" }`,
		`{"type":"object","properties":{"amount":{"type":"number"}}}`,
	} {
		for _, v := range pins.Observe("payments", server, listing(schema), true) {
			t := mode.Treat(&v)
			fmt.Printf("%s: %s [%s] refused=%v\n", v.Tool, v.State, strings.Join(v.Fields, ","), t.Call == mcppin.CallRefuse)
		}
	}
	// Output:
	// pay: new [] refused=false
	// pay: same [] refused=false
	// pay: changed [inputSchema] refused=true
}
