// Package mcppin pins MCP tool definitions: the digest of each tool a
// server lists (its name, title, description, input and output schemas,
// annotations, execution, icons and _meta) is pinned the first time it is
// seen, or loaded from a lock file that `toolgate mcp pin` writes from a
// live server, and a later listing that differs is reported as a change
// with the names of the fields that changed (never their values), so that
// a changed tool is refused, hidden, sent for approval or recorded, as the
// route's Mode says, until an operator accepts it.
//
// The package is a leaf: it imports the standard library and toolgate's
// internal helpers only, never proxy, so the data path and the command
// line share one digest.
package mcppin

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/toolgate/toolgate/internal/canonjson"
)

// The fields of a tool definition, as the MCP specification names them
// (schema.ts, Tool, 2024-11-05 to 2026-07-28). Each has its own digest, so
// a change names the fields it touched.
const (
	FieldName         = "name"
	FieldTitle        = "title"
	FieldDescription  = "description"
	FieldInputSchema  = "inputSchema"
	FieldOutputSchema = "outputSchema"
	FieldAnnotations  = "annotations"
	// FieldExecution is execution (2025-11-25: taskSupport), which changes
	// how a client calls the tool (as a task, or not at all without one).
	FieldExecution = "execution"
	// FieldIcons is icons (2025-11-25): URLs a client fetches and shows.
	FieldIcons = "icons"
	// FieldMeta is _meta: extensions that hosts act on (an MCP Apps
	// ui/resourceUri a host renders, an output template).
	FieldMeta = "_meta"
	// FieldOther stands for every member the specification does not name:
	// they are digested together, so a server cannot put a value into an
	// event by naming a member after it.
	FieldOther = "other"
)

// Fields lists the fields a Definition digests, in the order Diff reports
// them.
var Fields = []string{FieldName, FieldTitle, FieldDescription, FieldInputSchema, FieldOutputSchema,
	FieldAnnotations, FieldExecution, FieldIcons, FieldMeta, FieldOther}

// digestVersion starts the text a definition's digest is taken over, so a
// later canonical form can never collide with this one.
const digestVersion = "toolgate-mcp-tool-pin.v1"

// Definition is the digest of one tool definition. It is a plain value;
// it holds no part of the definition but its name, so it may be shown
// (the admin API, events) without showing what the server wrote.
type Definition struct {
	// Name is the tool's name (the name member, when it is a string).
	Name string `json:"name"`
	// Digest is the SHA-256 (lower-case hex) over the field digests: two
	// definitions with equal digests are equal in every field.
	Digest string `json:"digest"`
	// Fields maps each field the definition has (a member present, null
	// included) to the SHA-256 (hex) of its canonical JSON; a field the
	// definition lacks is absent.
	Fields map[string]string `json:"fields,omitempty"`
}

// Digest returns the digest of one tool definition, an object as
// encoding/json decodes it into an any (numbers as json.Number or
// float64). The canonical form is internal/canonjson's (RFC 8785 in
// spirit): members in one order, no insignificant white space, strings by
// their characters whatever their escapes, numbers by their exact decimal
// value (100, 100.0 and 1e2 are one number to every JSON Schema validator;
// 12345678901234567891 and 12345678901234567890 stay two). A null member is
// present (it differs from an absent one).
func Digest(tool map[string]any) Definition {
	d := Definition{Fields: make(map[string]string, len(Fields))}
	if name, ok := tool[FieldName].(string); ok {
		d.Name = name
	}
	var other map[string]any
	var buf []byte
	for k, v := range tool {
		if !slices.Contains(Fields[:len(Fields)-1], k) {
			if other == nil {
				other = map[string]any{}
			}
			other[k] = v
			continue
		}
		buf = canonjson.Append(buf[:0], v)
		d.Fields[k] = sum(buf)
	}
	if other != nil {
		d.Fields[FieldOther] = sum(canonjson.Append(buf[:0], other))
	}
	d.Digest = d.fieldsDigest()
	return d
}

