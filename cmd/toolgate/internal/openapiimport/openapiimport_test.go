package openapiimport

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/policies"
)

// shapes30 is an OpenAPI 3.0 document written to hold each translation
// the importer makes.
const shapes30 = `
openapi: 3.0.3
info: {title: shapes, version: "1"}
servers:
  - url: https://api.example.org/v2
paths:
  /items/{item-id}:
    parameters:
      - {name: item-id, in: path, required: true, schema: {type: integer, format: int32}}
    put:
      operationId: updateHTTPItem
      parameters:
        - {name: X-Trace, in: header, schema: {type: string}}
        - {name: dryRun, in: query, schema: {type: boolean}}
      requestBody:
        required: true
        content:
          application/json:
            schema: {$ref: '#/components/schemas/Item'}
  /shapes:
    post:
      operationId: addShape
      requestBody:
        required: true
        content:
          application/json:
            schema:
              oneOf:
                - $ref: '#/components/schemas/Circle'
                - $ref: '#/components/schemas/Square'
              discriminator:
                propertyName: kind
                mapping:
                  round: '#/components/schemas/Circle'
  /trees:
    post:
      operationId: plantTree
      requestBody:
        content:
          application/json:
            schema: {$ref: '#/components/schemas/Node'}
  /upload:
    post:
      operationId: upload
      requestBody:
        content:
          multipart/form-data:
            schema: {type: object, properties: {file: {type: string, format: binary}}}
  /search:
    get:
      parameters:
        - {name: ids, in: query, style: form, explode: false, schema: {type: array, items: {type: string}}}
components:
  schemas:
    Item:
      type: object
      additionalProperties: false
      required: [id, name]
      properties:
        id: {type: integer, readOnly: true}
        name: {type: string, nullable: true, maxLength: 10}
        price: {type: number, minimum: 0, exclusiveMinimum: true}
        code: {type: string, format: byte}
        color: {type: string, enum: [red, blue], nullable: true}
        owner:
          nullable: true
          allOf: [{$ref: '#/components/schemas/Circle'}]
    Circle:
      type: object
      required: [kind, radius]
      properties:
        kind: {type: string}
        radius: {type: number}
    Square:
      type: object
      required: [kind, side]
      properties:
        kind: {type: string}
        side: {type: number}
    Node:
      type: object
      properties:
        name: {type: string}
        children: {type: array, items: {$ref: '#/components/schemas/Node'}}
`

