package policies

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestUnknownKeywordsRefused checks that a keyword the schema's draft does
// not define fails the compile wherever a schema stands, with its pointer
// and the keyword it most likely means, and that the same schema with the
// keyword spelt right compiles.
func TestUnknownKeywordsRefused(t *testing.T) {
	cases := []struct {
		name, doc, ptr, msg string
	}{
		{"maxium", `{"properties": {"n": {"type": "integer", "maxium": 10}}}`,
			"/properties/n/maxium", `unknown keyword "maxium" (did you mean "maximum"?)`},
		{"minLenght", `{"properties": {"s": {"type": "string", "minLenght": 3}}}`,
			"/properties/s/minLenght", `unknown keyword "minLenght" (did you mean "minLength"?)`},
		{"requird at the root", `{"type": "object", "properties": {"a": {}}, "requird": ["a"]}`,
			"/requird", `unknown keyword "requird" (did you mean "required"?)`},
		{"in items", `{"properties": {"l": {"type": "array", "items": {"type": "string", "maxLenght": 3}}}}`,
			"/properties/l/items/maxLenght", `unknown keyword "maxLenght" (did you mean "maxLength"?)`},
		{"in prefixItems", `{"properties": {"l": {"prefixItems": [{"type": "string"}, {"minimun": 1}]}}}`,
			"/properties/l/prefixItems/1/minimun", `unknown keyword "minimun" (did you mean "minimum"?)`},
		{"in $defs, referenced", `{"$defs": {"R": {"type": "integer", "maxium": 9}}, "properties": {"r": {"$ref": "#/$defs/R"}}}`,
			"/$defs/R/maxium", `unknown keyword "maxium" (did you mean "maximum"?)`},
		{"in $defs, not referenced", `{"$defs": {"R": {"patern": "^a"}}, "properties": {"r": {}}}`,
			"/$defs/R/patern", `unknown keyword "patern" (did you mean "pattern"?)`},
		{"nested properties", `{"properties": {"a": {"properties": {"b": {"properties": {"c": {"enumm": [1]}}}}}}}`,
			"/properties/a/properties/b/properties/c/enumm", `unknown keyword "enumm" (did you mean "enum"?)`},
		{"under allOf", `{"allOf": [{"properties": {"n": {}}}, {"requried": ["n"]}]}`,
			"/allOf/1/requried", `unknown keyword "requried" (did you mean "required"?)`},
		{"under anyOf and not", `{"anyOf": [{"not": {"constt": 1}}]}`,
			"/anyOf/0/not/constt", `unknown keyword "constt" (did you mean "const"?)`},
		{"under if/then/else", `{"if": {"properties": {"k": {"const": 1}}}, "then": {"required": ["a"]}, "else": {"minProperites": 1}}`,
			"/else/minProperites", `unknown keyword "minProperites" (did you mean "minProperties"?)`},
		{"in patternProperties", `{"patternProperties": {"^a": {"typ": "string"}}}`,
			"/patternProperties/^a/typ", `unknown keyword "typ" (did you mean "type"?)`},
		{"in additionalProperties", `{"additionalProperties": {"formatt": "email"}}`,
			"/additionalProperties/formatt", `unknown keyword "formatt" (did you mean "format"?)`},
		{"in dependentSchemas", `{"dependentSchemas": {"a": {"requird": ["b"]}}}`,
			"/dependentSchemas/a/requird", `unknown keyword "requird" (did you mean "required"?)`},
		{"in contains", `{"properties": {"l": {"contains": {"minimum": 1, "multipleof": 2}}}}`,
			"/properties/l/contains/multipleof", `unknown keyword "multipleof" (did you mean "multipleOf"?)`},
		{"snake case", `{"properties": {"n": {}}, "additional_properties": false}`,
			"/additional_properties", `unknown keyword "additional_properties" (did you mean "additionalProperties"?)`},
		{"property names escaped in the pointer", `{"properties": {"a/b": {"maxium": 1}}}`,
			"/properties/a~1b/maxium", `unknown keyword "maxium" (did you mean "maximum"?)`},
		{"no suggestion", `{"properties": {"n": {"flavour": "x"}}}`,
			"/properties/n/flavour", `unknown keyword "flavour": toolgate would not check it`},
		{"another draft's keyword", `{"items": {}, "additionalItems": false}`,
			"/additionalItems", `unknown keyword "additionalItems" (a keyword of draft-04, draft-06, draft-07, 2019-09, not of 2020-12`},
		{"draft-07 lacks 2019 keywords", `{"$schema": "http://json-schema.org/draft-07/schema#", "dependentRequired": {"a": ["b"]}}`,
			"/dependentRequired", `unknown keyword "dependentRequired" (a keyword of 2019-09, 2020-12, not of draft-07`},
		{"draft-07 typo in definitions", `{"$schema": "http://json-schema.org/draft-07/schema#", "definitions": {"d": {"maxium": 1}}}`,
			"/definitions/d/maxium", `unknown keyword "maxium" (did you mean "maximum"?)`},
		{"draft-04 typo in items array", `{"$schema": "http://json-schema.org/draft-04/schema#", "items": [{}, {"minimun": 1}]}`,
			"/items/1/minimun", `unknown keyword "minimun" (did you mean "minimum"?)`},
		{"OpenAPI nullable", `{"properties": {"n": {"type": "string", "nullable": true}}}`,
			"/properties/n/nullable", `unknown keyword "nullable" (an OpenAPI keyword; in JSON Schema add "null" to type)`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, strict := range []bool{false, true} {
				_, err := CompileSchema([]byte(c.doc), SchemaOptions{Tool: "t", Strict: strict})
				var se *SchemaError
				if !errors.As(err, &se) || !errors.Is(err, ErrInvalidSchema) {
					t.Fatalf("strict=%v: compiled, or not a *SchemaError: %v", strict, err)
				}
				if se.Pointer != c.ptr || !strings.HasPrefix(se.Msg, c.msg) {
					t.Errorf("strict=%v: got pointer %q, message %q; want %q, %q...", strict, se.Pointer, se.Msg, c.ptr, c.msg)
				}
				if !strings.Contains(se.Msg, "unknown_keywords: ignore") {
					t.Errorf("strict=%v: the message does not name the opt-out: %s", strict, se.Msg)
				}
				s, err := CompileSchema([]byte(c.doc), SchemaOptions{Tool: "t", Strict: strict, UnknownKeywords: KeywordsIgnore})
				if err != nil {
					t.Fatalf("strict=%v, ignore: %v", strict, err)
				}
				kw := s.UnknownKeywords()
				if len(kw) != 1 || kw[0].Pointer != c.ptr {
					t.Errorf("strict=%v, ignore: UnknownKeywords() = %v, want one at %s", strict, kw, c.ptr)
				}
			}
		})
	}
}

