package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/toolgate/toolgate/internal/section"
	"github.com/toolgate/toolgate/policies"
)

// schemaLine is the line of the offending keyword of an inline schema: for
// an error at a field "....schema" that holds a *policies.SchemaError with
// a JSON pointer, the line of the pointer's last member in the field's
// YAML value (the schema written in the file); 0 when err is no such
// error or the pointer leaves the YAML (then the field's own line stands).
func schemaLine(root *yaml.Node, field string, err error) int {
	var se *policies.SchemaError
	if !strings.HasSuffix(field, ".schema") || !errors.As(err, &se) || se.Pointer == "" {
		return 0
	}
	n := fieldNode(root, field)
	if n == nil {
		return 0
	}
	line := 0
	for _, tok := range strings.Split(strings.TrimPrefix(se.Pointer, "/"), "/") {
		tok = strings.NewReplacer("~1", "/", "~0", "~").Replace(tok)
		switch n.Kind {
		case yaml.MappingNode:
			var next *yaml.Node
			for i := 0; i+1 < len(n.Content); i += 2 {
				if n.Content[i].Value == tok {
					line, next = n.Content[i].Line, n.Content[i+1]
					break
				}
			}
			if next == nil {
				return 0
			}
			n = next
		case yaml.SequenceNode:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(n.Content) {
				return 0
			}
			n = n.Content[i]
			line = n.Line
		default:
			return 0
		}
		if n.Kind == yaml.AliasNode {
			return 0 // an anchor's line would point elsewhere
		}
	}
	return line
}

// fieldNode is the value node of a field path such as
// "tools[2].mcp.tools.create_issue.schema" in a decoded YAML document, or
// nil. A map key holding '.' (an MCP tool named "a.b") is matched whole
// where the dotted parts do not match one by one.
func fieldNode(root *yaml.Node, field string) *yaml.Node {
	if root == nil || len(root.Content) == 0 {
		return nil
	}
	parts := strings.Split(strings.NewReplacer("[", ".[", "]", "").Replace(field), ".")
	n := root.Content[0]
	for i := 0; i < len(parts); i++ {
		part := parts[i]
		if part == "" {
			continue
		}
		if idx, ok := strings.CutPrefix(part, "["); ok {
			j, err := strconv.Atoi(idx)
			if n.Kind != yaml.SequenceNode || err != nil || j < 0 || j >= len(n.Content) {
				return nil
			}
			n = n.Content[j]
			continue
		}
		if n.Kind != yaml.MappingNode {
			return nil
		}
		var next *yaml.Node
		for k := 0; k+1 < len(n.Content) && next == nil; k += 2 {
			key := n.Content[k].Value
			// The longest run of parts that the key spells.
			for end := len(parts); end > i; end-- {
				if key == strings.Join(parts[i:end], ".") {
					next, i = n.Content[k+1], end-1
					break
				}
			}
		}
		if next == nil {
			return nil
		}
		n = next
	}
	return n
}

// schemaFileLine is, for an error at a field "....schema_file" that holds a
// *policies.SchemaError with a JSON pointer, the schema file as the field
// names it and the line of the pointer's last member in that file (read
// relative to dir, at most policies.MaxSchemaFileBytes); line 0 when err is
// no such error or the line is not found.
func schemaFileLine(root *yaml.Node, dir, field string, err error) (file string, line int) {
	var se *policies.SchemaError
	if !strings.HasSuffix(field, ".schema_file") || !errors.As(err, &se) || se.Pointer == "" {
		return "", 0
	}
	n := fieldNode(root, field)
	if n == nil || n.Kind != yaml.ScalarNode || n.Value == "" {
		return "", 0
	}
	f, oerr := os.Open(section.Resolve(dir, n.Value))
	if oerr != nil {
		return "", 0
	}
	defer f.Close()
	data, rerr := io.ReadAll(io.LimitReader(f, policies.MaxSchemaFileBytes))
	if rerr != nil {
		return "", 0
	}
	return n.Value, jsonPointerLine(data, se.Pointer)
}

// withSchemaFileLine puts "FILE:LINE: " before the message of err, a
// *section.Error, keeping its field; any other error is returned as is.
func withSchemaFileLine(err error, file string, line int) error {
	fe, ok := err.(*section.Error)
	if !ok {
		return err
	}
	return &section.Error{Path: fe.Path, Err: fmt.Errorf("%s:%d: %w", file, line, fe.Err)}
}

// jsonPointerLine is the line of the member a JSON pointer names (its name's
// line) in a JSON document, or 0 when the pointer names none (or the root).
func jsonPointerLine(data []byte, ptr string) int {
	if !strings.HasPrefix(ptr, "/") {
		return 0
	}
	toks := strings.Split(ptr[1:], "/")
	for i := range toks {
		toks[i] = strings.NewReplacer("~1", "/", "~0", "~").Replace(toks[i])
	}
	type frame struct {
		arr     bool
		idx     int    // the element being read, in an array
		key     string // the member being read, in an object
		wantKey bool   // an object's next token is a member name
	}
	var stack []frame
	// value notes that a value starts in the container on top.
	value := func() {
		if len(stack) == 0 {
			return
		}
		top := &stack[len(stack)-1]
		if top.arr {
			top.idx++
		} else {
			top.wantKey = true
		}
	}
	// at reports whether the containers below the top one lead along toks.
	at := func() bool {
		if len(stack) != len(toks) {
			return false
		}
		for i, f := range stack[:len(stack)-1] {
			if (f.arr && strconv.Itoa(f.idx) != toks[i]) || (!f.arr && f.key != toks[i]) {
				return false
			}
		}
		return true
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	for {
		tok, err := dec.Token()
		if err != nil {
			return 0
		}
		if len(stack) > 0 && !stack[len(stack)-1].arr && stack[len(stack)-1].wantKey {
			if key, ok := tok.(string); ok {
				top := &stack[len(stack)-1]
				top.key, top.wantKey = key, false
				if key == toks[len(toks)-1] && at() {
					return bytes.Count(data[:dec.InputOffset()], []byte("\n")) + 1
				}
				continue
			}
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			value()
			stack = append(stack, frame{arr: tok == json.Delim('['), idx: -1, wantKey: tok == json.Delim('{')})
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
		default:
			value()
		}
	}
}
