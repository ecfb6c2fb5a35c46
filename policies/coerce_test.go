package policies

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"testing"

	"github.com/toolgate/toolgate/bucketing"
)

func TestCoerce(t *testing.T) {
	const mixed = `{
		"type": "object",
		"properties": {
			"flag": {"type": "boolean"},
			"ratio": {"type": "number"},
			"ids": {"type": "array", "items": {"type": "integer"}},
			"either": {"oneOf": [{"type": "integer"}, {"type": "boolean"}]},
			"textOrInt": {"anyOf": [{"type": "string"}, {"type": "integer"}]},
			"refd": {"$ref": "#/$defs/count"},
			"nullableInt": {"type": ["integer", "null"]},
			"intOrArray": {"type": ["integer", "array"]},
			"tuple": {"type": "array", "prefixItems": [{"type": "integer"}, {"type": "boolean"}]}
		},
		"$defs": {"count": {"type": "integer", "minimum": 0}}
	}`
	tests := []struct {
		name    string
		fixture string // or schema
		schema  string
		in      map[string]any
		want    map[string]any
		valid   bool   // Validate after Coerce finds nothing
		reason  string // else: Reason of the violations
	}{
		{
			name: "integer from query string", fixture: "pubmed_search",
			in:    map[string]any{"term": "brca1", "retmax": "5"},
			want:  map[string]any{"term": "brca1", "retmax": json.Number("5")},
			valid: true,
		},
		{
			name: "integer with spaces and sign", fixture: "pubmed_search",
			in:    map[string]any{"term": "x", "retmax": " +7 "},
			want:  map[string]any{"term": "x", "retmax": json.Number("7")},
			valid: true,
		},
		{
			name: "string that is not an integer stays", fixture: "pubmed_search",
			in:     map[string]any{"term": "x", "retmax": "abc"},
			want:   map[string]any{"term": "x", "retmax": "abc"},
			reason: bucketing.ReasonWrongType,
		},
		{
			name: "fraction is not an integer", fixture: "pubmed_search",
			in:     map[string]any{"term": "x", "retmax": "5.5"},
			want:   map[string]any{"term": "x", "retmax": "5.5"},
			reason: bucketing.ReasonWrongType,
		},
		{
			name: "coerced value is still checked", fixture: "pubmed_search",
			in:     map[string]any{"term": "x", "retmax": "500"},
			want:   map[string]any{"term": "x", "retmax": json.Number("500")},
			reason: bucketing.ReasonSchema,
		},
		{
			name: "string where a string is wanted stays", fixture: "pubmed_search",
			in:    map[string]any{"term": "5"},
			want:  map[string]any{"term": "5"},
			valid: true,
		},
		{
			name: "single string to one-element array", fixture: "pubmed_search",
			in:    map[string]any{"term": "x", "pmid": "123"},
			want:  map[string]any{"term": "x", "pmid": []any{"123"}},
			valid: true,
		},
		{
			name: "repeated key stays an array", fixture: "pubmed_search",
			in:    map[string]any{"term": "x", "pmid": []any{"1", "2"}},
			want:  map[string]any{"term": "x", "pmid": []any{"1", "2"}},
			valid: true,
		},
		{
			name: "one-element array is not unwrapped", fixture: "pubmed_search",
			in:     map[string]any{"term": "x", "retmax": []any{"5"}},
			want:   map[string]any{"term": "x", "retmax": []any{"5"}},
			reason: bucketing.ReasonWrongType,
		},
		{
			name: "boolean", fixture: "pubmed_search",
			in:    map[string]any{"term": "x", "include_abstracts": "true"},
			want:  map[string]any{"term": "x", "include_abstracts": true},
			valid: true,
		},
		{
			name: "boolean words", schema: mixed,
			in:   map[string]any{"flag": "Off"},
			want: map[string]any{"flag": false}, valid: true,
		},
		{
			name: "not a boolean", schema: mixed,
			in:   map[string]any{"flag": "maybe"},
			want: map[string]any{"flag": "maybe"}, reason: bucketing.ReasonWrongType,
		},
		{
			name: "number", schema: mixed,
			in:   map[string]any{"ratio": "0.25"},
			want: map[string]any{"ratio": json.Number("0.25")}, valid: true,
		},
		{
			name: "number with exponent", schema: mixed,
			in:   map[string]any{"ratio": "1e3"},
			want: map[string]any{"ratio": json.Number("1000")}, valid: true,
		},
		{
			name: "NaN and hex are not numbers", schema: mixed,
			in:   map[string]any{"ratio": "NaN", "refd": "0x10"},
			want: map[string]any{"ratio": "NaN", "refd": "0x10"}, reason: bucketing.ReasonWrongType,
		},
		{
			name: "array items coerced", schema: mixed,
			in:   map[string]any{"ids": []any{"1", "x"}},
			want: map[string]any{"ids": []any{json.Number("1"), "x"}}, reason: bucketing.ReasonWrongType,
		},
		{
			name: "single string to array, item coerced", schema: mixed,
			in:   map[string]any{"ids": "7"},
			want: map[string]any{"ids": []any{json.Number("7")}}, valid: true,
		},
		{
			name: "oneOf with one branch that parses", schema: mixed,
			in:   map[string]any{"either": "5"},
			want: map[string]any{"either": json.Number("5")}, valid: true,
		},
		{
			name: "oneOf with two branches that parse stays", schema: mixed,
			in:   map[string]any{"either": "1"},
			want: map[string]any{"either": "1"}, reason: bucketing.ReasonWrongType,
		},
		{
			name: "anyOf admitting a string stays", schema: mixed,
			in:   map[string]any{"textOrInt": "5"},
			want: map[string]any{"textOrInt": "5"}, valid: true,
		},
		{
			name: "through $ref", schema: mixed,
			in:   map[string]any{"refd": "3"},
			want: map[string]any{"refd": json.Number("3")}, valid: true,
		},
		{
			name: "nullable integer", schema: mixed,
			in:   map[string]any{"nullableInt": "3"},
			want: map[string]any{"nullableInt": json.Number("3")}, valid: true,
		},
		{
			name: "integer or array is ambiguous", schema: mixed,
			in:   map[string]any{"intOrArray": "3"},
			want: map[string]any{"intOrArray": "3"}, reason: bucketing.ReasonWrongType,
		},
		{
			name: "prefixItems", schema: mixed,
			in:   map[string]any{"tuple": []any{"1", "yes"}},
			want: map[string]any{"tuple": []any{json.Number("1"), true}}, valid: true,
		},
		{
			name: "unknown argument untouched", fixture: "pubmed_search",
			in:     map[string]any{"term": "x", "retmx": "5"},
			want:   map[string]any{"term": "x", "retmx": "5"},
			reason: bucketing.ReasonUnknownField,
		},
		{
			name: "huge integer keeps its digits", schema: mixed,
			in:   map[string]any{"refd": "123456789012345678901234567890"},
			want: map[string]any{"refd": json.Number("123456789012345678901234567890")}, valid: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var s *Schema
			if tt.fixture != "" {
				s = fixture(t, tt.fixture, true)
			} else {
				s = inline(t, "t", tt.schema, true)
			}
			got := s.Coerce(tt.in)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Coerce = %s, want %s", show(got), show(tt.want))
			}
			vs := s.Validate(got)
			switch {
			case tt.valid && vs != nil:
				t.Errorf("Validate after Coerce = %+v, want nil", vs)
			case !tt.valid && Reason(vs) != tt.reason:
				t.Errorf("Reason after Coerce = %q (%+v), want %q", Reason(vs), vs, tt.reason)
			}
		})
	}
}

// show prints a value with its Go types, so "5" and 5 differ.
func show(v any) string {
	switch x := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		out := "{"
		for _, k := range keys {
			out += fmt.Sprintf("%q: %s, ", k, show(x[k]))
		}
		return out + "}"
	case []any:
		out := "["
		for _, e := range x {
			out += show(e) + ", "
		}
		return out + "]"
	}
	return fmt.Sprintf("%T(%v)", v, v)
}

func TestCoerceNil(t *testing.T) {
	s := fixture(t, "pubmed_search", true)
	if got := s.Coerce(nil); got != nil {
		t.Errorf("Coerce(nil) = %v, want nil", got)
	}
}