// TestUnknownKeywordsTypoSwitchesCheckOff shows why the compile refuses:
// with the typo ignored, the check it was meant to be is off.
func TestUnknownKeywordsTypoSwitchesCheckOff(t *testing.T) {
	doc := `{"properties": {"n": {"type": "integer", "maxium": 10}, "s": {"type": "string", "minLenght": 3}}, "requird": ["s"]}`
	s, err := CompileSchema([]byte(doc), SchemaOptions{Tool: "t", Strict: true, UnknownKeywords: KeywordsIgnore})
	if err != nil {
		t.Fatal(err)
	}
	if vs := s.Validate(map[string]any{"n": 999.0, "s": ""}); vs != nil {
		t.Fatalf("ignored typos: want the call accepted (the checks are off), got %v", vs)
	}
	if got := len(s.UnknownKeywords()); got != 3 {
		t.Errorf("UnknownKeywords: got %d, want 3: %v", got, s.UnknownKeywords())
	}
	fixed := strings.NewReplacer("maxium", "maximum", "minLenght", "minLength", "requird", "required").Replace(doc)
	s, err = CompileSchema([]byte(fixed), SchemaOptions{Tool: "t", Strict: true})
	if err != nil {
		t.Fatal(err)
	}
	if vs := s.Validate(map[string]any{"n": 999.0, "s": ""}); len(vs) != 2 {
		t.Errorf("spelt right: want 2 violations, got %v", vs)
	}
	_, err = CompileSchema([]byte(doc), SchemaOptions{Tool: "t", Strict: true})
	if err == nil || !strings.Contains(err.Error(), `at /properties/n/maxium: unknown keyword "maxium" (did you mean "maximum"?)`) ||
		!strings.Contains(err.Error(), `also at /properties/s/minLenght: unknown keyword "minLenght" (did you mean "minLength"?)`) ||
		!strings.Contains(err.Error(), `also at /requird: unknown keyword "requird" (did you mean "required"?)`) {
		t.Errorf("want every typo named, got %v", err)
	}
}