// TestTranslations imports shapes30 and checks what each tool accepts and
// refuses, with the schema compiled as the sidecar compiles it.
func TestTranslations(t *testing.T) {
	res, err := Import(context.Background(), []byte(shapes30), Options{})
	if err != nil {
		t.Fatal(err)
	}
	tools := map[string]Tool{}
	for _, tl := range res.Tools {
		tools[tl.Name] = tl
	}
	refused := map[string]string{}
	for _, r := range res.Refused {
		refused[r.Operation] = r.Reason
	}
	if !strings.Contains(refused["POST /upload"], "multipart/form-data only") {
		t.Errorf("multipart upload: refused as %q", refused["POST /upload"])
	}
	if !strings.Contains(refused["GET /search"], "explode false") {
		t.Errorf("comma-separated array: refused as %q", refused["GET /search"])
	}
	up, ok := tools["update_http_item"]
	if !ok {
		t.Fatalf("no tool update_http_item; tools %v, refused %v", keys(tools), refused)
	}
	if up.Host != "api.example.org" || up.Method != "PUT" || up.Path != "/v2/items/{item_id}" {
		t.Errorf("match = %s %s %s", up.Host, up.Method, up.Path)
	}
	if strings.Join(up.Args, ",") != "path,query,json" {
		t.Errorf("args = %v", up.Args)
	}
	if len(up.Notes) == 0 || !strings.Contains(up.Notes[0], `header parameter "X-Trace"`) {
		t.Errorf("notes = %q, want the header parameter named", up.Notes)
	}
	cases := []struct {
		tool string
		args string
		ok   bool
	}{
		{"update_http_item", `{"item_id": 7, "name": "a"}`, true},
		{"update_http_item", `{"item_id": 7, "name": null}`, true},                   // nullable
		{"update_http_item", `{"item_id": 7, "name": "a", "color": null}`, true},     // nullable enum
		{"update_http_item", `{"item_id": 7, "name": "a", "color": "green"}`, false}, // enum
		{"update_http_item", `{"item_id": 7, "name": "a", "owner": null}`, true},     // nullable allOf
		{"update_http_item", `{"item_id": 7, "name": "a", "owner": {"kind": "c", "radius": 1}}`, true},
		{"update_http_item", `{"item_id": 7, "name": "a", "owner": {"kind": "c", "raduis": 1}}`, false},
		{"update_http_item", `{"item_id": 7, "name": "a", "id": 3}`, false},     // readOnly: not in requests
		{"update_http_item", `{"item_id": 7, "name": "a", "nmae": "b"}`, false}, // additionalProperties: false kept
		{"update_http_item", `{"item_id": 7, "name": "a", "price": 0}`, false},  // exclusiveMinimum: true
		{"update_http_item", `{"item_id": 7, "name": "a", "price": 0.5}`, true},
		{"update_http_item", `{"item_id": 7, "name": "a", "code": "aGk="}`, true}, // format byte
		{"update_http_item", `{"item_id": 7, "name": "a", "code": "not base64!"}`, false},
		{"update_http_item", `{"item_id": 2147483648, "name": "a"}`, false}, // int32
		{"update_http_item", `{"item_id": 7, "name": "a", "dryRun": true}`, true},
		{"update_http_item", `{"name": "a"}`, false}, // path variable required
		{"add_shape", `{"kind": "round", "radius": 1}`, true},
		{"add_shape", `{"kind": "Square", "side": 1}`, true},
		{"add_shape", `{"kind": "Square", "radius": 1}`, false}, // discriminator picks Square
		{"add_shape", `{"kind": "Circle", "radius": 1}`, false}, // mapped to "round" only
		{"add_shape", `{"kind": "round", "radius": 1, "sied": 2}`, false},
		{"plant_tree", `{"name": "a", "children": [{"name": "b", "children": [{"name": "c"}]}]}`, true},
		{"plant_tree", `{"name": "a", "children": [{"name": "b", "children": [{"nmae": "c"}]}]}`, false}, // strict, recursive
		{"plant_tree", `{}`, true}, // optional body
	}
	for _, c := range cases {
		tl, ok := tools[c.tool]
		if !ok {
			t.Errorf("no tool %s; refused %v", c.tool, refused)
			continue
		}
		sch := compileTool(t, tl)
		var args map[string]any
		d := json.NewDecoder(strings.NewReader(c.args))
		d.UseNumber()
		if err := d.Decode(&args); err != nil {
			t.Fatal(err)
		}
		vs := sch.Validate(args)
		if (len(vs) == 0) != c.ok {
			t.Errorf("%s %s: violations %+v, want ok=%v", c.tool, c.args, vs, c.ok)
		}
	}
}

func compileTool(t *testing.T, tl Tool) *policies.Schema {
	t.Helper()
	js, _ := json.Marshal(tl.Schema)
	sch, err := policies.CompileSchema(js, policies.SchemaOptions{Tool: tl.Name, Strict: tl.Strict == nil || *tl.Strict, Limits: policies.FileSchemaLimits})
	if err != nil {
		t.Fatalf("%s: %v\n%s", tl.Name, err, js)
	}
	return sch
}

func keys[V any](m map[string]V) []string { return sortedKeys(m) }

func TestToolName(t *testing.T) {
	for in, want := range map[string]string{
		"getPetById":             "get_pet_by_id",
		"updateHTTPItem":         "update_http_item",
		"list-users.v2":          "list-users.v2",
		"Get Pets (all)":         "get_pets_all",
		"__x":                    "x",
		"日本":                     "",
		strings.Repeat("a", 200): strings.Repeat("a", 128),
	} {
		if got := ToolName(in); got != want {
			t.Errorf("ToolName(%q) = %q, want %q", in, got, want)
		}
	}
	used := map[string]bool{}
	a := uniqueName("", "getPet", "GET", "/a", used)
	b := uniqueName("", "get_pet", "GET", "/b", used)
	c := uniqueName("", "", "GET", "/pets/{id}", used)
	if a != "get_pet" || b != "get_pet_2" || c != "get_pets_id" {
		t.Errorf("names %q %q %q", a, b, c)
	}
}

