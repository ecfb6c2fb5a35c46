package yamlfile

import (
	"reflect"
	"testing"
)

type server struct {
	Listen  listenSection `yaml:"listen"`
	Tools   []tool        `yaml:"tools"`
	Skipped string        `yaml:"-"`
}

type listenSection struct {
	Forward     string `yaml:"forward"`
	Transparent string `yaml:"transparent"`
}

type tool struct {
	Name     string `yaml:"name"`
	Match    match  `yaml:"match"`
	matchers `yaml:",inline"`
	Timeout  string // no tag: yaml.v3 reads it as "timeout"
}

type match struct {
	Host   string `yaml:"host"`
	Path   string `yaml:"path"`
	Method string `yaml:"method"`
}

type matchers struct {
	MaxBodyBytes int `yaml:"max_body_bytes"`
}

// TestUnknownFieldSuggestion checks that an unknown field's error names
// the nearest known field of its own struct (inlined fields and untagged
// ones included), or lists them when none is close, and keeps the form
// FILE:LINE: field: message.
func TestUnknownFieldSuggestion(t *testing.T) {
	for _, tc := range []struct {
		name, data, want string
	}{
		{"top level", "lisen:\n  forward: a\n", "f.yaml:1: lisen: unknown field; did you mean listen?"},
		{"nested", "listen:\n  forwrd: a\n", "f.yaml:2: listen.forwrd: unknown field; did you mean forward?"},
		{"in a list", "tools:\n  - name: a\n    match:\n      hots: x\n", "f.yaml:4: tools[0].match.hots: unknown field; did you mean host?"},
		{"inlined field", "tools:\n  - maxBodyBytes: 3\n", "f.yaml:2: tools[0].maxBodyBytes: unknown field; did you mean max_body_bytes?"},
		{"untagged field", "tools:\n  - timeot: 3s\n", "f.yaml:2: tools[0].timeot: unknown field; did you mean timeout?"},
		{"none close", "tools:\n  - upstream: x\n", "f.yaml:2: tools[0].upstream: unknown field; expected one of: name, match, max_body_bytes, timeout"},
		{"a skipped field is unknown", "skipped: x\n", "f.yaml:1: skipped: unknown field; expected one of: listen, tools"},
		{"two at once", "listen:\n  forwrd: a\n  transparnt: b\n",
			"f.yaml:2: listen.forwrd: unknown field; did you mean forward?\nf.yaml:3: listen.transparnt: unknown field; did you mean transparent?"},
	} {
		var s server
		err := Decode("f.yaml", []byte(tc.data), &s)
		if err == nil || err.Error() != tc.want {
			t.Errorf("%s: err = %v\nwant %s", tc.name, err, tc.want)
		}
	}
}

// TestUnknownFieldSameTypeName checks that when two struct types share a
// name in yaml.v3's error (as types of two packages named alike do), the
// suggestion comes from the one the field's path leads to.
func TestUnknownFieldSameTypeName(t *testing.T) {
	first := func() reflect.Type {
		type item struct {
			Colour string `yaml:"colour"`
		}
		return reflect.TypeFor[item]()
	}()
	second := func() reflect.Type {
		type item struct {
			Weight int `yaml:"weight"`
		}
		return reflect.TypeFor[item]()
	}()
	if first.String() != second.String() {
		t.Fatalf("the two types are named %s and %s; the test needs one name", first, second)
	}
	doc := reflect.StructOf([]reflect.StructField{
		{Name: "First", Type: first, Tag: `yaml:"first"`},
		{Name: "Second", Type: reflect.SliceOf(second), Tag: `yaml:"second"`},
	})
	for _, tc := range []struct {
		name, data, want string
	}{
		{"first", "first:\n  colur: red\n", "f.yaml:2: first.colur: unknown field; did you mean colour?"},
		{"second", "second:\n  - weight: 1\n  - wieght: 3\n", "f.yaml:3: second[1].wieght: unknown field; did you mean weight?"},
	} {
		err := Decode("f.yaml", []byte(tc.data), reflect.New(doc).Interface())
		if err == nil || err.Error() != tc.want {
			t.Errorf("%s: err = %v\nwant %s", tc.name, err, tc.want)
		}
	}
}

// TestSyntaxErrorLine checks that a syntax error names the line to fix:
// yaml.v3 names the line before it, and for a line indented less than its
// neighbours the line where the enclosing mapping or list starts.
func TestSyntaxErrorLine(t *testing.T) {
	const indent = "; check this line's indentation against the lines above it"
	for _, tc := range []struct {
		name, data, want string
	}{
		{"a key one space short, deep in a tool",
			"listen:\n  forward: a\ntools:\n  - name: t\n    match:\n      host: example.com\n      path: /x\n     method: GET\n",
			"f.yaml:8: did not find expected key" + indent},
		{"a key at its list's level",
			"listen:\n  forward: a\ntools:\n  - name: t\n    match:\n      host: example.com\n  path: /x\n",
			"f.yaml:7: did not find expected '-' indicator" + indent},
		{"a top-level key indented by one",
			"listen:\n  forward: a\n tools:\n  - name: t\n",
			"f.yaml:3: did not find expected key" + indent},
		{"blank lines and a comment before it",
			"listen:\n  forward: a\n\n\n  # the transparent listener\n transparent: b\n",
			"f.yaml:6: did not find expected key" + indent},
		{"a list item one space deeper",
			"tools:\n  - name: a\n    match: {path: /a}\n  - name: b\n     match: {path: /b}\n",
			"f.yaml:5: mapping values are not allowed in this context; is this line indented deeper than the key above it, or does a value hold an unquoted \": \"?"},
		{"a key indented too far",
			"tools:\n  - name: t\n    match:\n      host: example.com\n        path: /x\n",
			"f.yaml:5: mapping values are not allowed in this context; is this line indented deeper than the key above it, or does a value hold an unquoted \": \"?"},
		{"an error on the first line, which yaml.v3 gives no line",
			"name: a: b\n",
			"f.yaml:1: mapping values are not allowed in this context; is this line indented deeper than the key above it, or does a value hold an unquoted \": \"?"},
		{"Windows line ends",
			"listen:\r\n  forward: a\r\ntools:\r\n  - name: t\r\n    match:\r\n      host: example.com\r\n     method: GET\r\n",
			"f.yaml:7: did not find expected key" + indent},
		{"no line end at the end",
			"listen:\n  forward: a\n transparent: b",
			"f.yaml:3: did not find expected key" + indent},
		{"an unclosed flow list",
			"name: a\ntools: [{name: b}\n",
			"f.yaml:2: did not find expected ',' or ']'"},
	} {
		var v any
		err := Decode("f.yaml", []byte(tc.data), &v)
		if err == nil || err.Error() != tc.want {
			t.Errorf("%s: err = %v\nwant %s", tc.name, err, tc.want)
		}
	}
}