// TestUnknownKeywordsAccepted checks what is not an unknown keyword: "x-"
// extensions, every draft's own keywords, annotations, and data (enum,
// const, default, examples values and property names), which is never
// read as a schema.
func TestUnknownKeywordsAccepted(t *testing.T) {
	docs := map[string]string{
		"x- extensions": `{"x-owner": "team", "properties": {"n": {"type": "integer", "x-ui": {"maxium": 1}}}}`,
		"data is not read": `{"properties": {
			"maxium": {"type": "integer", "default": {"maxium": 1}, "examples": [{"requird": 1}]},
			"e": {"enum": [{"minLenght": 1}]}, "c": {"const": {"typo": true}}},
			"dependentRequired": {"maxium": ["e"]}, "required": ["maxium"]}`,
		"2020-12 keywords": `{"$schema": "https://json-schema.org/draft/2020-12/schema", "$id": "https://example.com/s",
			"$comment": "c", "title": "t", "description": "d", "deprecated": false, "readOnly": false, "writeOnly": false,
			"$defs": {"a": {"$anchor": "A", "$dynamicAnchor": "D"}}, "definitions": {"b": {}},
			"type": "object", "properties": {"l": {"prefixItems": [{}], "items": {}, "unevaluatedItems": false,
			"contains": {}, "minContains": 1, "maxContains": 2, "uniqueItems": true, "minItems": 0, "maxItems": 9}},
			"patternProperties": {"^p": {"pattern": "x", "minLength": 1, "maxLength": 2, "format": "email",
			"contentEncoding": "base64", "contentMediaType": "application/json", "contentSchema": {}}},
			"propertyNames": {"maxLength": 9}, "minProperties": 0, "maxProperties": 9, "required": [],
			"dependentRequired": {}, "dependentSchemas": {}, "dependencies": {"a": ["b"], "c": {"minProperties": 1}},
			"if": {}, "then": {}, "else": {}, "allOf": [{}], "anyOf": [{}], "oneOf": [{}], "not": false,
			"unevaluatedProperties": false, "enum": [{}], "const": {}, "multipleOf": 1,
			"minimum": 0, "maximum": 1, "exclusiveMinimum": -1, "exclusiveMaximum": 2, "default": {}, "examples": []}`,
		"draft-07 keywords": `{"$schema": "http://json-schema.org/draft-07/schema#", "$id": "http://example.com/s",
			"definitions": {"a": {"$id": "#a"}}, "$defs": {"b": {}}, "items": [{}], "additionalItems": false,
			"dependencies": {"a": ["b"]}, "contentMediaType": "text/plain", "if": {}, "then": {}, "else": {}}`,
		"draft-04 keywords": `{"$schema": "http://json-schema.org/draft-04/schema#", "id": "http://example.com/s",
			"properties": {"n": {"type": "number", "minimum": 0, "exclusiveMinimum": true}}}`,
		"nested $schema": `{"$defs": {"old": {"$schema": "http://json-schema.org/draft-07/schema#", "$id": "http://example.com/old",
			"items": [{}], "additionalItems": false}}}`,
		"boolean schemas": `{"properties": {"a": true, "b": false}, "items": false}`,
	}
	for name, doc := range docs {
		t.Run(name, func(t *testing.T) {
			s, err := CompileSchema([]byte(doc), SchemaOptions{Tool: "t", Strict: true})
			if err != nil {
				t.Fatal(err)
			}
			if kw := s.UnknownKeywords(); len(kw) != 0 {
				t.Errorf("UnknownKeywords: %v", kw)
			}
		})
	}
	if _, err := CompileSchema([]byte(`true`), SchemaOptions{}); err != nil {
		t.Errorf("true: %v", err)
	}
}

// TestUnknownKeywordsInReferencedFile checks a keyword in a file a $ref
// loads: the error names the file and the pointer in it.
func TestUnknownKeywordsInReferencedFile(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "common.json"), []byte(`{"$defs": {"Range": {"type": "integer", "minimun": 1}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := CompileSchema([]byte(`{"properties": {"r": {"$ref": "common.json#/$defs/Range"}}}`), SchemaOptions{Tool: "t", Strict: true, Dir: dir})
	want := `common.json#/$defs/Range/minimun: unknown keyword "minimun" (did you mean "minimum"?)`
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("got %v, want %s", err, want)
	}
}

// TestUnknownKeywordsMode checks that a mode other than refuse or ignore
// is refused.
func TestUnknownKeywordsMode(t *testing.T) {
	_, err := CompileSchema([]byte(`{}`), SchemaOptions{UnknownKeywords: "warn"})
	if err == nil || !strings.Contains(err.Error(), `unknown_keywords "warn": expected refuse or ignore`) {
		t.Errorf("got %v", err)
	}
}

// TestUnknownKeywordShownBounded checks that a long keyword or place (a
// listed schema's names are outside input) is cut where it is shown.
func TestUnknownKeywordShownBounded(t *testing.T) {
	long := strings.Repeat("k", 10000)
	k := UnknownKeyword{Pointer: "/properties/" + long + "/" + long, Keyword: long}
	if s := k.String(); len(s) > maxPlaceShown+maxKeywordShown+64 || !strings.Contains(s, "…") {
		t.Errorf("String() is %d bytes: %.200s", len(s), s)
	}
}

