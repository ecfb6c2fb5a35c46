package policies_test

import (
	"fmt"

	"github.com/toolgate/toolgate/policies"
)

func ExampleCompileSchema() {
	schema, err := policies.CompileSchema([]byte(`{
		"type": "object",
		"required": ["term"],
		"properties": {
			"term": {"type": "string"},
			"retmax": {"type": "integer", "minimum": 1, "maximum": 100},
			"pmid": {"type": "array", "items": {"type": "string"}}
		}
	}`), policies.SchemaOptions{Tool: "pubmed_search", Strict: true})
	if err != nil {
		fmt.Println(err)
		return
	}

	// Arguments from a query string are strings: coerce them first.
	args := schema.Coerce(map[string]any{"term": "brca1", "retmax": "5", "pmid": "123"})
	fmt.Println(schema.Validate(args) == nil)

	vs := schema.Validate(map[string]any{"term": "brca1", "edit_requests": []any{}})
	fmt.Println(policies.Reason(vs))
	fmt.Println(policies.Detail("pubmed_search", vs))

	vs = schema.Validate(map[string]any{"retmax": 500.0})
	for _, v := range vs {
		fmt.Printf("%s %s: %s (expected %s)\n", v.Path, v.Reason, v.Message, v.Expected)
	}
	fmt.Println(policies.Detail("pubmed_search", vs))
	// Output:
	// true
	// unknown_field
	// Tool 'pubmed_search' got unknown argument 'edit_requests'; expected one of: pmid, retmax, term
	// /retmax schema: too large (expected at most 100)
	// /term missing_field: missing required argument (expected string)
	// Tool 'pubmed_search' is missing required argument 'term' (and 1 more problem)
}
