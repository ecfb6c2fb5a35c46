package policies

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"

	"github.com/toolgate/toolgate/internal/jsonenc"
)

// MaxDecisionBytes bounds a decision document handed over as bytes (by a
// WASM module): a larger one is refused, never read.
const MaxDecisionBytes = 1 << 20

// ErrDecisionTooLarge is returned by DecodeResult for a document over
// MaxDecisionBytes.
var ErrDecisionTooLarge = errors.New("decision larger than 1 MiB")

// DecodeResult reads a decision document from JSON bytes, as a WASM policy
// returns it: {"deny": [...], "allow": bool, "inject": {...}}, every key
// optional, nothing after the document. It applies the same rules as Rego
// decisions.
func DecodeResult(data []byte) (Result, error) {
	if len(data) > MaxDecisionBytes {
		return Result{}, ErrDecisionTooLarge
	}
	// json.Unmarshal refuses data after the document and, unlike a
	// Decoder, allocates no read buffer: this runs on every WASM decision.
	// Numbers decode as float64, which only ever reach an error message.
	var doc any
	if err := json.Unmarshal(data, &doc); err != nil {
		return Result{}, fmt.Errorf("decision is not JSON: %w", err)
	}
	m, ok := doc.(map[string]any)
	if !ok {
		return Result{}, fmt.Errorf("decision must be an object, got %s", JSONTypeName(doc))
	}
	return DecodeDecision(m)
}

// AppendJSON appends the input document as JSON to dst: the same document
// Rego policies see as input, object keys sorted, invalid UTF-8 replaced by
// U+FFFD. It fails only on an argument value that is not JSON-shaped (a
// channel, a NaN, an invalid json.Number).
func (in *Input) AppendJSON(dst []byte) ([]byte, error) {
	dst = append(dst, `{"tool":`...)
	dst = jsonenc.AppendString(dst, in.Tool)
	dst = append(dst, `,"arguments":`...)
	var err error
	if in.Arguments == nil {
		dst = append(dst, "{}"...)
	} else if dst, err = appendJSONObject(dst, in.Arguments, 0); err != nil {
		return dst, err
	}
	r := &in.Request
	dst = append(dst, `,"request":{"method":`...)
	dst = jsonenc.AppendString(dst, r.Method)
	dst = append(dst, `,"host":`...)
	dst = jsonenc.AppendString(dst, r.Host)
	dst = append(dst, `,"path":`...)
	dst = jsonenc.AppendString(dst, r.Path)
	dst = append(dst, `,"path_vars":`...)
	dst = appendStringMap(dst, r.PathVars)
	dst = append(dst, `,"query":{`...)
	for i, k := range slices.Sorted(maps.Keys(r.Query)) {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = jsonenc.AppendString(dst, k)
		dst = append(dst, ":["...)
		for j, v := range r.Query[k] {
			if j > 0 {
				dst = append(dst, ',')
			}
			dst = jsonenc.AppendString(dst, v)
		}
		dst = append(dst, ']')
	}
	dst = append(dst, `},"headers":`...)
	dst = appendStringMap(dst, r.Headers)
	dst = append(dst, `},"caller":{"agent":`...)
	dst = jsonenc.AppendString(dst, in.Caller.Agent)
	dst = append(dst, `,"session":`...)
	dst = jsonenc.AppendString(dst, in.Caller.Session)
	dst = append(dst, `},"trace_id":`...)
	dst = jsonenc.AppendString(dst, in.TraceID)
	dst = append(dst, `,"protocol":`...)
	dst = jsonenc.AppendString(dst, in.Protocol)
	dst = append(dst, `,"server":`...)
	dst = jsonenc.AppendString(dst, in.Server)
	dst = append(dst, `,"tool_annotations":`...)
	dst, err = appendJSONValue(dst, in.Annotations(), 1)
	if err != nil {
		return nil, err
	}
	dst = append(dst, `,"budget":`...)
	dst, err = appendJSONValue(dst, in.Budgets(), 1)
	if err != nil {
		return nil, err
	}
	if a := in.Answer; a != nil {
		dst = append(dst, `,"answer":{"status":`...)
		dst = strconv.AppendInt(dst, int64(a.Status), 10)
		dst = append(dst, `,"headers":`...)
		dst = appendStringMap(dst, a.Headers)
		dst = append(dst, `,"body":`...)
		if dst, err = appendJSONValue(dst, a.Body, 1); err != nil {
			return nil, err
		}
		dst = append(dst, '}')
	}
	return append(dst, '}'), nil
}

// MaxInputDepth bounds the nesting AppendJSON follows.
const MaxInputDepth = 1000

func appendJSONValue(dst []byte, v any, depth int) ([]byte, error) {
	switch x := v.(type) {
	case nil:
		return append(dst, "null"...), nil
	case bool:
		return strconv.AppendBool(dst, x), nil
	case string:
		return jsonenc.AppendString(dst, x), nil
	case json.Number:
		if !isJSONNumber(string(x)) {
			return dst, fmt.Errorf("argument holds an invalid number %q", shorten(string(x)))
		}
		return append(dst, x...), nil
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return dst, errors.New("argument holds a number JSON cannot encode")
		}
		return strconv.AppendFloat(dst, x, 'g', -1, 64), nil
	case int:
		return strconv.AppendInt(dst, int64(x), 10), nil
	case int64:
		return strconv.AppendInt(dst, x, 10), nil
	case []any:
		if depth >= MaxInputDepth {
			return dst, errors.New("arguments nested too deeply")
		}
		dst = append(dst, '[')
		for i, e := range x {
			if i > 0 {
				dst = append(dst, ',')
			}
			var err error
			if dst, err = appendJSONValue(dst, e, depth+1); err != nil {
				return dst, err
			}
		}
		return append(dst, ']'), nil
	case map[string]any:
		if depth >= MaxInputDepth {
			return dst, errors.New("arguments nested too deeply")
		}
		return appendJSONObject(dst, x, depth+1)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return dst, fmt.Errorf("argument is not JSON: %w", err)
	}
	return append(dst, b...), nil
}

func appendJSONObject(dst []byte, m map[string]any, depth int) ([]byte, error) {
	dst = append(dst, '{')
	for i, k := range slices.Sorted(maps.Keys(m)) {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = jsonenc.AppendString(dst, k)
		dst = append(dst, ':')
		var err error
		if dst, err = appendJSONValue(dst, m[k], depth); err != nil {
			return dst, err
		}
	}
	return append(dst, '}'), nil
}

func appendStringMap(dst []byte, m map[string]string) []byte {
	dst = append(dst, '{')
	for i, k := range slices.Sorted(maps.Keys(m)) {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = jsonenc.AppendString(dst, k)
		dst = append(dst, ':')
		dst = jsonenc.AppendString(dst, m[k])
	}
	return append(dst, '}')
}

// isJSONNumber reports whether s is a number in JSON's grammar.
func isJSONNumber(s string) bool {
	i := 0
	if i < len(s) && s[i] == '-' {
		i++
	}
	switch {
	case i < len(s) && s[i] == '0':
		i++
	case i < len(s) && s[i] >= '1' && s[i] <= '9':
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
	default:
		return false
	}
	if i < len(s) && s[i] == '.' {
		i++
		d := i
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		if i == d {
			return false
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		d := i
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		if i == d {
			return false
		}
	}
	return i == len(s)
}

func shorten(s string) string {
	if len(s) > 16 {
		return s[:16] + "..."
	}
	return s
}
