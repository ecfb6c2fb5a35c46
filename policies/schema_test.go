package policies

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/toolgate/toolgate/bucketing"
)

// fixture compiles testdata/schemas/<name>.json.
func fixture(t testing.TB, name string, strict bool) *Schema {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join("testdata", "schemas", name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	s, err := CompileSchema(doc, SchemaOptions{Tool: name, Strict: strict, Dir: filepath.Join("testdata", "schemas")})
	if err != nil {
		t.Fatalf("CompileSchema(%s): %v", name, err)
	}
	return s
}

// inline compiles a schema written in the test.
func inline(t testing.TB, tool, doc string, strict bool) *Schema {
	t.Helper()
	s, err := CompileSchema([]byte(doc), SchemaOptions{Tool: tool, Strict: strict})
	if err != nil {
		t.Fatalf("CompileSchema(%s): %v", tool, err)
	}
	return s
}

// decodeArgs decodes a JSON object the way the proxy does (json.Number) or
// the way plain encoding/json does (float64).
func decodeArgs(t testing.TB, s string, useNumber bool) map[string]any {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(s))
	if useNumber {
		dec.UseNumber()
	}
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		t.Fatalf("decode %s: %v", s, err)
	}
	return m
}

func unknownV(path, allowed string) Violation {
	return Violation{Path: path, Reason: bucketing.ReasonUnknownField, Message: "unknown argument; expected one of: " + allowed, Expected: "absent"}
}

func missingV(path, expected string) Violation {
	return Violation{Path: path, Reason: bucketing.ReasonMissingField, Message: "missing required argument", Expected: expected}
}

func typeV(path, got, expected string) Violation {
	return Violation{Path: path, Reason: bucketing.ReasonWrongType, Message: "wrong type", Expected: expected, Got: got}
}

func schemaV(path, msg, expected, got string) Violation {
	return Violation{Path: path, Reason: bucketing.ReasonSchema, Message: msg, Expected: expected, Got: got}
}

const (
	allOfSchema = `{
		"type": "object",
		"allOf": [
			{"properties": {"a": {"type": "string"}}, "required": ["a"]},
			{"properties": {"b": {"type": "integer"}}}
		]}`
	allOfDraft07 = `{
		"$schema": "http://json-schema.org/draft-07/schema#",
		"definitions": {"named": {"properties": {"name": {"type": "string"}}}},
		"allOf": [
			{"$ref": "#/definitions/named"},
			{"properties": {"size": {"type": "integer"}}}
		]}`
	openSchema = `{
		"type": "object",
		"additionalProperties": true,
		"properties": {
			"q": {"type": "string"},
			"opts": {"type": "object", "properties": {"deep": {"type": "boolean"}}},
			"meta": {"type": "object"}
		}}`
	anyOfSchema = `{
		"type": "object",
		"properties": {
			"ids": {"anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}]},
			"shape": {"anyOf": [
				{"type": "object", "properties": {"kind": {"const": "circle"}, "r": {"type": "number"}}, "required": ["kind", "r"]},
				{"type": "object", "properties": {"kind": {"const": "square"}, "side": {"type": "number"}}, "required": ["kind", "side"]}
			]}
		}}`
	patternSchema = `{
		"type": "object",
		"properties": {"name": {"type": "string"}},
		"patternProperties": {"^x-": {"type": "string"}}
		}`
	unevaluatedSchema = `{
		"type": "object",
		"properties": {"a": {"type": "string"}},
		"allOf": [{"properties": {"b": {"type": "string"}}}],
		"unevaluatedProperties": false
		}`
)

