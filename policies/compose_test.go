package policies

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/bucketing"
)

// Composed schemas: the shapes real tool schemas take. Each must accept
// its valid calls in strict mode, and refuse each typo (at depth 1 to 4)
// with unknown_field at the typo's path, listing every name any branch
// declares there.
const (
	// A base object extended through allOf, both halves describing the
	// nested meta object, its tags and their attrs.
	composeBaseExtension = `{
		"$defs": {"base": {
			"type": "object", "required": ["id"],
			"properties": {
				"id": {"type": "string"},
				"meta": {"type": "object", "properties": {
					"owner": {"type": "string"},
					"tags": {"type": "array", "items": {"type": "object", "properties": {
						"k": {"type": "string"},
						"attrs": {"type": "object", "properties": {"x": {"type": "integer"}}}}}}}}}}},
		"allOf": [
			{"$ref": "#/$defs/base"},
			{"properties": {
				"title": {"type": "string"},
				"meta": {"properties": {
					"rev": {"type": "integer"},
					"tags": {"items": {"properties": {
						"v": {"type": "string"},
						"attrs": {"properties": {"y": {"type": "integer"}}}}}}}}}}
		]}`
	// An array whose items are one of several object shapes.
	composeOneOfItems = `{
		"type": "object",
		"properties": {"blocks": {"type": "array", "items": {"oneOf": [
			{"type": "object", "required": ["kind", "text"], "properties": {
				"kind": {"const": "text"}, "text": {"type": "string"}}},
			{"type": "object", "required": ["kind", "url"], "properties": {
				"kind": {"const": "image"}, "url": {"type": "string"}, "alt": {"type": "string"},
				"size": {"type": "object", "properties": {"w": {"type": "integer"}, "h": {"type": "integer"}}}}}
		]}}}}`
	// One $defs target used at two locations; one of them extends it.
	composeSharedRef = `{
		"$defs": {"range": {"type": "object", "properties": {"from": {"type": "integer"}, "to": {"type": "integer"}}}},
		"type": "object",
		"properties": {
			"a": {"$ref": "#/$defs/range"},
			"b": {"allOf": [{"$ref": "#/$defs/range"}, {"properties": {"step": {"type": "integer"}}}]},
			"list": {"type": "array", "items": {"$ref": "#/$defs/range"}}
		}}`
	// A tree extended through $dynamicRef: the children of a labelled tree
	// are labelled trees, which a static reading of the $dynamicRef misses.
	composeDynamicTree = `{
		"$id": "https://toolgate.test/labelled-tree",
		"$dynamicAnchor": "node",
		"$ref": "tree",
		"properties": {"label": {"type": "string"}},
		"$defs": {"tree": {
			"$id": "tree",
			"$dynamicAnchor": "node",
			"type": "object",
			"properties": {
				"data": true,
				"children": {"type": "array", "items": {"$dynamicRef": "#node"}}}}}}`
)