// TestServers: a document with several servers needs --server; a relative
// one needs an absolute URL; a URL given replaces the document's.
func TestServers(t *testing.T) {
	doc := func(servers string) []byte {
		return []byte("openapi: 3.0.0\ninfo: {title: s, version: '1'}\nservers:\n" + servers + "\npaths:\n  /a:\n    get:\n      responses: {'200': {description: ok}}\n")
	}
	two := doc("  - url: https://one.example.org/v1\n  - url: 'https://{region}.example.org/v1'\n    variables: {region: {default: eu}}")
	if _, err := Import(context.Background(), two, Options{}); !errors.Is(err, ErrServer) || !strings.Contains(err.Error(), "1: https://{region}") {
		t.Errorf("two servers: %v", err)
	}
	res, err := Import(context.Background(), two, Options{Server: "1"})
	if err != nil || res.Tools[0].Host != "eu.example.org" || res.Tools[0].Path != "/v1/a" {
		t.Errorf("--server 1: %v %+v", err, res)
	}
	res, err = Import(context.Background(), two, Options{Server: "http://127.0.0.1:9/base/"})
	if err != nil || res.Tools[0].Host != "127.0.0.1:9" || res.Tools[0].Path != "/base/a" {
		t.Errorf("--server URL: %v %+v", err, res)
	}
	if _, err := Import(context.Background(), doc("  - url: /api"), Options{}); !errors.Is(err, ErrServer) || !strings.Contains(err.Error(), "names no host") {
		t.Errorf("relative server: %v", err)
	}
}

// TestDocumentRefused: what is not an OpenAPI document, or refers outside
// itself, is refused as a whole with ErrDocument, and no file is read.
func TestDocumentRefused(t *testing.T) {
	secret := filepath.Join(t.TempDir(), "secret.yaml")
	if err := os.WriteFile(secret, []byte("type: object\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, doc := range map[string]string{
		"not yaml":     "{{{",
		"no version":   "info: {title: x}\n",
		"swagger 1.2":  "swagger: '1.2'\n",
		"openapi 4":    "openapi: 4.0.0\n",
		"external ref": "openapi: 3.0.0\ninfo: {title: s, version: '1'}\nservers: [{url: 'https://a.example'}]\npaths:\n  /a:\n    post:\n      requestBody: {content: {application/json: {schema: {$ref: '" + secret + "'}}}}\n      responses: {'200': {description: ok}}\n",
		"http ref":     "openapi: 3.0.0\ninfo: {title: s, version: '1'}\nservers: [{url: 'https://a.example'}]\npaths:\n  /a:\n    post:\n      requestBody: {content: {application/json: {schema: {$ref: 'http://169.254.169.254/x.yaml'}}}}\n      responses: {'200': {description: ok}}\n",
	} {
		if _, err := Import(context.Background(), []byte(doc), Options{}); !errors.Is(err, ErrDocument) {
			t.Errorf("%s: err = %v, want ErrDocument", name, err)
		}
	}
}

// TestReimportDiff writes the petstore's tools, then re-imports a changed
// copy of the document: the changes are printed per tool before the file
// is replaced, and --dry-run prints them and writes nothing.
func TestReimportDiff(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "tools.yaml")
	orig, err := os.ReadFile("../../../../examples/openapi/petstore.yaml")
	if err != nil {
		t.Fatal(err)
	}
	src := filepath.Join(dir, "petstore.yaml")
	if err := os.WriteFile(src, orig, 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if err := Run(context.Background(), RunOptions{Source: src, Output: out}, &stdout, &stderr); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stdout.String(), "new file, 16 tools") {
		t.Errorf("first import:\n%s", stdout.String())
	}
	// The inventory operation is renamed (one tool removed, one added) and
	// a pet's status gains a value (the two tools taking a Pet change).
	changed := strings.Replace(string(orig), "operationId: getInventory", "operationId: getStock", 1)
	changed = strings.Replace(changed, "            - available\n            - pending\n            - sold\n", "            - available\n            - pending\n            - sold\n            - lost\n", 1)
	if changed == string(orig) {
		t.Fatal("the edits did not apply")
	}
	if err := os.WriteFile(src, []byte(changed), 0o644); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(out)
	stdout.Reset()
	if err := Run(context.Background(), RunOptions{Source: src, Output: out, DryRun: true}, &stdout, &stderr); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"+ get_stock (added)",
		"- get_inventory (removed)",
		"~ update_pet (changed)",
		"~ add_pet (changed)",
		"    schema/properties/status/enum changed",
		"dry run: " + out + " not written",
	} {
		if !strings.Contains(stdout.String(), want+"\n") {
			t.Errorf("dry run output lacks %q:\n%s", want, stdout.String())
		}
	}
	if after, _ := os.ReadFile(out); !bytes.Equal(after, before) {
		t.Error("--dry-run changed the file")
	}
	stdout.Reset()
	if err := Run(context.Background(), RunOptions{Source: src, Output: out}, &stdout, &stderr); err != nil {
		t.Fatal(err)
	}
	if after, _ := os.ReadFile(out); bytes.Equal(after, before) || !bytes.Contains(after, []byte("name: get_stock")) {
		t.Errorf("the file was not replaced:\n%s", stdout.String())
	}
	stdout.Reset()
	if err := Run(context.Background(), RunOptions{Source: src, Output: out}, &stdout, &stderr); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stdout.String(), "no change to its 16 tools") {
		t.Errorf("re-import of the same document:\n%s", stdout.String())
	}
}