func TestValidate(t *testing.T) {
	tests := []struct {
		name    string
		fixture string // testdata/schemas/<fixture>.json, or
		schema  string // an inline schema (tool "t")
		strict  bool
		args    string
		want    []Violation
		detail  string
	}{
		{
			name: "valid", fixture: "pubmed_search", strict: true,
			args: `{"term": "brca1", "retmax": 5, "pmid": ["123", "456"], "sort": "pub_date"}`,
		},
		{
			name: "unknown top-level argument", fixture: "pubmed_search", strict: true,
			args:   `{"term": "brca1", "edit_requests": []}`,
			want:   []Violation{unknownV("/edit_requests", "include_abstracts, pmid, retmax, sort, term")},
			detail: "Tool 'pubmed_search' got unknown argument 'edit_requests'; expected one of: include_abstracts, pmid, retmax, sort, term",
		},
		{
			name: "missing required", fixture: "pubmed_search", strict: true,
			args:   `{"retmax": 5}`,
			want:   []Violation{missingV("/term", "string")},
			detail: "Tool 'pubmed_search' is missing required argument 'term'",
		},
		{
			name: "wrong type", fixture: "pubmed_search", strict: true,
			args:   `{"term": "brca1", "pmid": "123"}`,
			want:   []Violation{typeV("/pmid", "string", "array of string")},
			detail: "Tool 'pubmed_search' got pmid=string, expected array of string",
		},
		{
			name: "upper bound", fixture: "pubmed_search", strict: true,
			args:   `{"term": "brca1", "retmax": 500}`,
			want:   []Violation{schemaV("/retmax", "too large", "at most 100", "integer")},
			detail: "Tool 'pubmed_search' got retmax=integer, expected at most 100",
		},
		{
			name: "lower bound and min items", fixture: "pubmed_search", strict: true,
			args: `{"term": "", "retmax": 0, "pmid": []}`,
			want: []Violation{
				schemaV("/pmid", "too few items", "at least 1 item", "array"),
				schemaV("/retmax", "too small", "at least 1", "integer"),
				schemaV("/term", "too short", "at least 1 character", "string"),
			},
			detail: "Tool 'pubmed_search' got pmid=array, expected at least 1 item (and 2 more problems)",
		},
		{
			name: "enum", fixture: "drug_targets", strict: true,
			args:   `{"query": "egfr", "organism": "dog"}`,
			want:   []Violation{schemaV("/organism", "not one of the allowed values", "one of: human, mouse, rat", "string")},
			detail: "Tool 'drug_targets' got organism=string, expected one of: human, mouse, rat",
		},
		{
			name: "valid nested", fixture: "docs_edit", strict: true,
			args: `{"documentId": "d1", "requests": [
				{"insert": {"text": "hi", "index": 1}},
				{"delete": {"startIndex": 1, "endIndex": 2}}]}`,
		},
		{
			name: "typo nested in object inside array", fixture: "docs_edit", strict: true,
			args:   `{"documentId": "d1", "requests": [{"insert": {"text": "hi", "index": 1, "txt": "hi"}}]}`,
			want:   []Violation{unknownV("/requests/0/insert/txt", "index, text")},
			detail: "Tool 'docs_edit' got unknown argument 'requests[0].insert.txt'; expected one of: index, text",
		},
		{
			name: "typo inside oneOf branch", fixture: "docs_edit", strict: true,
			args: `{"documentId": "d1", "requests": [{"delete": {"startIndex": 1, "endIndex": 2}}, {"insert": {"text": "hi", "index": 1}, "delet": {}}]}`,
			// Every name a branch at that location declares is listed.
			want:   []Violation{unknownV("/requests/1/delet", "delete, insert")},
			detail: "Tool 'docs_edit' got unknown argument 'requests[1].delet'; expected one of: delete, insert",
		},
		{
			name: "typo in the key that picks the oneOf branch", fixture: "docs_edit", strict: true,
			args: `{"documentId": "d1", "requests": [{"inser": {"text": "hi", "index": 1}}]}`,
			want: []Violation{
				schemaV("/requests/0", "does not match any allowed shape", "one of 2 allowed shapes", "object"),
				unknownV("/requests/0/inser", "delete, insert"),
			},
			detail: "Tool 'docs_edit' got unknown argument 'requests[0].inser'; expected one of: delete, insert (and 1 more problem)",
		},
		{
			name: "fields of two oneOf branches at once", fixture: "docs_edit", strict: true,
			args: `{"documentId": "d1", "requests": [{"insert": {"text": "hi", "index": 1}, "delete": {"startIndex": 1, "endIndex": 2}}]}`,
			// Each branch holds on its own (the closing is at the location,
			// not in the branches), so oneOf refuses the call as written.
			want: []Violation{schemaV("/requests/0", "matches more than one allowed shape", "exactly one of the allowed shapes", "object")},
		},
		{
			name: "wrong type and missing field at depth inside oneOf", fixture: "docs_edit", strict: true,
			args: `{"documentId": "d1", "requests": [{"insert": {"txt": "hi", "index": "1"}}]}`,
			want: []Violation{
				typeV("/requests/0/insert/index", "string", "integer"),
				missingV("/requests/0/insert/text", "string"),
				unknownV("/requests/0/insert/txt", "index, text"),
			},
			// The unknown field leads: the typo also explains the missing text.
			detail: "Tool 'docs_edit' got unknown argument 'requests[0].insert.txt'; expected one of: index, text (and 2 more problems)",
		},
		{
			name: "missing required at depth", fixture: "drug_targets", strict: true,
			args:   `{"query": "egfr", "filters": {"approved": true}}`,
			want:   []Violation{missingV("/filters/phase", "integer")},
			detail: "Tool 'drug_targets' is missing required argument 'filters.phase'",
		},
		{
			name: "every kind of constraint at depth", fixture: "drug_targets", strict: true,
			args: `{"query": "x", "limit": 0, "notes": 5, "filters": {"phase": 9, "approved": "yes", "targetClass": "abc",
				"score": 0, "sources": ["a", "a"], "window": {"from": "not a date", "until": "2024-01-01"}}}`,
			want: []Violation{
				typeV("/filters/approved", "string", "boolean"),
				schemaV("/filters/phase", "too large", "at most 4", "integer"),
				schemaV("/filters/score", "too small", "greater than 0", "integer"),
				schemaV("/filters/sources", "duplicate items", "unique items", "array"),
				schemaV("/filters/targetClass", "does not match the required pattern", "string matching ^[A-Z0-9]+$", "string"),
				schemaV("/filters/window/from", "wrong format", "string in date format", "string"),
				unknownV("/filters/window/until", "from, to"),
				schemaV("/limit", "too small", "at least 1", "integer"),
				typeV("/notes", "integer", "string or null"),
			},
		},
		{
			name: "draft-07 with definitions and $ref: valid", fixture: "legacy_draft07", strict: true,
			args: `{"id": "a", "fields": [{"name": "x", "alias": "y"}], "depth": 1}`,
		},
		{
			name: "draft-07 with definitions and $ref: unknown and typo", fixture: "legacy_draft07", strict: true,
			args: `{"id": "a", "bogus": 1, "fields": [{"nme": "x"}]}`,
			want: []Violation{
				unknownV("/bogus", "depth, fields, id"),
				missingV("/fields/0/name", "string"),
				unknownV("/fields/0/nme", "alias, name"),
			},
			detail: "Tool 'legacy_draft07' got unknown argument 'bogus'; expected one of: depth, fields, id (and 2 more problems)",
		},
		{
			name: "$ref to another file under Dir is closed too", fixture: "with_file_ref", strict: true,
			args: `{"span": {"from": 1, "to": 2, "step": 1}}`,
			want: []Violation{unknownV("/span/step", "from, to")},
		},
		{
			name: "allOf accepts the union of properties", schema: allOfSchema, strict: true,
			args: `{"a": "x", "b": 1}`,
		},
		{
			name: "allOf refuses an extra property", schema: allOfSchema, strict: true,
			args:   `{"a": "x", "b": 1, "c": true}`,
			want:   []Violation{unknownV("/c", "a, b")},
			detail: "Tool 't' got unknown argument 'c'; expected one of: a, b",
		},
		{
			name: "allOf still checks each branch", schema: allOfSchema, strict: true,
			args: `{"b": "1"}`,
			want: []Violation{missingV("/a", "string"), typeV("/b", "string", "integer")},
		},
		{
			name: "draft-07 allOf with $ref accepts the union", schema: allOfDraft07, strict: true,
			args: `{"name": "x", "size": 1}`,
		},
		{
			name: "draft-07 allOf with $ref refuses an extra property", schema: allOfDraft07, strict: true,
			args: `{"name": "x", "size": 1, "color": "red"}`,
			want: []Violation{unknownV("/color", "name, size")},
		},
		{
			name: "additionalProperties true stays open", schema: openSchema, strict: true,
			args: `{"q": "x", "anything": 1, "meta": {"free": "form"}}`,
		},
		{
			name: "objects below an open schema are still closed", schema: openSchema, strict: true,
			args: `{"q": "x", "opts": {"deep": true, "deeep": false}}`,
			want: []Violation{unknownV("/opts/deeep", "deep")},
		},
		{
			name: "strict false leaves objects open", fixture: "docs_edit", strict: false,
			args: `{"documentId": "d1", "extra": 1, "requests": [{"insert": {"text": "hi", "index": 1, "txt": "x"}}]}`,
		},
		{
			name: "strict false still checks types", fixture: "pubmed_search", strict: false,
			args: `{"term": 5}`,
			want: []Violation{typeV("/term", "integer", "string")},
		},
		{
			name: "anyOf by type reports wrong_type with both types", schema: anyOfSchema, strict: true,
			args:   `{"ids": 5}`,
			want:   []Violation{typeV("/ids", "integer", "string or array of string")},
			detail: "Tool 't' got ids=integer, expected string or array of string",
		},
		{
			name: "anyOf branch picked by const discriminator", schema: anyOfSchema, strict: true,
			args: `{"shape": {"kind": "square", "sid": 2}}`,
			// anyOf branches are not narrowed (several may hold at once), so
			// the names of both shapes are allowed.
			want: []Violation{unknownV("/shape/sid", "kind, r, side"), missingV("/shape/side", "number")},
		},
		{
			name: "anyOf item that fits the array branch", schema: anyOfSchema, strict: true,
			args: `{"ids": ["a", 2]}`,
			want: []Violation{typeV("/ids/1", "integer", "string")},
		},
		{
			name: "patternProperties are allowed names", schema: patternSchema, strict: true,
			args: `{"name": "n", "x-trace": "t", "other": 1}`,
			want: []Violation{{Path: "/other", Reason: bucketing.ReasonUnknownField, Message: "unknown argument; expected one of: name, or a name matching ^x-", Expected: "absent"}},
		},
		{
			name: "unevaluatedProperties false written by the author", schema: unevaluatedSchema, strict: true,
			args: `{"a": "x", "b": "y", "c": "z"}`,
			want: []Violation{unknownV("/c", "a, b")},
		},
		{
			name: "recursive schema is closed at every level", schema: `{"type": "object", "properties": {"name": {"type": "string"},
				"children": {"type": "array", "items": {"$ref": "#"}}}}`, strict: true,
			args: `{"name": "a", "children": [{"name": "b", "children": [{"name": "c", "chldren": []}]}]}`,
			want: []Violation{unknownV("/children/0/children/0/chldren", "children, name")},
		},
		{
			name: "additionalProperties schema values are closed", schema: `{"type": "object", "properties": {"byName": {"type": "object",
				"additionalProperties": {"type": "object", "properties": {"id": {"type": "integer"}}}}}}`, strict: true,
			args: `{"byName": {"x": {"id": 1}, "y": {"id": 2, "idd": 3}}}`,
			want: []Violation{unknownV("/byName/y/idd", "id")},
		},
		{
			name: "if/then names are allowed, others are not", schema: `{"type": "object", "properties": {"kind": {"enum": ["a", "b"]}},
				"if": {"properties": {"kind": {"const": "a"}}}, "then": {"properties": {"alpha": {"type": "string"}}, "required": ["alpha"]}}`, strict: true,
			args: `{"kind": "a", "alpha": "x", "beta": 1}`,
			want: []Violation{unknownV("/beta", "alpha, kind")},
		},
		{
			name: "if/then still applies", schema: `{"type": "object", "properties": {"kind": {"enum": ["a", "b"]}},
				"if": {"properties": {"kind": {"const": "a"}}}, "then": {"properties": {"alpha": {"type": "string"}}, "required": ["alpha"]}}`, strict: true,
			args: `{"kind": "a"}`,
			want: []Violation{missingV("/alpha", "string")},
		},
		{
			name: "keys needing quotes in the sentence", schema: `{"properties": {"a": {"type": "object", "properties": {"x.y": {"type": "integer"}}}}}`, strict: true,
			args:   `{"a": {"x.y": "s"}}`,
			want:   []Violation{typeV("/a/x.y", "string", "integer")},
			detail: `Tool 't' got a["x.y"]=string, expected integer`,
		},
	}
	for _, tt := range tests {
		for _, useNumber := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/useNumber=%v", tt.name, useNumber), func(t *testing.T) {
				var s *Schema
				tool := "t"
				if tt.fixture != "" {
					s, tool = fixture(t, tt.fixture, tt.strict), tt.fixture
				} else {
					s = inline(t, tool, tt.schema, tt.strict)
				}
				got := s.Validate(decodeArgs(t, tt.args, useNumber))
				if !slices.Equal(got, tt.want) {
					t.Errorf("Validate:\n got %+v\nwant %+v", got, tt.want)
				}
				if tt.detail != "" {
					if d := Detail(tool, got); d != tt.detail {
						t.Errorf("Detail:\n got %q\nwant %q", d, tt.detail)
					}
				}
			})
		}
	}
}

