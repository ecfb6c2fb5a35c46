package rego

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/topdown"

	"github.com/toolgate/toolgate/bucketing"
	"github.com/toolgate/toolgate/policies"
)

// TestPoliciesCannotReachOutside checks, on each in-process engine, that a
// schema a policy gets from its input cannot make json.match_schema or
// json.verify_schema fetch a URL (a real loopback server counts the
// fetches: none) or read a file (the file's content appears nowhere in
// the decision), and that the call is refused as policy_error.
func TestPoliciesCannotReachOutside(t *testing.T) {
	var fetches atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fetches.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"type": "string"}`))
	}))
	defer srv.Close()
	dir := t.TempDir()
	const secret = "SECRET-7f3a-CONTENT"
	secretFile := filepath.Join(dir, "secret.json")
	if err := os.WriteFile(secretFile, []byte(`{"`+secret+`": 1`), 0o600); err != nil {
		t.Fatal(err)
	}
	schemas := map[string]any{
		"remote $ref":                map[string]any{"$ref": srv.URL + "/s.json"},
		"remote $ref in a property":  map[string]any{"type": "object", "properties": map[string]any{"a": map[string]any{"$ref": srv.URL + "/a.json#/x"}}},
		"remote $ref as JSON text":   `{"$ref": "` + srv.URL + `/t.json"}`,
		"file $ref":                  map[string]any{"$ref": "file://" + secretFile},
		"file $ref by $id":           map[string]any{"$id": "file://" + dir + "/", "$ref": "secret.json"},
		"file $ref by id (draft 4)":  map[string]any{"id": "file://" + dir + "/", "$ref": "secret.json"},
		"relative $ref":              map[string]any{"$ref": "secret.json"},
		"file $ref, upper-case FILE": map[string]any{"$ref": "FILE://" + secretFile},
		// $refs that lead back where they started: OPA's validator
		// recursed until the stack overflowed, ending the process.
		"$ref to the root":        map[string]any{"$ref": "#"},
		"$ref cycle a, b":         map[string]any{"$ref": "#/definitions/a", "definitions": map[string]any{"a": map[string]any{"$ref": "#/definitions/b"}, "b": map[string]any{"allOf": []any{map[string]any{"$ref": "#/definitions/a"}}}}},
		"$ref to a missing part":  map[string]any{"$ref": "#/definitions/none"},
		"$ref not a JSON pointer": map[string]any{"$ref": "#\xb1\xb1"},
	}
	srcs := map[string]string{
		"json.match_schema": `package s
deny contains "does not match" if {
	[ok, _] := json.match_schema(input.arguments.doc, input.arguments.schema)
	not ok
}`,
		"json.verify_schema": `package s
deny contains "bad schema" if {
	[ok, _] := json.verify_schema(input.arguments.schema)
	not ok
}`,
	}
	ctx := context.Background()
	for builtin, src := range srcs {
		interp, err := Compile("s", map[string][]byte{"s.rego": []byte(src)})
		if err != nil {
			t.Fatal(err)
		}
		compiled, err := interp.Compiled(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range []*Policy{compiled, interp} {
			set := policies.NewSet("t", []policies.Bound{{Policy: p, Mode: policies.ModeEnforce}}, time.Minute, false)
			for name, schema := range schemas {
				d := set.Check(ctx, &policies.Input{Tool: "t", Arguments: map[string]any{"doc": "x", "schema": schema}})
				if d.Allow || d.Reason != bucketing.ReasonPolicyError {
					t.Errorf("%s/%s/%s: %+v, want a refusal as policy_error", builtin, p.Engine(), name, d)
				}
				if strings.Contains(d.Detail, "SECRET") || strings.Contains(d.Detail, "7f3a") {
					t.Errorf("%s/%s/%s: the detail leaks the file: %s", builtin, p.Engine(), name, d.Detail)
				}
			}
			// A recursive schema that descends into the document still
			// works, as does a local reference.
			tree := map[string]any{"type": "object", "properties": map[string]any{"a": map[string]any{"$ref": "#"}}}
			if d := set.Check(ctx, &policies.Input{Tool: "t", Arguments: map[string]any{"doc": map[string]any{"a": map[string]any{"a": map[string]any{}}}, "schema": tree}}); !d.Allow {
				t.Errorf("%s/%s: a recursive schema: %+v, want allowed", builtin, p.Engine(), d)
			}
			local := map[string]any{"$ref": "#/definitions/s", "definitions": map[string]any{"s": map[string]any{"type": "object"}}}
			if d := set.Check(ctx, &policies.Input{Tool: "t", Arguments: map[string]any{"doc": map[string]any{"a": json.Number("1")}, "schema": local}}); !d.Allow {
				t.Errorf("%s/%s: a local $ref: %+v, want allowed", builtin, p.Engine(), d)
			}
		}
	}
	if n := fetches.Load(); n != 0 {
		t.Fatalf("policies fetched %d URLs from the loopback server, want none", n)
	}
}

// TestNetworkBuiltinsRefused checks that a policy naming http.send,
// net.lookup_ip_addr or opa.runtime is refused when compiled, that its
// unit tests cannot reach the network either, and that the builtins
// themselves refuse in this process whoever calls them.
func TestNetworkBuiltinsRefused(t *testing.T) {
	var fetches atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fetches.Add(1) }))
	defer srv.Close()
	for _, call := range []string{
		`http.send({"method": "GET", "url": "` + srv.URL + `"})`,
		`net.lookup_ip_addr("localhost")`,
		`opa.runtime()`,
	} {
		src := "package n\ndeny contains \"x\" if " + call + "\n"
		if _, err := Compile("n", map[string][]byte{"n.rego": []byte(src)}); err == nil {
			t.Errorf("a policy calling %s compiled", call)
		}
	}
	for _, name := range []string{"http.send", "net.lookup_ip_addr", "opa.runtime"} {
		req := ast.ObjectTerm(ast.Item(ast.StringTerm("method"), ast.StringTerm("GET")), ast.Item(ast.StringTerm("url"), ast.StringTerm(srv.URL)))
		ops := map[string][]*ast.Term{"http.send": {req}, "net.lookup_ip_addr": {ast.StringTerm("localhost")}, "opa.runtime": nil}[name]
		err := topdown.GetBuiltin(name)(topdown.BuiltinContext{Context: context.Background()}, ops, func(*ast.Term) error { return nil })
		if err == nil || !strings.Contains(err.Error(), "may not reach") {
			t.Errorf("%s in this process: %v, want a refusal", name, err)
		}
	}
	// A policy's unit tests (run at load by OPA's tester) get the same
	// capabilities: a remote $ref is not fetched.
	p, err := Compile("r", map[string][]byte{
		"r.rego":      []byte("package r\nallow := true\n"),
		"r_test.rego": []byte("package r_test\ntest_fetch if {\n\t[ok, _] := json.match_schema(\"x\", {\"$ref\": \"" + srv.URL + "/s.json\"})\n\tok\n}\n"),
	})
	if err != nil {
		t.Fatal(err)
	}
	res, err := p.RunTests(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 1 || res[0].Pass {
		t.Errorf("a test fetching a schema: %+v, want it to fail", res)
	}
	if n := fetches.Load(); n != 0 {
		t.Fatalf("%d fetches from the loopback server, want none", n)
	}
}

// FuzzSchemaFence feeds json.match_schema and json.verify_schema schema
// texts, as a policy would hand them over from its input (SRV stands for
// a loopback server's URL, DIR for a folder holding a canary file), and
// asserts that nothing is fetched from the server and that no result or
// error holds the canary's content.
func FuzzSchemaFence(f *testing.F) {
	var fetches atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fetches.Add(1)
		w.Write([]byte(`{"type": "string"}`))
	}))
	defer srv.Close()
	dir := f.TempDir()
	const canary = "CANARY-e41b"
	if err := os.WriteFile(filepath.Join(dir, "c.json"), []byte(`{"type": "object", "required": ["`+canary+`"]}`), 0o600); err != nil {
		f.Fatal(err)
	}
	for _, seed := range []string{
		`{"$ref": "SRV/s.json"}`,
		`{"$ref": "file://DIR/c.json"}`,
		`{"$ref": "FILE://DIR/c.json#/x"}`,
		`{"$id": "file://DIR/", "$ref": "c.json"}`,
		`{"id": "SRV/", "properties": {"a": {"$ref": "c.json"}}}`,
		`{"allOf": [{"$ref": "#/definitions/a"}, {"$ref": "file:DIR/c.json"}], "definitions": {"a": {}}}`,
		`{"$ref": "#/definitions/a", "definitions": {"a": {"type": "string"}}}`,
		`{"items": [{"$ref": "\u0066ile://DIR/c.json"}]}`,
		`{"$schema": "file://DIR/c.json"}`,
		`not json`,
		`{"$ref": "#"}`,
		`{"$ref": "#/definitions/a", "definitions": {"a": {"not": {"$ref": "#/definitions/a"}}}}`,
		`{"type": "object", "properties": {"a": {"$ref": "#"}}}`,
	} {
		f.Add(seed)
	}
	match := topdown.GetBuiltin("json.match_schema")
	verify := topdown.GetBuiltin("json.verify_schema")
	f.Fuzz(func(t *testing.T, schema string) {
		schema = strings.ReplaceAll(strings.ReplaceAll(schema, "SRV", srv.URL), "DIR", dir)
		caps := ast.CapabilitiesForThisVersion()
		caps.AllowNet = []string{}
		bctx := topdown.BuiltinContext{Context: context.Background(), Capabilities: caps}
		var out []string
		collect := func(x *ast.Term) error { out = append(out, x.String()); return nil }
		s := ast.StringTerm(schema)
		if err := match(bctx, []*ast.Term{ast.StringTerm(`{}`), s}, collect); err != nil {
			out = append(out, err.Error())
		}
		if err := verify(bctx, []*ast.Term{s}, collect); err != nil {
			out = append(out, err.Error())
		}
		for _, o := range out {
			if strings.Contains(o, canary) || strings.Contains(o, "e41b") {
				t.Fatalf("schema %q: the canary file leaked: %s", schema, o)
			}
		}
		if n := fetches.Load(); n != 0 {
			t.Fatalf("schema %q: %d fetches", schema, n)
		}
	})
}
