package openapiimport

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/toolgate/toolgate/cmd/toolgate/internal/config"
	"github.com/toolgate/toolgate/policies"
)

// pinned are the published OpenAPI documents the importer is tested on
// (testdata/README.md says where each comes from and under which
// licence), with what importing each must give: how many operations
// become tools, and each refused operation with (a part of) its reason.
var pinned = []struct {
	file     string
	imported int
	refused  map[string]string // operation -> part of the reason
}{
	{"../../../../examples/openapi/petstore.yaml", 16, map[string]string{
		"POST /pet/{petId}/uploadImage": "application/octet-stream only",
		"POST /user/createWithList":     "request body is array",
		"PUT /user/{username}":          `"username" is both a path parameter and a body member`,
	}},
	{"testdata/petstore31.yaml", 6, nil},
	{"testdata/petstore-expanded.yaml", 4, nil},
	{"testdata/petstore-expanded-swagger2.yaml", 3, map[string]string{
		// Swagger 2.0's default collectionFormat is csv: tags=a,b.
		"GET /pets": `query parameter "tags" is an array in style form, explode false`,
	}},
	{"testdata/uspto.yaml", 3, nil},
	{"testdata/api-with-examples.yaml", 2, nil},
	{"testdata/link-example.yaml", 6, nil},
}

// TestPinnedDocuments imports each pinned document and holds it to its
// counts and reasons; the written configuration must load with toolgate's
// own loader (what `toolgate policy check` and `toolgate run` load), and
// every example the document gives for a request (a parameter's, a
// request body's, and the body Swagger UI builds from its schema's
// property examples) must pass the tool's schema, compiled as the
// sidecar compiles it.
func TestPinnedDocuments(t *testing.T) {
	var total, totalRefused, totalExamples int
	for _, p := range pinned {
		t.Run(filepath.Base(p.file), func(t *testing.T) {
			data, err := os.ReadFile(p.file)
			if err != nil {
				t.Fatal(err)
			}
			res, err := Import(context.Background(), data, Options{Server: "https://api.example.org/base"})
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Tools) != p.imported {
				t.Errorf("%d tools, want %d", len(res.Tools), p.imported)
			}
			got := map[string]string{}
			for _, r := range res.Refused {
				got[r.Operation] = r.Reason
			}
			for op, want := range p.refused {
				if !strings.Contains(got[op], want) {
					t.Errorf("%s: refused as %q, want a reason with %q", op, got[op], want)
				}
			}
			for op, why := range got {
				if _, ok := p.refused[op]; !ok {
					t.Errorf("%s refused unexpectedly: %s", op, why)
				}
			}
			total += len(res.Tools)
			totalRefused += len(res.Refused)
			loadRendered(t, res, p.file)
			n := checkExamples(t, data, res)
			totalExamples += n
			t.Logf("%s: %d operations imported, %d refused; %d examples pass", res.Title, len(res.Tools), len(res.Refused), n)
		})
	}
	t.Logf("all documents: %d operations imported, %d refused, %d examples checked", total, totalRefused, totalExamples)
	if totalExamples < 10 {
		t.Errorf("only %d examples checked: the examples are not being found", totalExamples)
	}
}

// loadRendered writes the tools as Render does and loads the file with
// the configuration loader.
func loadRendered(t *testing.T, res *Result, source string) {
	t.Helper()
	out, err := Render(res, source)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "tools.yaml")
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := config.LoadOffline(path); err != nil {
		t.Fatalf("the imported tools do not load: %v\n%s", err, out)
	}
}

// checkExamples validates every request example of the document against
// the tool made of its operation and returns how many it checked.
func checkExamples(t *testing.T, data []byte, res *Result) int {
	t.Helper()
	doc, _, err := load(context.Background(), data)
	if err != nil {
		t.Fatal(err)
	}
	byOp := map[string]Tool{}
	for _, tl := range res.Tools {
		byOp[tl.Operation] = tl
	}
	n := 0
	for p, item := range doc.Paths.Map() {
		for m, op := range item.Operations() {
			tl, ok := byOp[strings.ToUpper(m)+" "+p]
			if !ok {
				continue
			}
			js, _ := json.Marshal(tl.Schema)
			sch, err := policies.CompileSchema(js, policies.SchemaOptions{Tool: tl.Name, Strict: true, Limits: policies.FileSchemaLimits})
			if err != nil {
				t.Fatalf("%s: %v", tl.Name, err)
			}
			params := map[string]any{}
			var paramExamples []map[string]any
			for _, pr := range mergeParams(item.Parameters, op.Parameters) {
				prm := pr.Value
				if prm.In != "path" && prm.In != "query" {
					continue
				}
				exs := paramExampleValues(prm)
				for _, ex := range exs {
					paramExamples = append(paramExamples, map[string]any{prm.Name: ex})
				}
				if prm.Required || prm.In == "path" {
					if len(exs) > 0 {
						params[prm.Name] = exs[0]
					} else {
						params[prm.Name] = sample(prm.Schema)
					}
				}
			}
			var cases []map[string]any
			for _, pe := range paramExamples {
				cases = append(cases, merge(params, pe))
			}
			if slices.Contains(tl.Args, "json") || slices.Contains(tl.Args, "form") {
				for _, body := range bodyExamples(op.RequestBody.Value, slices.Contains(tl.Args, "json")) {
					cases = append(cases, merge(params, body))
				}
			}
			for _, args := range cases {
				n++
				if vs := sch.Validate(args); len(vs) > 0 {
					b, _ := json.Marshal(args)
					t.Errorf("%s: the document's example %s is refused: %+v", tl.Name, b, vs)
				}
			}
		}
	}
	return n
}