func TestStrictComposedSchemas(t *testing.T) {
	type typo struct {
		args    string
		unknown []string // paths refused as unknown_field
		names   string   // the "expected one of" list of the first
	}
	tests := []struct {
		name   string
		schema string
		valid  []string
		typos  []typo
	}{
		{
			name:   "base and extension through allOf",
			schema: composeBaseExtension,
			valid: []string{
				`{"id": "a"}`,
				`{"id": "a", "title": "t", "meta": {"owner": "o", "rev": 2}}`,
				`{"id": "a", "meta": {"tags": [{"k": "x", "v": "y", "attrs": {"x": 1, "y": 2}}]}}`,
				`{"id": "a", "meta": {"rev": 1}}`,
			},
			typos: []typo{
				{`{"id": "a", "titel": "t"}`, []string{"/titel"}, "id, meta, title"},
				{`{"id": "a", "meta": {"ownr": "o"}}`, []string{"/meta/ownr"}, "owner, rev, tags"},
				{`{"id": "a", "meta": {"tags": [{"k": "x", "vv": "y"}]}}`, []string{"/meta/tags/0/vv"}, "attrs, k, v"},
				{`{"id": "a", "meta": {"tags": [{"attrs": {"x": 1, "z": 2}}]}}`, []string{"/meta/tags/0/attrs/z"}, "x, y"},
				{`{"id": "a", "titel": "t", "meta": {"rev": 1, "ownr": "o", "tags": [{"attrs": {"z": 2}}]}}`,
					[]string{"/meta/ownr", "/meta/tags/0/attrs/z", "/titel"}, "owner, rev, tags"},
			},
		},
		{
			name:   "oneOf of object shapes in an array",
			schema: composeOneOfItems,
			valid: []string{
				`{"blocks": [{"kind": "text", "text": "hi"}, {"kind": "image", "url": "u", "alt": "a", "size": {"w": 1, "h": 2}}]}`,
				`{"blocks": []}`,
			},
			typos: []typo{
				{`{"blokcs": []}`, []string{"/blokcs"}, "blocks"},
				{`{"blocks": [{"kind": "image", "url": "u", "widht": 3}]}`, []string{"/blocks/0/widht"}, "alt, kind, size, text, url"},
				{`{"blocks": [{"kind": "text", "text": "x"}, {"kind": "image", "url": "u", "size": {"w": 1, "hh": 2}}]}`, []string{"/blocks/1/size/hh"}, "h, w"},
				// A typo in a required name: the branch fails too, and the
				// typo still leads.
				{`{"blocks": [{"kind": "text", "txt": "x"}]}`, []string{"/blocks/0/txt"}, "alt, kind, size, text, url"},
			},
		},
		{
			name:   "a $defs target shared by three locations",
			schema: composeSharedRef,
			valid: []string{
				`{"a": {"from": 1, "to": 2}, "b": {"from": 1, "to": 2, "step": 1}, "list": [{"from": 1}]}`,
			},
			typos: []typo{
				// step belongs to b only.
				{`{"a": {"from": 1, "step": 1}}`, []string{"/a/step"}, "from, to"},
				{`{"b": {"from": 1, "stp": 1}}`, []string{"/b/stp"}, "from, step, to"},
				{`{"list": [{"from": 1}, {"form": 1}]}`, []string{"/list/1/form"}, "from, to"},
			},
		},
		{
			name:   "recursion through $dynamicRef",
			schema: composeDynamicTree,
			valid: []string{
				`{"label": "root", "data": 1, "children": [{"label": "a", "children": [{"label": "b", "data": null}]}]}`,
			},
			typos: []typo{
				{`{"lable": "root"}`, []string{"/lable"}, "children, data, label"},
				{`{"children": [{"lable": "a"}]}`, []string{"/children/0/lable"}, "children, data, label"},
				{`{"children": [{"children": [{"children": [{"dat": 1}]}]}]}`, []string{"/children/0/children/0/children/0/dat"}, "children, data, label"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			strict := inline(t, "t", tt.schema, true)
			loose := inline(t, "t", tt.schema, false)
			for _, args := range tt.valid {
				if vs := strict.Validate(decodeArgs(t, args, true)); vs != nil {
					t.Errorf("strict refused valid %s: %+v", args, vs)
				}
			}
			for _, ty := range tt.typos {
				args := decodeArgs(t, ty.args, true)
				for _, v := range loose.Validate(args) {
					if v.Reason == bucketing.ReasonUnknownField {
						t.Errorf("non-strict %s: %+v", ty.args, v)
					}
				}
				vs := strict.Validate(args)
				var unknown []string
				for _, v := range vs {
					if v.Reason == bucketing.ReasonUnknownField {
						unknown = append(unknown, v.Path)
					}
				}
				if !slices.Equal(unknown, ty.unknown) {
					t.Errorf("strict %s: unknown_field at %q, want %q (all: %+v)", ty.args, unknown, ty.unknown, vs)
					continue
				}
				if Reason(vs) != bucketing.ReasonUnknownField {
					t.Errorf("strict %s: Reason = %q, want unknown_field", ty.args, Reason(vs))
				}
				d := Detail("t", vs)
				if want := "got unknown argument '" + DisplayPath(ty.unknown[0]) + "'; expected one of: " + ty.names; !strings.Contains(d, want) {
					t.Errorf("strict %s: Detail = %q, want it to contain %q", ty.args, d, want)
				}
			}
		})
	}
}

func TestStrictSiblingBranchesAtDepth(t *testing.T) {
	// The minimal case: an object's properties split across allOf
	// branches below the top level.
	s := inline(t, "t", `{"allOf": [
		{"properties": {"opts": {"properties": {"a": {}}}}},
		{"properties": {"opts": {"properties": {"b": {}}}}}]}`, true)
	for _, args := range []string{`{"opts": {"a": 1}}`, `{"opts": {"b": 1}}`, `{"opts": {"a": 1, "b": 2}}`} {
		if vs := s.Validate(decodeArgs(t, args, true)); vs != nil {
			t.Errorf("%s: %+v", args, vs)
		}
	}
	vs := s.Validate(decodeArgs(t, `{"opts": {"c": 1}}`, true))
	if want := []Violation{unknownV("/opts/c", "a, b")}; !slices.Equal(vs, want) {
		t.Errorf("got %+v, want %+v", vs, want)
	}
}

func TestStrictMetaschemaRef(t *testing.T) {
	// A schema may $ref the metaschemas (served offline, from the
	// library); strict closing closes the location that refers to them.
	for _, doc := range []string{
		`{"properties": {"s": {"$ref": "https://json-schema.org/draft/2020-12/schema"}}}`,
		`{"properties": {"s": {"$ref": "https://json-schema.org/draft/2020-12/meta/applicator"}}}`,
		`{"$ref": "https://json-schema.org/draft/2020-12/meta/validation"}`,
		`{"properties": {"s": {"$ref": "http://json-schema.org/draft-07/schema#"}}}`,
	} {
		s := inline(t, "t", doc, true)
		if strings.Contains(doc, "validation") {
			if vs := s.Validate(decodeArgs(t, `{"minLength": 1}`, true)); vs != nil {
				t.Errorf("%s: valid: %+v", doc, vs)
			}
			if vs := s.Validate(decodeArgs(t, `{"minLenght": 1}`, true)); Reason(vs) != bucketing.ReasonUnknownField {
				t.Errorf("%s: typo: %+v", doc, vs)
			}
			continue
		}
		if vs := s.Validate(decodeArgs(t, `{"s": {"properties": {"x": {"type": "string"}}}}`, true)); vs != nil {
			t.Errorf("%s: valid: %+v", doc, vs)
		}
		if vs := s.Validate(decodeArgs(t, `{"s": {"properties": 5}}`, true)); vs == nil {
			t.Errorf("%s: invalid schema value accepted", doc)
		}
		if vs := s.Validate(decodeArgs(t, `{"s": {"propertees": {}}}`, true)); Reason(vs) != bucketing.ReasonUnknownField || vs[0].Path != "/s/propertees" {
			t.Errorf("%s: typo: %+v", doc, vs)
		}
	}
}

func TestUnknownFormats(t *testing.T) {
	for _, name := range KnownFormats {
		doc := `{"properties": {"f": {"type": "string", "format": "` + name + `"}}}`
		if _, err := CompileSchema([]byte(doc), SchemaOptions{Tool: "t", Strict: true}); err != nil {
			t.Errorf("known format %q refused: %v", name, err)
		}
	}
	for _, name := range []string{"emial", "idn-email", "idn-hostname", "no-such-format"} {
		doc := `{"properties": {"f": {"type": "string", "format": "` + name + `"}}}`
		_, err := CompileSchema([]byte(doc), SchemaOptions{Tool: "t", Strict: true})
		var se *SchemaError
		if !errors.As(err, &se) || se.Pointer != "/properties/f/format" ||
			!strings.Contains(err.Error(), `unknown format "`+name+`"`) || !strings.Contains(err.Error(), "known formats: date, date-time,") {
			t.Errorf("format %q: err = %v, want an unknown-format error at /properties/f/format listing the known ones", name, err)
		}
		s, err := CompileSchema([]byte(doc), SchemaOptions{Tool: "t", Strict: true, UnknownFormats: FormatsIgnore})
		if err != nil {
			t.Errorf("format %q with %s: %v", name, FormatsIgnore, err)
			continue
		}
		if vs := s.Validate(map[string]any{"f": "anything"}); vs != nil {
			t.Errorf("format %q ignored: %+v", name, vs)
		}
	}
	// A known format is still asserted.
	s := inline(t, "t", `{"properties": {"f": {"type": "string", "format": "email"}}}`, true)
	if vs := s.Validate(map[string]any{"f": "not an email"}); len(vs) != 1 || vs[0].Message != "wrong format" {
		t.Errorf("email: %+v", vs)
	}
	if _, err := CompileSchema([]byte(`{}`), SchemaOptions{UnknownFormats: "warn"}); err == nil {
		t.Error("UnknownFormats warn accepted")
	}
}

func TestDeclaredButNotEvaluated(t *testing.T) {
	// The author's own unevaluatedProperties: false refuses b, which only
	// the anyOf branch that did not match declares: not an unknown name.
	s := inline(t, "t", `{"properties": {"a": {}}, "unevaluatedProperties": false,
		"anyOf": [{"properties": {"b": {"type": "integer"}}}, {"properties": {"c": {}}}]}`, true)
	vs := s.Validate(decodeArgs(t, `{"a": 1, "b": "x", "c": 1}`, true))
	want := []Violation{{Path: "/b", Reason: bucketing.ReasonSchema, Message: msgNotEvaluated, Expected: "absent, or valid for a shape that declares it", Got: "string"}}
	if !slices.Equal(vs, want) {
		t.Errorf("got %+v, want %+v", vs, want)
	}
	if d := Detail("t", vs); d != "Tool 't' got b=string, expected absent, or valid for a shape that declares it" {
		t.Errorf("Detail = %q", d)
	}
	// A name nothing declares is still unknown.
	vs = s.Validate(decodeArgs(t, `{"a": 1, "c": 1, "d": 2}`, true))
	if want := []Violation{unknownV("/d", "a, b, c")}; !slices.Equal(vs, want) {
		t.Errorf("got %+v, want %+v", vs, want)
	}
	// When the branch failed for a problem of its own, that problem is
	// reported and the declared names are not echoed.
	s = inline(t, "t", `{"unevaluatedProperties": false,
		"oneOf": [{"properties": {"kind": {"const": "x"}, "n": {"type": "integer"}}, "required": ["kind", "n"]}]}`, true)
	vs = s.Validate(decodeArgs(t, `{"kind": "x", "n": "1"}`, true))
	if len(vs) != 1 || vs[0].Reason != bucketing.ReasonWrongType || vs[0].Path != "/n" {
		t.Errorf("got %+v, want one wrong_type at /n", vs)
	}
}
