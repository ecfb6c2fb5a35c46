package policies

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/testutil"
)

var fuzzFixtures = []string{"pubmed_search", "docs_edit", "drug_targets", "legacy_draft07"}

// FuzzValidate feeds arbitrary JSON arguments to the fixtures: Coerce and
// Validate never panic, no violation or Detail repeats a string value
// (longer than 8 bytes) taken from the arguments, and ValidateInRange
// gives what Validate gives for arguments whose numbers are all within
// NumberInRange (the extract step's decoder vouches for those).
func FuzzValidate(f *testing.F) {
	seeds := []string{
		`{"term": "brca1", "retmax": 5, "pmid": ["123"]}`,
		`{"term": "x", "edit_requests": [], "retmax": "500"}`,
		`{"documentId": "d1", "requests": [{"insert": {"txt": "secret-value-1", "index": "1"}}, {"delete": 3}]}`,
		`{"documentId": "d1", "requests": [{"inser": {"text": "hi", "index": 1}}, {"insert": {}, "delete": {}}]}`,
		`{"query": "egfr", "organism": "long-secret-organism", "filters": {"targetClass": "not-a-class-at-all", "window": {"from": "not-a-date-value"}}}`,
		`{"id": "a", "fields": [{"nme": "confidential-name"}], "depth": 1e9}`,
		`{"notes": "secret-secret-secret", "limit": [1, 2], "filters": null}`,
	}
	for i, s := range seeds {
		f.Add(uint8(i), []byte(s))
	}
	schemas := make([]*Schema, len(fuzzFixtures))
	for i, name := range fuzzFixtures {
		schemas[i] = fixture(f, name, true)
	}
	f.Fuzz(func(t *testing.T, which uint8, data []byte) {
		s := schemas[int(which)%len(schemas)]
		args, ok := testutil.DecodeArgs(data)
		if !ok {
			return
		}
		vs := s.Validate(args)
		text := violationText(s, vs)
		if !HasHugeNumber(args) {
			if got := violationText(s, s.ValidateInRange(args)); got != text {
				t.Fatalf("ValidateInRange:\n%s\nValidate:\n%s", got, text)
			}
		}
		for _, v := range stringValues(args, nil) {
			if len(v) <= 8 || !strings.Contains(text, v) {
				continue
			}
			// The string may also come from the schema, a key or a
			// template. Replace the value and see whether it goes away.
			again, _ := testutil.DecodeArgs(data)
			replaceString(again, v, strings.Repeat("\x7f", len(v)))
			if !strings.Contains(violationText(s, s.Validate(again)), v) {
				t.Fatalf("violations repeat the argument value %q:\n%s", v, text)
			}
		}
		coerced, _ := testutil.DecodeArgs(data)
		s.Validate(s.Coerce(coerced))
	})
}

func violationText(s *Schema, vs []Violation) string {
	b, _ := json.Marshal(vs)
	return string(b) + "\n" + Detail(s.Tool(), vs)
}

// stringValues lists the string values (not keys) in v.
func stringValues(v any, out []string) []string {
	switch x := v.(type) {
	case string:
		out = append(out, x)
	case map[string]any:
		for _, e := range x {
			out = stringValues(e, out)
		}
	case []any:
		for _, e := range x {
			out = stringValues(e, out)
		}
	}
	return out
}

// replaceString replaces every string value equal to old.
func replaceString(v any, old, repl string) {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if e == old {
				x[k] = repl
			} else {
				replaceString(e, old, repl)
			}
		}
	case []any:
		for i, e := range x {
			if e == old {
				x[i] = repl
			} else {
				replaceString(e, old, repl)
			}
		}
	}
}

// FuzzCompileSchema feeds arbitrary bytes to CompileSchema, strict and not:
// it never panics (nor hides a panic as an internal error), and a schema
// that compiles can validate and coerce.
func FuzzCompileSchema(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "schemas", "*.json"))
	for _, p := range files {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	for _, s := range []string{allOfSchema, allOfDraft07, openSchema, anyOfSchema, patternSchema, unevaluatedSchema, leakSchema,
		`{"$ref": "#"}`, `true`, `false`, `{"properties": {"a": {"$ref": "#/properties/a"}}}`,
		`{"$schema": "http://json-schema.org/draft-04/schema#", "properties": {"a": {"items": [{"type": "object", "properties": {"b": {}}}]}}}`,
		`{"$defs": {"n": {"$id": "n.json", "properties": {"x": {"$ref": "#/$defs/m"}}, "$defs": {"m": {"type": "integer"}}}}, "$ref": "#/$defs/n"}`,
		`{"type": "object", "dependentSchemas": {"a": {"properties": {"b": {}}}}, "if": {"properties": {"c": {"const": 1}}}, "then": {"properties": {"d": {}}}}`,
		composeBaseExtension, composeOneOfItems, composeSharedRef, composeDynamicTree,
		`{"$schema": "http://json-schema.org/draft-07/schema#", "items": [{"type": "object", "properties": {"a": {}}}, {"$ref": "#/items/0"}], "additionalItems": false,
			"definitions": {"x": {"$id": "#x", "properties": {"b": {}}}}, "properties": {"c": {"$ref": "#x", "type": "string"}}, "dependencies": {"a": ["c"], "c": {"properties": {"d": {}}}}}`,
		`{"$schema": "http://json-schema.org/draft-04/schema#", "properties": {"n": {"type": "number", "maximum": 5, "exclusiveMaximum": true}}}`,
		`{"properties": {"s": {"$ref": "https://json-schema.org/draft/2020-12/meta/applicator"}}}`,
		`{"properties": {"f": {"format": "idn-email"}}}`,
		`{"properties": {"p": {"pattern": "a{1000}b{999}(c|d){500}"}}, "patternProperties": {"^x{1000}$": {}}}`,
		`{"items": {"items": {"items": {"anyOf": [{"enum": [1, 2, [3, [4]]]}, {"$ref": "#/items"}]}}}}`,
	} {
		f.Add([]byte(s))
	}
	argSets := []map[string]any{
		{},
		{"a": "1", "b": []any{"x"}, "c": map[string]any{"d": "true"}, "term": "t"},
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		var compiled [2]*Schema // non-strict, strict
		for i, strict := range []bool{false, true} {
			s, err := CompileSchema(doc, SchemaOptions{Tool: "fuzz", Strict: strict, UnknownKeywords: KeywordsIgnore})
			if err != nil {
				var se *SchemaError
				if !errors.As(err, &se) || strings.HasPrefix(se.Msg, "internal error") {
					t.Fatalf("CompileSchema(%q): %v", doc, err)
				}
				// Strict closing never makes a schema fail to compile
				// (bar its own bound on the locations it explores).
				if strict && compiled[0] != nil && !strings.Contains(se.Msg, "too complex") {
					t.Fatalf("CompileSchema(%q) compiles, but not under strict: %v", doc, err)
				}
				continue
			}
			compiled[i] = s
		}
		for _, a := range argSets {
			b, _ := json.Marshal(a)
			args, _ := testutil.DecodeArgs(b)
			var refused [2]bool
			for i, s := range compiled {
				if s != nil {
					refused[i] = s.Validate(s.Coerce(args)) != nil
				}
			}
			// Strict only adds refusals.
			if compiled[0] != nil && compiled[1] != nil && refused[0] && !refused[1] {
				t.Fatalf("schema %q: strict accepts %s, which non-strict refuses", doc, b)
			}
		}
	})
}
