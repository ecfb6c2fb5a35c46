package policies

import (
	"context"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// goSDKNoArgSchema is the inputSchema the official Go SDK lists for a tool
// whose handler takes struct{}, generated for real: a server with such a
// tool, listed by a client over in-memory transports.
func goSDKNoArgSchema(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	srv := mcp.NewServer(&mcp.Implementation{Name: "s", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "ping"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{}, nil, nil
	})
	ct, st := mcp.NewInMemoryTransports()
	ss, err := srv.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "c", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.ListTools(ctx, nil)
	if err != nil || len(res.Tools) != 1 {
		t.Fatalf("list: %v %v", res, err)
	}
	b, err := json.Marshal(res.Tools[0].InputSchema)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// pythonNoArgSchema is what the Python SDK's FastMCP lists for a tool
// function without parameters: func_metadata
// (src/mcp/server/fastmcp/utilities/func_metadata.py in
// modelcontextprotocol/python-sdk) builds the arguments model with
// create_model(f"{func.__name__}Arguments", __base__=ArgModelBase), and
// lists pydantic's model_json_schema() of it. Pinned here; when python3
// with pydantic v2 is installed, the test checks the pin against pydantic.
const pythonNoArgSchema = `{"properties": {}, "title": "pingArguments", "type": "object"}`

// TestStrictClosesNoArgumentTools checks that strict mode refuses any
// argument to a tool the official MCP SDKs generate as taking none
// ("properties": {} says no names, it is not a free-form map), and that a
// call without arguments passes.
func TestStrictClosesNoArgumentTools(t *testing.T) {
	if out, err := exec.Command("python3", "-c", `import json, pydantic; print(json.dumps(pydantic.create_model("pingArguments").model_json_schema()))`).Output(); err == nil {
		if got := strings.TrimSpace(string(out)); got != pythonNoArgSchema {
			t.Errorf("pydantic lists a model without fields as %s; the pin says %s", got, pythonNoArgSchema)
		}
	}
	cases := []struct{ name, schema string }{
		// Listed by server-everything 2026.8.31 (TypeScript SDK v1 1.32.2,
		// inputSchema {} or a zod z.object({})) for get-tiny-image;
		// proxy's TestMCPClientsReturnRefusals lists it for real.
		{"TypeScript SDK v1, empty zod shape", `{"type":"object","properties":{},"$schema":"http://json-schema.org/draft-07/schema#"}`},
		// EMPTY_OBJECT_JSON_SCHEMA of @modelcontextprotocol/sdk 1.32.2
		// (dist/esm/server/mcp.js), listed for a tool registered without an
		// inputSchema.
		{"TypeScript SDK v1, no inputSchema", `{"type":"object","properties":{}}`},
		// @modelcontextprotocol/server 2.4.0 lists the same for a tool
		// registered without an inputSchema (server.mjs's flip_tools).
		{"TypeScript SDK v2, no inputSchema", `{"type":"object","properties":{}}`},
		{"Python SDK FastMCP", pythonNoArgSchema},
		{"Go SDK, struct{} input", goSDKNoArgSchema(t)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			strict, err := CompileSchema([]byte(tc.schema), SchemaOptions{Tool: "ping", Strict: true})
			if err != nil {
				t.Fatalf("compile %s: %v", tc.schema, err)
			}
			if vs := strict.Validate(map[string]any{}); len(vs) != 0 {
				t.Errorf("%s: a call without arguments got %+v", tc.schema, vs)
			}
			vs := strict.Validate(map[string]any{"verbose": true, "size": "large"})
			var paths []string
			for _, v := range vs {
				paths = append(paths, v.Path+":"+v.Reason)
			}
			if got := strings.Join(paths, ","); got != "/size:unknown_field,/verbose:unknown_field" {
				t.Errorf("%s: unknown arguments got %q, want both refused as unknown_field", tc.schema, got)
			}
		})
	}
}
