package config

import (
	"bytes"
	"testing"
)

// TestJSONPointerLine checks the line found for a JSON pointer in a schema
// file: the line of the member's name, through objects, arrays and escaped
// names; 0 for a pointer that names nothing.
func TestJSONPointerLine(t *testing.T) {
	doc := []byte(`{
  "type": "object",
  "properties": {
    "a/b": {"maxium": 1},
    "l": {"prefixItems": [
      {"type": "string"},
      {"minimun": 1}
    ]},
    "n": {
      "type": "integer",
      "maxium": 10
    }
  },
  "maxium": "top"
}`)
	for ptr, want := range map[string]int{
		"/properties/n/maxium":                11,
		"/maxium":                             14,
		"/properties/a~1b/maxium":             4,
		"/properties/l/prefixItems/1/minimun": 7,
		"/properties":                         3,
		"/properties/x":                       0,
		"/properties/l/prefixItems/5/minimun": 0,
		"":                                    0,
	} {
		if got := jsonPointerLine(doc, ptr); got != want {
			t.Errorf("jsonPointerLine(%q) = %d, want %d", ptr, got, want)
		}
	}
}

// FuzzJSONPointerLine feeds arbitrary documents and pointers: it never
// panics, and a line it finds is within the document.
func FuzzJSONPointerLine(f *testing.F) {
	f.Add([]byte(`{"a": [{"b": 1}, {"c": {"d": 2}}]}`), "/a/1/c/d")
	f.Add([]byte("{\n\"x\": {\"y\": [1, 2, {\"z\": null}]}\n}"), "/x/y/2/z")
	f.Add([]byte(`[[[]]]`), "/0/0")
	f.Add([]byte(`{"~": {"/": 1}}`), "/~0/~1")
	f.Fuzz(func(t *testing.T, doc []byte, ptr string) {
		line := jsonPointerLine(doc, ptr)
		if line < 0 || line > bytes.Count(doc, []byte("\n"))+1 {
			t.Fatalf("line %d outside the document", line)
		}
		if ptr == "" && line != 0 {
			t.Fatalf("line %d for the root pointer", line)
		}
	})
}