// TestToolsTheLoaderRefuses: a tool toolgate's configuration check would
// refuse (a path literal not in canonical form, two tools matching the
// same calls) is a refused operation, and the rest still load.
func TestToolsTheLoaderRefuses(t *testing.T) {
	doc := `
openapi: 3.0.0
info: {title: t, version: "1"}
servers: [{url: "https://api.example.org"}]
paths:
  /a/{x}:
    get: {operationId: byX, parameters: [{name: x, in: path, required: true, schema: {type: string}}], responses: {"200": {description: ok}}}
  /a/{y}:
    get: {operationId: byY, parameters: [{name: y, in: path, required: true, schema: {type: string}}], responses: {"200": {description: ok}}}
  /b/%62:
    get: {operationId: escaped, responses: {"200": {description: ok}}}
  /c:
    get: {operationId: fine, responses: {"200": {description: ok}}}
  /d:
    get: {operationId: ghost, parameters: [{name: id, in: path, required: true, schema: {type: string}}], responses: {"200": {description: ok}}}
`
	res, err := Import(context.Background(), []byte(doc), Options{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range res.Tools {
		names = append(names, tl.Name)
	}
	if strings.Join(names, ",") != "by_x,fine" {
		t.Errorf("tools %v, want by_x and fine", names)
	}
	reasons := map[string]string{}
	for _, r := range res.Refused {
		reasons[r.Operation] = r.Reason
	}
	if !strings.Contains(reasons["GET /a/{y}"], "toolgate does not load its tool") || !strings.Contains(reasons["GET /b/%62"], "toolgate does not load its tool") {
		t.Errorf("refused %q", reasons)
	}
	if !strings.Contains(reasons["GET /d"], `path parameter "id" is not in the path /d`) {
		t.Errorf("a path parameter the path lacks: refused as %q", reasons["GET /d"])
	}
}

// TestImportFromURL fetches the document over HTTP; a failing URL is an
// error naming its status.
func TestImportFromURL(t *testing.T) {
	doc, err := os.ReadFile("testdata/petstore-expanded.yaml")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/openapi.yaml" {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write(doc)
	}))
	defer srv.Close()
	var stdout, stderr bytes.Buffer
	if err := Run(context.Background(), RunOptions{Source: srv.URL + "/openapi.yaml"}, &stdout, &stderr); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stdout.String(), "name: find_pets") || !strings.Contains(stderr.String(), "4 operations imported") {
		t.Errorf("stdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
	}
	if err := Run(context.Background(), RunOptions{Source: srv.URL + "/missing.yaml"}, &stdout, &stderr); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("a missing document: %v", err)
	}
}