// fieldsDigest is the digest over the field digests, each field written as
// name=digest in Fields order.
func (d Definition) fieldsDigest() string {
	h := sha256.New()
	io.WriteString(h, digestVersion)
	for _, f := range Fields {
		if s, ok := d.Fields[f]; ok {
			fmt.Fprintf(h, "|%s=%s", f, s)
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

func sum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// Diff returns the fields whose digests differ between two definitions
// (changed, added or removed), in Fields order; nil when they are equal.
// It names fields, never values.
func Diff(old, new Definition) []string {
	var out []string
	for _, f := range Fields {
		o, okO := old.Fields[f]
		n, okN := new.Fields[f]
		if okO != okN || o != n {
			out = append(out, f)
		}
	}
	return out
}

// MaxToolName bounds a tool's name, in bytes: a longer name is not pinned
// (Observe: StateUnpinned; Lock.Merge: skipped). The specification asks
// for at most 128 characters; this leaves room for servers that stretch it.
const MaxToolName = 512

// MaxDepth bounds how deep the arrays and objects of a tools/list result
// nest for ParseTools. It is encoding/json's own bound, so every list the
// proxy's readers decode is pinned too: a list the pins could not read
// would be refused whole (a schema too deep to check is the schema
// checks' to judge, per tool). The walk is iterative and the result is
// already bounded by the route's mcp.max_message_bytes.
const MaxDepth = 10000

// ParseTools reads the tools of one tools/list result (the JSON-RPC
// result object) strictly: each tool an object, decoded with numbers as
// json.Number. A result whose JSON is invalid, nests deeper than MaxDepth,
// or holds an object that names a member twice is refused
// (ErrMalformedList, ErrDuplicateName): readers disagree on which of two
// members counts, so a server could show a client one definition and
// toolgate another. A tool that is not an object, or has no string name,
// is kept (its digest says so); callers key by Definition.Name.
func ParseTools(result []byte) (tools []map[string]any, nextCursor string, err error) {
	if err := checkNames(result); err != nil {
		return nil, "", err
	}
	var res struct {
		Tools      []json.RawMessage `json:"tools"`
		NextCursor string            `json:"nextCursor"`
	}
	if err := json.Unmarshal(result, &res); err != nil {
		return nil, "", fmt.Errorf("%w: %v", ErrMalformedList, err)
	}
	tools = make([]map[string]any, 0, len(res.Tools))
	for i, raw := range res.Tools {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		var t map[string]any
		if err := dec.Decode(&t); err != nil || t == nil {
			return nil, "", fmt.Errorf("%w: tools[%d] is not an object", ErrMalformedList, i)
		}
		tools = append(tools, t)
	}
	return tools, res.NextCursor, nil
}

// checkNames walks a JSON text's tokens: it must be one valid value, nest at
// most MaxDepth deep, and name no member twice in one object.
func checkNames(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	type frame struct {
		object bool
		names  map[string]struct{}
		key    bool // the next token of an object is a member name
	}
	var stack []frame
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			if len(stack) != 0 {
				return fmt.Errorf("%w: the JSON ends early", ErrMalformedList)
			}
			return nil
		}
		if err != nil {
			return fmt.Errorf("%w: %v", ErrMalformedList, err)
		}
		if n := len(stack); n > 0 && stack[n-1].object {
			top := &stack[n-1]
			if top.key {
				if name, ok := tok.(string); ok {
					if _, dup := top.names[name]; dup {
						return fmt.Errorf("%w (%d levels deep)", ErrDuplicateName, n)
					}
					top.names[name] = struct{}{}
					top.key = false
					continue
				}
			} else {
				top.key = true
			}
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			if len(stack) >= MaxDepth {
				return fmt.Errorf("%w: nested deeper than %d levels", ErrMalformedList, MaxDepth)
			}
			obj := tok == json.Delim('{')
			f := frame{object: obj, key: obj}
			if obj {
				f.names = map[string]struct{}{}
			}
			stack = append(stack, f)
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
			if n := len(stack); n > 0 && stack[n-1].object {
				stack[n-1].key = true
			}
		}
		if len(stack) == 0 && dec.More() {
			return fmt.Errorf("%w: more than one JSON value", ErrMalformedList)
		}
	}
}

// fieldList writes fields for a message: "inputSchema, description".
func fieldList(fields []string) string { return strings.Join(fields, ", ") }
