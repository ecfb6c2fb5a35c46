package policies

import (
	"encoding/json"
	"reflect"
	"sort"
	"testing"

	"github.com/toolgate/toolgate/bucketing"
)

func TestFoldedNames(t *testing.T) {
	const open = `{
		"type": "object",
		"properties": {
			"title": {"type": "string", "maxLength": 8},
			"maxResults": {"type": "integer"},
			"owner": {"$ref": "#/$defs/person"},
			"steps": {"type": "array", "items": {"type": "object", "properties": {"count": {"type": "integer"}}}},
			"either": {"anyOf": [{"type": "object", "properties": {"left": {}}}, {"type": "object", "properties": {"right": {}}}]}
		},
		"patternProperties": {"^X-": {}},
		"$defs": {"person": {"type": "object", "properties": {"login": {"type": "string"}}}}
	}`
	s, err := CompileSchema([]byte(open), SchemaOptions{Tool: "t"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args string
		want []string // paths
	}{
		{"exact names", `{"title":"a","maxResults":1,"owner":{"login":"l"},"steps":[{"count":1}],"either":{"left":1,"right":2}}`, nil},
		{"other names", `{"note":"x","owner":{"team":"t"}}`, nil},
		{"Title", `{"Title":"far too long"}`, []string{"/Title"}},
		{"TITLE beside title", `{"title":"a","TITLE":"far too long"}`, []string{"/TITLE"}},
		{"maxresults", `{"maxresults":1}`, []string{"/maxresults"}},
		{"long s folds to s", `{"maxReſultſ":1}`, []string{"/maxReſultſ"}},
		{"through $ref", `{"owner":{"Login":"x"}}`, []string{"/owner/Login"}},
		{"in array items", `{"steps":[{"count":1},{"COUNT":2}]}`, []string{"/steps/1/COUNT"}},
		{"in an anyOf branch", `{"either":{"Right":1}}`, []string{"/either/Right"}},
		{"declared by a pattern", `{"X-Title":"x"}`, nil},
		{"key with a slash", `{"owner":{"LOGIN":"x"},"a/b":{"Title":1}}`, []string{"/owner/LOGIN"}},
	} {
		var args map[string]any
		if err := json.Unmarshal([]byte(tc.args), &args); err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, v := range s.FoldedNames(args) {
			if v.Reason != bucketing.ReasonUnknownField || v.Message == "" {
				t.Errorf("%s: violation %+v", tc.name, v)
			}
			got = append(got, v.Path)
		}
		sort.Strings(got)
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
	if vs := s.FoldedNames(map[string]any{"Title": "x"}); Detail("t", vs) != "Tool 't' got unknown argument 'Title'; it is 'title' in another letter case, which some servers read as 'title'" {
		t.Errorf("detail %q", Detail("t", vs))
	}
	if s.FoldedNames(nil) != nil {
		t.Error("nil arguments")
	}
}

// TestFoldedNamesStrictSkips checks the shortcut for a schema whose every
// property-declaring schema is closed: FoldedNames looks at nothing, and
// that is safe because Validate refuses the names it would have found
// (at the top and nested, through $ref and array items), while a name a
// pattern admits is no finding either way. A schema with one open
// location still has its names looked at.
func TestFoldedNamesStrictSkips(t *testing.T) {
	const doc = `{
		"type": "object",
		"properties": {
			"title": {"type": "string"},
			"owner": {"$ref": "#/$defs/person"},
			"steps": {"type": "array", "items": {"type": "object", "properties": {"count": {"type": "integer"}}}}
		},
		"patternProperties": {"^X-": {}},
		"$defs": {"person": {"type": "object", "properties": {"login": {"type": "string"}}}}
	}`
	strict, err := CompileSchema([]byte(doc), SchemaOptions{Tool: "t", Strict: true})
	if err != nil {
		t.Fatal(err)
	}
	if strict.mayFold {
		t.Fatal("a strict schema whose every object is closed still walks the case-folded names")
	}
	for _, args := range []string{`{"Title":"x"}`, `{"owner":{"Login":"x"}}`, `{"steps":[{"Count":1}]}`} {
		var m map[string]any
		if err := json.Unmarshal([]byte(args), &m); err != nil {
			t.Fatal(err)
		}
		vs := strict.Validate(m)
		if len(vs) == 0 || vs[0].Reason != bucketing.ReasonUnknownField {
			t.Errorf("%s: Validate = %+v, want the case-folded name refused as unknown", args, vs)
		}
	}
	open, err := CompileSchema([]byte(`{"type":"object","properties":{"owner":{"type":"object","properties":{"login":{}}}},"additionalProperties":false}`), SchemaOptions{Tool: "t"})
	if err != nil {
		t.Fatal(err)
	}
	if !open.mayFold {
		t.Fatal("a schema with an open nested object skips the case-folded names")
	}
	if vs := open.FoldedNames(map[string]any{"owner": map[string]any{"Login": "x"}}); len(vs) != 1 || vs[0].Path != "/owner/Login" {
		t.Errorf("open nested object: FoldedNames = %+v, want /owner/Login", vs)
	}
}
