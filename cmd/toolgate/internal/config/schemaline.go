package config

import (
	"errors"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

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
