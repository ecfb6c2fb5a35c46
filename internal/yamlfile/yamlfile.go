// Package yamlfile reads toolgate's YAML files (the configuration, policy
// case files) strictly, one document each, with errors that name the file,
// the line and the field by its path ("tools[2].match.path"), never a Go
// type.
package yamlfile

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"reflect"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Decode decodes the one YAML document of a file strictly (unknown keys
// are errors) into v. Errors name the file and line; an empty file returns
// io.EOF.
func Decode(path string, data []byte, v any) error {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(v); err != nil {
		if errors.Is(err, io.EOF) {
			return err
		}
		return yamlError(path, data, err, reflect.TypeOf(v))
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		if extra.Line > 0 {
			return fmt.Errorf("%s:%d: the file holds more than one YAML document", path, extra.Line)
		}
		return fmt.Errorf("%s: the file holds more than one YAML document", path)
	}
	return nil
}

// yamlError rewrites a decoding error as FILE:LINE: message lines; t is
// the type decoded into, whose fields an unknown field's "did you mean"
// is chosen from.
func yamlError(path string, data []byte, err error, t reflect.Type) error {
	var te *yaml.TypeError
	if errors.As(err, &te) {
		var root yaml.Node
		_ = yaml.Unmarshal(data, &root)
		msgs := make([]string, len(te.Errors))
		for i, m := range te.Errors {
			msgs[i] = path + ":" + typeErrorText(&root, t, m)
		}
		return errors.New(strings.Join(msgs, "\n"))
	}
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	reported := 0
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		reported, _ = strconv.Atoi(m[1])
		msg = msg[len(m[0]):]
	}
	msg += syntaxHints[msg]
	if line := syntaxLine(data, err, reported); line > 0 {
		return fmt.Errorf("%s:%d: %s", path, line, msg)
	}
	return fmt.Errorf("%s: %s", path, msg)
}

// syntaxHints say what usually causes a syntax error yaml.v3 reports
// in words that do not: the first two come from a line indented less than
// the keys or list items above it (and more than those of the level it
// would close), the last from one indented more than the key above it.
var syntaxHints = map[string]string{
	"did not find expected key":                      "; check this line's indentation against the lines above it",
	"did not find expected '-' indicator":            "; check this line's indentation against the lines above it",
	"mapping values are not allowed in this context": "; is this line indented deeper than the key above it, or does a value hold an unquoted \": \"?",
}

