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