func merge(a, b map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}

// paramExampleValues are a parameter's examples: its own example and
// examples, or its schema's.
func paramExampleValues(p *openapi3.Parameter) []any {
	var out []any
	if p.Example != nil {
		out = append(out, p.Example)
	}
	for _, k := range sortedKeys(p.Examples) {
		if e := p.Examples[k]; e != nil && e.Value != nil && e.Value.Value != nil {
			out = append(out, e.Value.Value)
		}
	}
	if len(out) == 0 && p.Schema != nil && p.Schema.Value != nil {
		if p.Schema.Value.Example != nil {
			out = append(out, p.Schema.Value.Example)
		}
		out = append(out, p.Schema.Value.Examples...)
	}
	return out
}

// bodyExamples are the request body's examples for the media type the
// tool reads: the media type's example and examples, and the object
// Swagger UI builds from the schema's property examples.
func bodyExamples(rb *openapi3.RequestBody, json bool) []map[string]any {
	var out []map[string]any
	for mt, m := range rb.Content {
		if json != isJSON(mt) || (!json && mediaBase(mt) != "application/x-www-form-urlencoded") {
			continue
		}
		add := func(v any) {
			if o, ok := v.(map[string]any); ok {
				out = append(out, o)
			}
		}
		add(m.Example)
		for _, k := range sortedKeys(m.Examples) {
			if e := m.Examples[k]; e != nil && e.Value != nil {
				add(e.Value.Value)
			}
		}
		if m.Schema != nil {
			if v, ok := fromSchema(m.Schema, 0).(map[string]any); ok && len(v) > 0 {
				out = append(out, v)
			}
		}
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// fromSchema builds a value from a schema's examples as Swagger UI does:
// the schema's example, else an object of its properties' examples
// (readOnly ones left out, as a request has them), else an array of one
// item's; nil when the schema gives none.
func fromSchema(sr *openapi3.SchemaRef, depth int) any {
	if sr == nil || sr.Value == nil || depth > 8 {
		return nil
	}
	s := sr.Value
	if s.Example != nil {
		return s.Example
	}
	if len(s.Examples) > 0 {
		return s.Examples[0]
	}
	switch {
	case len(s.Properties) > 0:
		o := map[string]any{}
		for name, p := range s.Properties {
			if p.Value != nil && p.Value.ReadOnly {
				continue
			}
			if v := fromSchema(p, depth+1); v != nil {
				o[name] = v
			} else if slices.Contains(s.Required, name) {
				o[name] = sample(p)
			}
		}
		if len(o) == 0 {
			return nil
		}
		return o
	case s.Items != nil:
		if v := fromSchema(s.Items, depth+1); v != nil {
			return []any{v}
		}
		if s.Type != nil && s.Type.Is("array") {
			return []any{}
		}
	}
	return nil
}

// sample is a value of a schema without an example, for a required name
// the examples leave out.
func sample(sr *openapi3.SchemaRef) any {
	if sr == nil || sr.Value == nil {
		return "x"
	}
	s := sr.Value
	if len(s.Enum) > 0 {
		return s.Enum[0]
	}
	switch {
	case s.Type == nil:
		return "x"
	case s.Type.Is("integer"), s.Type.Is("number"):
		if s.Min != nil {
			return *s.Min + 1
		}
		return 1
	case s.Type.Is("boolean"):
		return true
	case s.Type.Is("array"):
		return []any{}
	case s.Type.Is("object"):
		o := map[string]any{}
		for _, r := range s.Required {
			o[r] = sample(s.Properties[r])
		}
		return o
	}
	switch s.Format {
	case "date-time":
		return "2026-12-01T00:00:00Z"
	case "date":
		return "2026-12-01"
	case "email":
		return "a@example.org"
	case "uuid":
		return "123e4567-e89b-12d3-a456-426614174000"
	}
	return "x"
}