// syntaxLine returns the line of the syntax error err, which yaml.v3
// reported at line reported (0 when it named none). That number is not
// the line to fix: for an error of its parser (rather than its scanner)
// yaml.v3 gives the line before the one it means, and that one is where
// the mapping or list holding the problem starts, not where the problem
// is (a line indented one space too few, many lines below). The line of
// the problem is the first whose inclusion makes the file fail as a whole
// fails: the first line L such that the file cut after L fails with the
// same error, same reported line included. It is found by bisection (each
// step parses a prefix; an error only, so cost matters little). A line
// no prefix explains (the error is not a syntax error) leaves reported
// as it is.
func syntaxLine(data []byte, err error, reported int) int {
	ends := lineEnds(data)
	fails := func(l int) bool { // the file cut after line l fails as the whole does
		var n yaml.Node
		e := yaml.NewDecoder(bytes.NewReader(data[:ends[l-1]])).Decode(&n)
		return e != nil && e.Error() == err.Error()
	}
	lo, hi := max(reported, 1), len(ends)
	if lo > hi || !fails(hi) {
		return reported
	}
	for lo < hi {
		if mid := lo + (hi-lo)/2; fails(mid) {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return lo
}

// lineEnds returns the offset just past each line of data: its line end
// ("\n", "\r\n" or a lone "\r", as YAML counts lines), or the end of data
// for a last line without one.
func lineEnds(data []byte) []int {
	var ends []int
	for i, b := range data {
		if b == '\n' || b == '\r' && (i+1 == len(data) || data[i+1] != '\n') {
			ends = append(ends, i+1)
		}
	}
	if len(data) > 0 && data[len(data)-1] != '\n' && data[len(data)-1] != '\r' {
		ends = append(ends, len(data))
	}
	return ends
}

var (
	yamlLine      = regexp.MustCompile(`^line (\d+): `)
	unknownField  = regexp.MustCompile(`^line (\d+): field (\S+) not found in type (\S+)$`)
	wrongType     = regexp.MustCompile(`^line (\d+): cannot unmarshal !!(\w+) .* into (\S+)$`)
	yamlTypeNames = map[string]string{"str": "a string", "int": "an integer", "float": "a number", "bool": "a boolean",
		"map": "a mapping", "seq": "a list", "null": "null", "timestamp": "a timestamp"}
)

// typeErrorText rewrites one of yaml.v3's decoding errors ("line 7: field
// pth not found in type proxy.MatchConfig") as "7: tools[0].match.pth:
// unknown field; did you mean path?", naming the field by its path and
// leaving Go types out; t is the type decoded into.
func typeErrorText(root *yaml.Node, t reflect.Type, m string) string {
	if g := unknownField.FindStringSubmatch(m); g != nil {
		line, _ := strconv.Atoi(g[1])
		field := fieldAt(root, line, g[2])
		return g[1] + ": " + field + ": unknown field" + didYouMean(g[2], knownFields(t, g[3], field))
	}
	if g := wrongType.FindStringSubmatch(m); g != nil {
		line, _ := strconv.Atoi(g[1])
		got := yamlTypeNames[g[2]]
		if got == "" {
			got = g[2]
		}
		return g[1] + ": " + fieldAt(root, line, "") + ": expected " + goTypeWords(g[3]) + ", got " + got
	}
	return strings.TrimPrefix(m, "line ")
}

// goTypeWords names a Go type the way a configuration author thinks of it.
func goTypeWords(t string) string {
	switch {
	case t == "time.Duration":
		return "a duration such as 30s or 250ms"
	case strings.HasPrefix(t, "int"), strings.HasPrefix(t, "uint"):
		return "an integer"
	case strings.HasPrefix(t, "float"):
		return "a number"
	case t == "bool":
		return "true or false"
	case t == "string":
		return "a string"
	case strings.HasPrefix(t, "[]"):
		return "a list"
	}
	return "a mapping"
}

// fieldAt finds the dotted path of the key (or value) at line; name, when
// given, is the key expected there. It falls back to name alone.
func fieldAt(root *yaml.Node, line int, name string) string {
	var found string
	var walk func(n *yaml.Node, path string)
	walk = func(n *yaml.Node, path string) {
		if found != "" || n == nil {
			return
		}
		switch n.Kind {
		case yaml.DocumentNode:
			for _, c := range n.Content {
				walk(c, path)
			}
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				k, v := n.Content[i], n.Content[i+1]
				p := k.Value
				if path != "" {
					p = path + "." + k.Value
				}
				if k.Line == line && (name == "" || k.Value == name) {
					found = p
					return
				}
				walk(v, p)
			}
		case yaml.SequenceNode:
			for i, c := range n.Content {
				p := fmt.Sprintf("%s[%d]", path, i)
				if c.Line == line && c.Kind == yaml.ScalarNode && name == "" {
					found = p
					return
				}
				walk(c, p)
			}
		}
	}
	walk(root, "")
	if found == "" {
		return name
	}
	return found
}

// LineOf finds the line of a field path such as "tools[2].match.path" in a
// decoded YAML document, falling back to the deepest ancestor found.
func LineOf(root *yaml.Node, field string) int {
	if root == nil || len(root.Content) == 0 {
		return 0
	}
	n := root.Content[0]
	line := n.Line
	if field == "" {
		return 0
	}
	for _, part := range splitField(field) {
		if idx, err := strconv.Atoi(part); err == nil && n.Kind == yaml.SequenceNode {
			if idx < 0 || idx >= len(n.Content) {
				return line
			}
			n = n.Content[idx]
			line = n.Line
			continue
		}
		if n.Kind != yaml.MappingNode {
			return line
		}
		found := false
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == part {
				line = n.Content[i].Line
				n = n.Content[i+1]
				found = true
				break
			}
		}
		if !found {
			return line
		}
	}
	return line
}

// splitField splits "tools[2].match.path" into tools, 2, match, path.
func splitField(field string) []string {
	field = strings.NewReplacer("[", ".", "]", "").Replace(field)
	return strings.Split(field, ".")
}
