package policies

import "testing"

// benchSchema is a realistic tool schema: ten fields, two nested objects,
// an array of objects, enums and bounds.
const benchSchema = `{
	"$schema": "https://json-schema.org/draft/2020-12/schema",
	"type": "object",
	"required": ["query", "limit"],
	"properties": {
		"query": {"type": "string", "minLength": 1, "maxLength": 500},
		"limit": {"type": "integer", "minimum": 1, "maximum": 100},
		"offset": {"type": "integer", "minimum": 0},
		"sort": {"enum": ["relevance", "date", "citations"]},
		"organism": {"enum": ["human", "mouse", "rat"]},
		"include_abstracts": {"type": "boolean"},
		"min_score": {"type": "number", "minimum": 0, "maximum": 1},
		"fields": {"type": "array", "items": {"type": "string"}, "maxItems": 20},
		"filters": {
			"type": "object",
			"properties": {
				"phase": {"type": "integer", "minimum": 1, "maximum": 4},
				"approved": {"type": "boolean"},
				"window": {"type": "object", "properties": {"from": {"type": "string"}, "to": {"type": "string"}}}
			}
		},
		"tags": {
			"type": "array",
			"items": {"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}, "weight": {"type": "number"}}}
		}
	}
}`

const benchArgs = `{
	"query": "EGFR inhibitor resistance", "limit": 20, "offset": 40, "sort": "date", "organism": "human",
	"include_abstracts": true, "min_score": 0.25, "fields": ["title", "abstract", "doi"],
	"filters": {"phase": 3, "approved": false, "window": {"from": "2020-01-01", "to": "2024-12-31"}},
	"tags": [{"name": "oncology", "weight": 0.8}, {"name": "lung"}]
}`

func BenchmarkValidate(b *testing.B) {
	s := inline(b, "bench", benchSchema, true)
	args := decodeArgs(b, benchArgs, true)
	if vs := s.Validate(args); vs != nil {
		b.Fatalf("bench args invalid: %+v", vs)
	}
	b.ReportAllocs()
	for b.Loop() {
		if s.Validate(args) != nil {
			b.Fatal("invalid")
		}
	}
}

func BenchmarkValidateFloat64(b *testing.B) {
	s := inline(b, "bench", benchSchema, true)
	args := decodeArgs(b, benchArgs, false)
	b.ReportAllocs()
	for b.Loop() {
		if s.Validate(args) != nil {
			b.Fatal("invalid")
		}
	}
}

func BenchmarkValidateRefused(b *testing.B) {
	s := fixture(b, "docs_edit", true)
	args := decodeArgs(b, `{"documentId": "d1", "requests": [{"insert": {"txt": "hi", "index": "1"}}]}`, true)
	b.ReportAllocs()
	for b.Loop() {
		if vs := s.Validate(args); len(vs) != 3 {
			b.Fatalf("got %d violations", len(vs))
		}
		_ = Detail("docs_edit", nil)
	}
}

func BenchmarkCoerce(b *testing.B) {
	s := inline(b, "bench", benchSchema, true)
	b.ReportAllocs()
	for b.Loop() {
		s.Coerce(map[string]any{"query": "egfr", "limit": "20", "include_abstracts": "true", "fields": "title"})
	}
}

// BenchmarkValidateComposed validates a call against a schema composed of
// a base and an extension through allOf, both describing nested objects:
// the shape where strict closing uses unevaluatedProperties.
func BenchmarkValidateComposed(b *testing.B) {
	s := inline(b, "bench", composeBaseExtension, true)
	args := decodeArgs(b, `{"id": "a", "title": "t", "meta": {"owner": "o", "rev": 2,
		"tags": [{"k": "x", "v": "y", "attrs": {"x": 1, "y": 2}}, {"k": "z"}]}}`, true)
	if vs := s.Validate(args); vs != nil {
		b.Fatalf("bench args invalid: %+v", vs)
	}
	b.ReportAllocs()
	for b.Loop() {
		if s.Validate(args) != nil {
			b.Fatal("invalid")
		}
	}
}
