package openapiimport

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/toolgate/toolgate/policies"
)

// FuzzImport feeds the importer outside documents: the pinned ones and
// shapes30 as seeds. It must never panic (a recovered panic is an
// errPanic error, which fails here), and it either returns an error or
// tools whose schemas toolgate compiles and which render.
func FuzzImport(f *testing.F) {
	files, _ := filepath.Glob("testdata/*.yaml")
	files = append(files, "../../../../examples/openapi/petstore.yaml")
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, "")
	}
	f.Add([]byte(shapes30), "")
	f.Add([]byte(shapes30), "http://127.0.0.1:1/x")
	f.Add([]byte(`{"openapi":"3.1.0","info":{"title":"t","version":"1"},"servers":[{"url":"https://a.example"}],"paths":{"/a/{b}":{"post":{"parameters":[{"name":"b","in":"path","required":true,"schema":{"type":"string"}}],"requestBody":{"content":{"application/json":{"schema":{"$ref":"#/components/schemas/N"}}}},"responses":{"200":{"description":"ok"}}}}},"components":{"schemas":{"N":{"type":"object","properties":{"n":{"$ref":"#/components/schemas/N"}}}}}}`), "")
	f.Fuzz(func(t *testing.T, doc []byte, server string) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		res, err := Import(ctx, doc, Options{Server: server})
		if err != nil {
			if errors.Is(err, errPanic) {
				t.Fatalf("panic: %v", err)
			}
			if res != nil {
				t.Fatal("a result with an error")
			}
			return
		}
		if res == nil {
			t.Fatal("no result and no error")
		}
		for _, tl := range res.Tools {
			if !toolNameRE.MatchString(tl.Name) {
				t.Fatalf("tool name %q", tl.Name)
			}
			js, err := json.Marshal(tl.Schema)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := policies.CompileSchema(js, policies.SchemaOptions{Tool: tl.Name, Strict: true, Limits: policies.FileSchemaLimits}); err != nil {
				t.Fatalf("tool %s: a schema toolgate does not compile: %v", tl.Name, err)
			}
		}
		if _, err := Render(res, "fuzz"); err != nil {
			t.Fatal(err)
		}
	})
}
