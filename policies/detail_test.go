package policies

import (
	"encoding/json"
	"strings"
	"testing"
)

// leakSchema has a constraint of every kind the validator can report.
const leakSchema = `{
	"type": "object",
	"required": ["req"],
	"dependentRequired": {"a": ["b"]},
	"properties": {
		"req": {"type": "string"},
		"a": {"type": "string"},
		"b": {"type": "string"},
		"typed": {"type": "integer"},
		"enum": {"enum": ["red", "green"]},
		"konst": {"const": "fixed"},
		"pattern": {"type": "string", "pattern": "^[a-z]{3}$"},
		"format": {"type": "string", "format": "email"},
		"maxlen": {"type": "string", "maxLength": 4},
		"minlen": {"type": "string", "minLength": 64},
		"max": {"type": "number", "maximum": 10},
		"min": {"type": "number", "minimum": 99999999999},
		"exmax": {"type": "number", "exclusiveMaximum": 1},
		"multiple": {"type": "number", "multipleOf": 7},
		"unique": {"type": "array", "uniqueItems": true},
		"contains": {"type": "array", "contains": {"type": "integer"}},
		"tuple": {"type": "array", "prefixItems": [{"type": "integer"}], "items": false},
		"not": {"not": {"type": "string"}},
		"one": {"oneOf": [{"type": "integer"}, {"type": "boolean"}]},
		"any": {"anyOf": [{"type": "string", "maxLength": 2}, {"type": "string", "pattern": "^x"}]},
		"obj": {"type": "object", "properties": {"inner": {"type": "integer"}}, "minProperties": 2}
	}
}`

func TestViolationsNeverHoldTheValue(t *testing.T) {
	const secret = "tg-SECRET-51f0c9a7e2"
	const secretNum = "987654321"
	s := inline(t, "leaky", leakSchema, true)
	args := decodeArgs(t, `{
		"a": "`+secret+`",
		"typed": "`+secret+`",
		"enum": "`+secret+`",
		"konst": "`+secret+`",
		"pattern": "`+secret+`",
		"format": "`+secret+`",
		"maxlen": "`+secret+`",
		"minlen": "`+secret+`",
		"max": `+secretNum+`,
		"min": `+secretNum+`.5,
		"exmax": `+secretNum+`,
		"multiple": `+secretNum+`,
		"unique": ["`+secret+`", "`+secret+`"],
		"contains": ["`+secret+`"],
		"tuple": [`+secretNum+`, "`+secret+`"],
		"not": "`+secret+`",
		"one": "`+secret+`",
		"any": "`+secret+`",
		"obj": {"inner": "`+secret+`"},
		"unknown": "`+secret+`"
	}`, true)
	vs := s.Validate(args)
	// One violation per failing keyword above, plus req and b missing.
	if len(vs) < 21 {
		t.Errorf("got %d violations, want at least 21: %+v", len(vs), vs)
	}
	all, _ := json.Marshal(vs)
	text := string(all) + "\n" + Detail("leaky", vs)
	for _, marker := range []string{secret, "SECRET", secretNum, "98765"} {
		if strings.Contains(text, marker) {
			t.Errorf("violations or detail contain %q:\n%s", marker, text)
		}
	}
}

func TestDetailKeysOfDigits(t *testing.T) {
	s := inline(t, "t", `{"properties": {
		"123": {"type": "integer"},
		"rows": {"type": "array", "items": {"type": "object", "properties": {"7": {"type": "integer"}}}}}}`, true)
	tests := []struct{ args, path, detail string }{
		{`{"123": "x"}`, "/123", `Tool 't' got ["123"]=string, expected integer`},
		{`{"124": 1}`, "/124", `Tool 't' got unknown argument '["124"]'; expected one of: 123, rows`},
		{`{"rows": [{"7": "x"}]}`, "/rows/0/7", `Tool 't' got rows[0]["7"]=string, expected integer`},
		{`{"rows": [{"8": 1}]}`, "/rows/0/8", `Tool 't' got unknown argument 'rows[0]["8"]'; expected one of: 7`},
	}
	for _, tt := range tests {
		vs := s.Validate(decodeArgs(t, tt.args, true))
		if len(vs) != 1 || vs[0].Path != tt.path {
			t.Errorf("%s: got %+v, want one violation at %s", tt.args, vs, tt.path)
			continue
		}
		if d := Detail("t", vs); d != tt.detail {
			t.Errorf("%s: Detail = %q, want %q", tt.args, d, tt.detail)
		}
		if b, _ := json.Marshal(vs[0]); strings.Contains(string(b), "isplay") {
			t.Errorf("%s: Display is in the JSON: %s", tt.args, b)
		}
	}
	// An index stays an index.
	vs := s.Validate(decodeArgs(t, `{"rows": [{"7": 1}, {"7": "x"}]}`, true))
	if d := Detail("t", vs); d != `Tool 't' got rows[1]["7"]=string, expected integer` {
		t.Errorf("Detail = %q", d)
	}
}
