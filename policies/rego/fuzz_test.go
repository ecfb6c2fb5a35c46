package rego

import (
	"context"
	"fmt"
	"reflect"
	"testing"

	"github.com/toolgate/toolgate/internal/testutil"
)

// FuzzCompiledEngine decides arbitrary arguments with each example policy
// in OPA's interpreter and on the compiled engine: the same decision, or
// the same error.
func FuzzCompiledEngine(f *testing.F) {
	seeds := []string{
		`{"retmax": 500, "term": "brca1"}`,
		`{"query": "mail me at a.b@example.org", "organism": "human"}`,
		`{"query": "call +1 (555) 010-9999", "ids": ["a", "b"]}`,
		`{"organism": "cat", "limit": 1e400, "filters": {"phase": -1}}`,
		`{"documentId": "d1", "requests": [{"insert": {"text": "hi", "index": 1}}]}`,
		`{"term": ["not", "a", "string"], "retmax": "20", "x": null}`,
		`{"doc_id": "d1", "requests": [{"deleteRange": {"startIndex": 9, "endIndex": 2}}, {"deleteRange": null}, 3]}`,
	}
	// The tool named in the input, so policies that decide on it do.
	tools := []string{"t", "docs_edit", "pubmed_search", "drug_targets"}
	names := []string{"bounds", "allowlist", "pii_guard", "edit_approval", "session_inject"}
	for i, s := range seeds {
		f.Add(uint8(i), []byte(s))
	}
	// edit_approval (names[3]) on docs_edit (tools[1]): a deletion asks for
	// approval, a reversed range is denied.
	f.Add(uint8(3+1*len(names)), []byte(seeds[len(seeds)-1]))
	type pair struct{ interp, compiled *Policy }
	pairs := make([]pair, len(names))
	for i, name := range names {
		p, err := Load(name, "../../examples/policies/"+name)
		if err != nil {
			f.Fatal(err)
		}
		c, err := p.Compiled(context.Background())
		if err != nil {
			f.Fatal(err)
		}
		pairs[i] = pair{p, c}
	}
	f.Fuzz(func(t *testing.T, which uint8, data []byte) {
		args, ok := testutil.DecodeArgs(data)
		if !ok {
			return
		}
		p := pairs[int(which)%len(pairs)]
		tool := tools[int(which)/len(pairs)%len(tools)]
		in := shapesInput(args, tool, "agent")
		ctx := context.Background()
		want, werr := p.interp.Eval(ctx, in)
		got, gerr := p.compiled.Eval(ctx, in)
		if fmt.Sprint(werr) != fmt.Sprint(gerr) || werr == nil && !reflect.DeepEqual(got, want) {
			t.Fatalf("%s on %s:\ninterpreter %+v %v\ncompiled    %+v %v", p.interp.Name(), data, want, werr, got, gerr)
		}
	})
}