func TestValidateNilArgs(t *testing.T) {
	s := fixture(t, "pubmed_search", true)
	got := s.Validate(nil)
	want := []Violation{missingV("/term", "string")}
	if !slices.Equal(got, want) {
		t.Errorf("Validate(nil) = %+v, want %+v", got, want)
	}
}

func TestValidateGoValues(t *testing.T) {
	s := fixture(t, "pubmed_search", true)
	tests := []struct {
		name   string
		retmax any
		want   []Violation
	}{
		{name: "int", retmax: 5},
		{name: "int64 too large", retmax: int64(101), want: []Violation{schemaV("/retmax", "too large", "at most 100", "integer")}},
		{name: "float64 integral", retmax: 5.0},
		{name: "float64 fractional", retmax: 5.5, want: []Violation{typeV("/retmax", "number", "integer")}},
		{name: "json.Number fractional", retmax: json.Number("2.5"), want: []Violation{typeV("/retmax", "number", "integer")}},
		{name: "not a JSON value", retmax: []int{1}, want: []Violation{{Path: "/retmax", Reason: bucketing.ReasonWrongType, Message: "unsupported value", Expected: "integer", Got: "unsupported"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := s.Validate(map[string]any{"term": "x", "retmax": tt.retmax})
			if !slices.Equal(got, tt.want) {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestValidateRefusesHugeNumbers(t *testing.T) {
	s := fixture(t, "drug_targets", true)
	huge := Violation{Path: "/filters/score", Reason: bucketing.ReasonSchema, Message: "number outside the supported range",
		Expected: "a number of at most 512 characters with an exponent of at most 1000", Got: "number"}
	tests := []struct {
		name  string
		score json.Number
		want  []Violation
	}{
		{name: "small", score: "0.5"},
		{name: "exponent at the bound", score: "1e-1000"},
		{name: "exponent past the bound", score: "1e999999999", want: []Violation{huge}},
		{name: "exponent with many digits", score: "1e-00000000000000000001", want: []Violation{huge}},
		{name: "too many digits", score: json.Number("0." + strings.Repeat("1", 600)), want: []Violation{huge}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := map[string]any{"query": "q", "filters": map[string]any{"phase": json.Number("1"), "score": tt.score}}
			got := s.Validate(args)
			if !slices.Equal(got, tt.want) {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestValidateBoundsViolations(t *testing.T) {
	s := fixture(t, "pubmed_search", true)
	pmid := make([]any, 3*MaxViolations)
	for i := range pmid {
		pmid[i] = i
	}
	got := s.Validate(map[string]any{"term": "x", "pmid": pmid})
	if len(got) != MaxViolations {
		t.Fatalf("got %d violations, want %d", len(got), MaxViolations)
	}
	if got[0].Path != "/pmid/0" || got[1].Path != "/pmid/1" || got[10].Path != "/pmid/10" {
		t.Errorf("violations not in index order: %s, %s, %s", got[0].Path, got[1].Path, got[10].Path)
	}
}

func TestValidateConcurrent(t *testing.T) {
	s := fixture(t, "docs_edit", true)
	valid := `{"documentId": "d1", "requests": [{"insert": {"text": "hi", "index": 1}}]}`
	invalid := `{"documentId": "d1", "requests": [{"insert": {"text": "hi", "index": 1, "txt": "x"}}]}`
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 200 {
				args, wantN := valid, 0
				if (i+j)%2 == 0 {
					args, wantN = invalid, 1
				}
				if n := len(s.Validate(decodeArgs(t, args, true))); n != wantN {
					t.Errorf("got %d violations, want %d", n, wantN)
					return
				}
			}
		}()
	}
	wg.Wait()
}

func TestDetailAndReason(t *testing.T) {
	tests := []struct {
		name   string
		vs     []Violation
		detail string
		reason string
	}{
		{name: "none"},
		{
			name:   "one unknown",
			vs:     []Violation{unknownV("/requests/0/txt", "index, text")},
			detail: "Tool 'docs_edit' got unknown argument 'requests[0].txt'; expected one of: index, text",
			reason: bucketing.ReasonUnknownField,
		},
		{
			name:   "two missing share a reason",
			vs:     []Violation{missingV("/a", ""), missingV("/b", "")},
			detail: "Tool 'docs_edit' is missing required argument 'a' (and 1 more problem)",
			reason: bucketing.ReasonMissingField,
		},
		{
			name:   "mixed reasons: unknown field leads",
			vs:     []Violation{typeV("/requests/0/insert/index", "string", "integer"), missingV("/b", ""), unknownV("/c", "a")},
			detail: "Tool 'docs_edit' got unknown argument 'c'; expected one of: a (and 2 more problems)",
			reason: bucketing.ReasonUnknownField,
		},
		{
			name:   "mixed reasons: wrong type before missing",
			vs:     []Violation{missingV("/a", ""), typeV("/requests/0/insert/index", "string", "integer")},
			detail: "Tool 'docs_edit' got requests[0].insert.index=string, expected integer (and 1 more problem)",
			reason: bucketing.ReasonWrongType,
		},
		{
			name:   "whole call",
			vs:     []Violation{schemaV("", "too many fields", "at most 2 fields", "object")},
			detail: "Tool 'docs_edit' got arguments=object, expected at most 2 fields",
			reason: bucketing.ReasonSchema,
		},
		{
			name:   "policy violation without types",
			vs:     []Violation{{Reason: "policy_denied", Message: "writes are not allowed on weekends"}},
			detail: "Tool 'docs_edit' was refused: writes are not allowed on weekends",
			reason: "policy_denied",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Detail("docs_edit", tt.vs); got != tt.detail {
				t.Errorf("Detail = %q, want %q", got, tt.detail)
			}
			if got := Reason(tt.vs); got != tt.reason {
				t.Errorf("Reason = %q, want %q", got, tt.reason)
			}
		})
	}
}

func TestDisplayPath(t *testing.T) {
	tests := []struct{ ptr, want string }{
		{"", ""},
		{"/term", "term"},
		{"/requests/0/txt", "requests[0].txt"},
		{"/requests/0/insert/index", "requests[0].insert.index"},
		{"/a/x.y", `a["x.y"]`},
		{"/a~1b/c~0d", `["a/b"]["c~d"]`},
		{"/a/", `a[""]`},
		{"/x y/[0]", `["x y"]["[0]"]`},
		{"/0", "[0]"},
	}
	for _, tt := range tests {
		t.Run(tt.ptr, func(t *testing.T) {
			if got := DisplayPath(tt.ptr); got != tt.want {
				t.Errorf("DisplayPath(%q) = %q, want %q", tt.ptr, got, tt.want)
			}
		})
	}
}

func TestCompileSchemaErrors(t *testing.T) {
	tests := []struct {
		name    string
		doc     string
		dir     string
		pointer string
		msg     []string // substrings of the error text
	}{
		{name: "bad JSON", doc: `{"type": "object",`, msg: []string{`schema for tool "t"`, "invalid JSON", "unexpected EOF"}},
		{name: "trailing data", doc: `{} {}`, msg: []string{"invalid JSON", "after the top-level value"}},
		{name: "empty", doc: ``, msg: []string{"invalid JSON", "empty document"}},
		{name: "not an object", doc: `[1]`, msg: []string{"must be a JSON object or boolean, got array"}},
		{
			name: "bad keyword value", doc: `{"properties": {"retmax": {"type": "integer", "minimum": "ten"}}}`,
			pointer: "/properties/retmax/minimum", msg: []string{"at /properties/retmax/minimum: got string, want number"},
		},
		{
			name: "unknown type name", doc: `{"properties": {"term": {"type": "strin"}}}`,
			pointer: "/properties/term/type", msg: []string{"at /properties/term/type", "value must be one of"},
		},
		{
			name: "draft-07 bad keyword value", doc: `{"$schema": "http://json-schema.org/draft-07/schema#", "required": "term"}`,
			pointer: "/required", msg: []string{"at /required: got string, want array"},
		},
		{name: "invalid regex", doc: `{"properties": {"a": {"pattern": "(("}}}`, pointer: "/properties/a/pattern", msg: []string{"not valid regex"}},
		{name: "missing $ref target", doc: `{"properties": {"a": {"$ref": "#/$defs/nope"}}}`, msg: []string{`$ref target '#/$defs/nope' not found`}},
		{name: "file $ref without Dir", doc: `{"properties": {"a": {"$ref": "common.json"}}}`, msg: []string{"common.json", "SchemaOptions.Dir"}},
		{name: "network $ref", doc: `{"properties": {"a": {"$ref": "https://example.com/s.json"}}}`, dir: "testdata", msg: []string{"https://example.com/s.json", "only files under the schema directory"}},
		{name: "file $ref outside Dir", doc: `{"properties": {"a": {"$ref": "../schemas/common.json"}}}`, dir: "testdata/schemas/sub", msg: []string{"outside the schema directory"}},
		{name: "huge number", doc: `{"properties": {"a": {"maximum": 1e99999999}}}`, pointer: "/properties/a/maximum", msg: []string{"number outside the supported range"}},
		{name: "reference cycle", doc: `{"$defs": {"a": {"allOf": [{"$ref": "#/$defs/a"}]}}, "properties": {"x": {"$ref": "#/$defs/a"}}}`, pointer: "/$defs/a", msg: []string{"reference cycle"}},
		{name: "missing file", doc: `{"properties": {"a": {"$ref": "nope.json"}}}`, dir: "testdata/schemas", msg: []string{"nope.json", "no such file"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := CompileSchema([]byte(tt.doc), SchemaOptions{Tool: "t", Strict: true, Dir: tt.dir})
			if err == nil {
				t.Fatal("CompileSchema succeeded, want an error")
			}
			if !errors.Is(err, ErrInvalidSchema) {
				t.Errorf("errors.Is(%v, ErrInvalidSchema) = false", err)
			}
			var se *SchemaError
			if !errors.As(err, &se) {
				t.Fatalf("error %T is not a *SchemaError", err)
			}
			if se.Pointer != tt.pointer {
				t.Errorf("Pointer = %q, want %q (error: %v)", se.Pointer, tt.pointer, err)
			}
			for _, m := range tt.msg {
				if !strings.Contains(err.Error(), m) {
					t.Errorf("error %q does not contain %q", err, m)
				}
			}
		})
	}
}

func TestCompileSchemaAcceptsDrafts(t *testing.T) {
	tests := []struct{ name, doc string }{
		{"default 2020-12", `{"properties": {"a": {"type": "string"}}}`},
		{"2020-12", `{"$schema": "https://json-schema.org/draft/2020-12/schema", "properties": {"a": {"prefixItems": [{"type": "string"}]}}}`},
		{"2019-09", `{"$schema": "https://json-schema.org/draft/2019-09/schema", "properties": {"a": {"type": "string"}}}`},
		{"draft-07", `{"$schema": "http://json-schema.org/draft-07/schema#", "properties": {"a": {"type": "string"}}}`},
		{"draft-04", `{"$schema": "http://json-schema.org/draft-04/schema#", "properties": {"a": {"type": "string"}}}`},
		{"boolean schema", `true`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := inline(t, "t", tt.doc, true)
			if vs := s.Validate(map[string]any{"a": "x"}); vs != nil {
				t.Errorf("Validate = %+v, want nil", vs)
			}
		})
	}
}
