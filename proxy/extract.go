package proxy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"sort"

	"github.com/toolgate/toolgate/bucketing"
	"github.com/toolgate/toolgate/policies"
)

var pathUnescape = url.PathUnescape

// readBody reads the whole body if it is at most limit bytes, reading one
// byte more than the limit to detect a larger one. A declared Content-Length
// over the limit is refused before anything is read.
func readBody(r *http.Request, limit int64) ([]byte, error) {
	if r.Body == nil || r.Body == http.NoBody {
		return nil, nil
	}
	if r.ContentLength > limit {
		return nil, errBodyTooLarge
	}
	size := r.ContentLength
	if size < 0 || size > 64<<10 {
		size = 4 << 10
	}
	buf := bytes.NewBuffer(make([]byte, 0, size+1))
	n, err := buf.ReadFrom(io.LimitReader(r.Body, limit+1))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errClientBody, err)
	}
	if n > limit {
		return nil, errBodyTooLarge
	}
	return buf.Bytes(), nil
}

// bodyKind says how a body carries arguments, by its Content-Type.
func bodyKind(r *http.Request) sourceSet {
	ct := r.Header.Get("Content-Type")
	if ct == "" {
		return 0
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return 0
	}
	switch {
	case mt == "application/json" || (len(mt) > 5 && mt[len(mt)-5:] == "+json"):
		return bitJSON
	case mt == "application/x-www-form-urlencoded":
		return bitForm
	}
	return 0
}

// extractArgs collects a call's arguments from the sources the tool names
// (or, by default, path variables, the query string and a JSON or form body)
// into one object. Values from string-only sources are coerced where the
// schema asks for numbers, booleans or arrays. A refusal is returned for a
// malformed body or query, or a name given by two sources.
func extractArgs(t *tool, r *http.Request, vars map[string]string, body []byte) (map[string]any, *refusal) {
	src := t.sources
	if src == 0 {
		src = bitPath | bitQuery | bodyKind(r)
	}
	args := make(map[string]any, 8)
	var strs map[string]any // values from string-only sources, coerced together
	var dups []string
	put := func(dst map[string]any, k string, v any) {
		if _, dup := dst[k]; dup {
			dups = append(dups, k)
			return
		}
		dst[k] = v
	}
	if src&(bitPath|bitQuery|bitForm) != 0 {
		strs = make(map[string]any, 8)
	}
	if src&bitPath != 0 {
		for k, v := range vars {
			put(strs, k, v)
		}
	}
	if src&bitQuery != 0 && r.URL.RawQuery != "" {
		q, err := url.ParseQuery(r.URL.RawQuery)
		if err != nil {
			return nil, refuse(bucketing.CodeValidation, "malformed_query",
				fmt.Sprintf("Tool '%s' got a query string that cannot be decoded", t.cfg.Name), nil)
		}
		addValues(q, func(k string, v any) { put(strs, k, v) })
	}
	if src&bitForm != 0 && len(body) > 0 {
		q, err := url.ParseQuery(string(body))
		if err != nil {
			return nil, refuse(bucketing.CodeValidation, bucketing.ReasonMalformedBody,
				fmt.Sprintf("Tool '%s' got a form body that cannot be decoded", t.cfg.Name), nil)
		}
		addValues(q, func(k string, v any) { put(strs, k, v) })
	}
	if len(strs) > 0 && t.schema != nil {
		strs = t.schema.Coerce(strs)
	}
	for k, v := range strs {
		args[k] = v
	}
	if src&bitJSON != 0 && len(bytes.TrimSpace(body)) > 0 {
		obj, ref := decodeObject(t.cfg.Name, body)
		if ref != nil {
			return nil, ref
		}
		for k, v := range obj {
			if _, dup := args[k]; dup {
				dups = append(dups, k)
				continue
			}
			args[k] = v
		}
	}
	if len(dups) > 0 {
		sort.Strings(dups)
		vs := make([]policies.Violation, len(dups))
		for i, k := range dups {
			vs[i] = policies.Violation{Path: "/" + escapePointer(k), Reason: "duplicate_argument",
				Message: "argument given by more than one source", Expected: "one source"}
		}
		return nil, refuse(bucketing.CodeValidation, "duplicate_argument",
			fmt.Sprintf("Tool '%s' got argument '%s' from more than one source (path, query, body)", t.cfg.Name, dups[0]), vs)
	}
	return args, nil
}

// addValues turns decoded query or form values into arguments: a key given
// once is a string, a repeated key an array of strings.
func addValues(q url.Values, put func(string, any)) {
	for k, vs := range q {
		if len(vs) == 1 {
			put(k, vs[0])
			continue
		}
		arr := make([]any, len(vs))
		for i, v := range vs {
			arr[i] = v
		}
		put(k, arr)
	}
}

// decodeObject decodes a JSON body that must be one object. Numbers stay
// json.Number so large integers keep their precision.
func decodeObject(tool string, body []byte) (map[string]any, *refusal) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	err := dec.Decode(&v)
	if err == nil {
		if _, extra := dec.Token(); extra != io.EOF {
			return nil, refuse(bucketing.CodeValidation, bucketing.ReasonMalformedBody,
				fmt.Sprintf("Tool '%s' got a JSON body with data after its end (at byte %d)", tool, dec.InputOffset()), nil)
		}
	}
	if err != nil {
		var se *json.SyntaxError
		where := ""
		if errors.As(err, &se) {
			where = fmt.Sprintf(" (syntax error at byte %d)", se.Offset)
		} else if errors.Is(err, io.ErrUnexpectedEOF) {
			where = " (it ends early)"
		}
		return nil, refuse(bucketing.CodeValidation, bucketing.ReasonMalformedBody,
			fmt.Sprintf("Tool '%s' got a body that is not valid JSON%s", tool, where), nil)
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, refuse(bucketing.CodeValidation, bucketing.ReasonMalformedBody,
			fmt.Sprintf("Tool '%s' expects a JSON object of arguments; got %s", tool, jsonType(v)),
			[]policies.Violation{{Path: "", Reason: bucketing.ReasonWrongType, Message: "arguments must be an object", Expected: "object", Got: jsonType(v)}})
	}
	return obj, nil
}

func jsonType(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case json.Number, float64:
		return "number"
	case string:
		return "string"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return "unknown"
}

// escapePointer escapes one JSON pointer token.
func escapePointer(s string) string {
	var b []byte
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '~':
			b = append(b, '~', '0')
		case '/':
			b = append(b, '~', '1')
		default:
			b = append(b, s[i])
		}
	}
	return string(b)
}
