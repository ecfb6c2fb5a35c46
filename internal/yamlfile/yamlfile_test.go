package yamlfile

import (
	"bytes"
	"errors"
	"io"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

type doc struct {
	Name  string    `yaml:"name"`
	Tools []docTool `yaml:"tools"`
}

type docTool struct {
	Path string `yaml:"path"`
	Max  int    `yaml:"max"`
}

// TestDecode checks what Decode reports, each error naming the file, the
// line and the field by its path, never a Go type.
func TestDecode(t *testing.T) {
	for _, tc := range []struct {
		name, data, want string
	}{
		{"unknown field", "name: a\ntools:\n  - pth: /x\n", "f.yaml:3: tools[0].pth: unknown field"},
		{"wrong type", "tools:\n  - max: many\n", "f.yaml:2: tools[0].max: expected an integer, got a string"},
		{"two documents", "name: a\n---\nname: b\n", "f.yaml:2: the file holds more than one YAML document"},
		{"syntax", "name: [a\n", "f.yaml:"},
	} {
		var d doc
		err := Decode("f.yaml", []byte(tc.data), &d)
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) || strings.Contains(err.Error(), "docTool") {
			t.Errorf("%s: err = %v, want one starting %q", tc.name, err, tc.want)
		}
	}
	var d doc
	if err := Decode("f.yaml", nil, &d); !errors.Is(err, io.EOF) {
		t.Errorf("empty file: err = %v, want io.EOF", err)
	}
	if err := Decode("f.yaml", []byte("name: a\ntools:\n  - {path: /p, max: 3}\n"), &d); err != nil || d.Name != "a" || d.Tools[0].Max != 3 {
		t.Errorf("valid file: %v, %+v", err, d)
	}
}

// TestLineOf checks the line of a field path, and the deepest ancestor's
// line for a path the file lacks.
func TestLineOf(t *testing.T) {
	var root yaml.Node
	if err := yaml.Unmarshal([]byte("name: a\ntools:\n  - path: /x\n    max: 3\n  - path: /y\n"), &root); err != nil {
		t.Fatal(err)
	}
	for field, want := range map[string]int{
		"name": 1, "tools": 2, "tools[0].max": 4, "tools[1].path": 5,
		"tools[1].missing": 5, "tools[7]": 2, "": 0,
	} {
		if got := LineOf(&root, field); got != want {
			t.Errorf("LineOf(%q) = %d, want %d", field, got, want)
		}
	}
}

// FuzzDecode feeds Decode arbitrary bytes: it never panics, every error
// but io.EOF names the file, and a line it names is one of the file's.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{"", "name: a\n", "tools:\n  - pth: /x\n", "tools:\n  - max: x\n", "a: &a [*a, *a]\n", "---\n---\n", "name: [\n",
		"name: a\ntools:\n  - path: /x\n   max: 3\n", "name: a\n tools: []\n", "tools:\n  - path: /x\n  max: 3\n", "name: a: b", "tools:\r\n  - pth: /x\r\n"} {
		f.Add([]byte(s))
	}
	lineRE := regexp.MustCompile(`^f\.yaml:(\d+):`)
	f.Fuzz(func(t *testing.T, data []byte) {
		var d doc
		err := Decode("f.yaml", data, &d)
		if err == nil || errors.Is(err, io.EOF) {
			return
		}
		if !strings.HasPrefix(err.Error(), "f.yaml") {
			t.Errorf("error %q does not name the file", err)
		}
		utf16 := bytes.HasPrefix(data, []byte{0xfe, 0xff}) || bytes.HasPrefix(data, []byte{0xff, 0xfe}) // its lines are not counted in bytes
		if m := lineRE.FindStringSubmatch(err.Error()); m != nil && !utf16 {
			// Every line break YAML counts, "\r\n" as two (an upper bound).
			breaks := 0
			for _, b := range [][]byte{[]byte("\n"), []byte("\r"), []byte("\u0085"), []byte("\u2028"), []byte("\u2029")} {
				breaks += bytes.Count(data, b)
			}
			if n, _ := strconv.Atoi(m[1]); n < 1 || n > breaks+1 {
				t.Errorf("error %q names a line the file of %d line breaks lacks", err, breaks)
			}
		}
	})
}