func TestNearestKeyword(t *testing.T) {
	known := KnownKeywords(2020)
	for in, want := range map[string]string{
		"maxium": "maximum", "minLenght": "minLength", "requird": "required", "propertes": "properties",
		"additionalproperties": "additionalProperties", "MAXIMUM": "maximum", "$def": "$defs", "ref": "$ref",
		"typ": "type", "flavour": "", "x": "", "": "", "exclusiveMax": "",
	} {
		if got := nearestKeyword(in, known); got != want {
			t.Errorf("nearestKeyword(%q) = %q, want %q", in, got, want)
		}
	}
}

// FuzzUnknownKeywords feeds arbitrary JSON to the keyword walker (an MCP
// server's listed schemas reach it): it never panics, every keyword it
// reports is a member of the document at its pointer and not an "x-"
// extension, and CompileSchema refuses a schema exactly when, compiled
// with KeywordsIgnore, it lists unknown keywords.
func FuzzUnknownKeywords(f *testing.F) {
	for _, s := range []string{
		`{"properties": {"n": {"type": "integer", "maxium": 10}, "s": {"minLenght": 3}}, "requird": ["s"]}`,
		`{"$defs": {"a/b": {"items": [{"minimun": 1}], "x-y": {"z": 1}}}, "enum": [{"maxium": 1}]}`,
		`{"$schema": "http://json-schema.org/draft-07/schema#", "definitions": {"d": {"dependentRequired": {}}}, "dependencies": {"a": ["b"], "c": {"nullable": true}}}`,
		`{"allOf": [{"$schema": "http://json-schema.org/draft-04/schema#", "id": "x", "$id": "y"}], "not": {"not": {"typ": 1}}}`,
		`{"properties": {"~0": {"patternProperties": {"^a": {"additionalProperties": {"maxLenght": 1}}}}}}`,
		`true`, `[]`, `{"items": [1, true, {"contains": {"contains": {"prefixItems": [{"minContain": 1}]}}}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		doc, err := decodeJSON(data)
		if err != nil {
			return
		}
		found := findUnknownKeywords(doc, 2020)
		again := findUnknownKeywords(doc, 2020)
		if len(found) != len(again) {
			t.Fatalf("two walks differ: %v, %v", found, again)
		}
		for i, k := range found {
			if k != again[i] {
				t.Fatalf("two walks differ: %v, %v", found, again)
			}
			if strings.HasPrefix(k.Keyword, "x-") {
				t.Fatalf("an extension reported: %v", k)
			}
			parent, last := resolveParent(t, doc, k.Pointer)
			obj, ok := parent.(map[string]any)
			if !ok || last != k.Keyword {
				t.Fatalf("%v: the pointer does not name the keyword in %s", k, data)
			}
			if _, ok := obj[k.Keyword]; !ok {
				t.Fatalf("%v: no such member in %s", k, data)
			}
		}
		if len(data) > 4096 {
			return // compiling is FuzzCompileSchema's business
		}
		s, err := CompileSchema(data, SchemaOptions{Tool: "fuzz", UnknownKeywords: KeywordsIgnore})
		if err != nil {
			return
		}
		_, refErr := CompileSchema(data, SchemaOptions{Tool: "fuzz"})
		switch kw := s.UnknownKeywords(); {
		case len(kw) == 0 && refErr != nil:
			t.Fatalf("no unknown keywords, yet refused: %v", refErr)
		case len(kw) > 0 && (refErr == nil || !strings.Contains(refErr.Error(), kw[0].Message())):
			t.Fatalf("unknown keywords %v, yet: %v", kw, refErr)
		}
	})
}

// resolveParent follows a JSON pointer in doc to the value holding its
// last token, which it returns unescaped.
func resolveParent(t *testing.T, doc any, ptr string) (any, string) {
	t.Helper()
	if !strings.HasPrefix(ptr, "/") {
		t.Fatalf("pointer %q does not start with /", ptr)
	}
	toks := strings.Split(ptr[1:], "/")
	for i := range toks {
		toks[i] = strings.NewReplacer("~1", "/", "~0", "~").Replace(toks[i])
	}
	v := doc
	for _, tok := range toks[:len(toks)-1] {
		switch x := v.(type) {
		case map[string]any:
			v = x[tok]
		case []any:
			n, err := strconv.Atoi(tok)
			if err != nil || n < 0 || n >= len(x) {
				t.Fatalf("pointer %q: bad index %q", ptr, tok)
			}
			v = x[n]
		default:
			t.Fatalf("pointer %q runs into a %T", ptr, v)
		}
	}
	return v, toks[len(toks)-1]
}
