package steps

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"unicode"

	"github.com/toolgate/toolgate/bucketing"
	"github.com/toolgate/toolgate/policies"
	"github.com/toolgate/toolgate/proxy/canonical"
	"github.com/toolgate/toolgate/proxy/internal/conf"
	"github.com/toolgate/toolgate/proxy/mcp"
)

// bodySource says how a call's body carries arguments: BitJSON or BitForm,
// or 0 with a short reason why toolgate cannot read it (used only when the
// body is not empty). The rule, for the tool's sources:
//
//   - more than one Content-Type, a Content-Encoding other than identity, or
//     a Content-Type that does not parse (application/json; x): unreadable;
//   - application/json or any application/*+json (charset, if given, utf-8):
//     JSON, when the tool reads json (by default it does);
//   - application/x-www-form-urlencoded: a form, when the tool reads form
//     (by default it does);
//   - multipart/*: unreadable (toolgate does not parse multipart);
//   - no Content-Type: JSON when the tool lists json, else unreadable;
//   - any other type (text/plain, text/json, application/x-json):
//     unreadable, since a lenient upstream (Flask's get_json(force=True))
//     may still read arguments from it.
func bodySource(t *conf.Tool, r *http.Request) (conf.SourceSet, string) {
	want := t.Sources
	if want == 0 {
		want = conf.BitJSON | conf.BitForm
	}
	want &= conf.BitJSON | conf.BitForm
	if want == 0 {
		return 0, "this tool reads no arguments from the body"
	}
	if ce := r.Header.Values("Content-Encoding"); len(ce) > 0 && !(len(ce) == 1 && strings.EqualFold(strings.TrimSpace(ce[0]), "identity")) {
		return 0, "the body has a Content-Encoding"
	}
	cts := r.Header.Values("Content-Type")
	switch len(cts) {
	case 0:
		if t.Sources&conf.BitJSON != 0 {
			return conf.BitJSON, ""
		}
		return 0, "the body has no Content-Type"
	case 1:
	default:
		return 0, "the request has more than one Content-Type"
	}
	mt, params, err := canonical.ParseMediaType(cts[0])
	if err != nil {
		return 0, "its Content-Type cannot be parsed"
	}
	switch {
	case mt == "application/json" || strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json"):
		if cs, ok := params["charset"]; ok && !strings.EqualFold(cs, "utf-8") {
			return 0, "a JSON body must be UTF-8"
		}
		if want&conf.BitJSON == 0 {
			return 0, "this tool reads a form body, not JSON"
		}
		return conf.BitJSON, ""
	case mt == "application/x-www-form-urlencoded":
		if want&conf.BitForm == 0 {
			return 0, "this tool reads a JSON body, not a form"
		}
		return conf.BitForm, ""
	case strings.HasPrefix(mt, "multipart/"):
		return 0, "multipart bodies are not inspected"
	}
	if len(mt) > 64 {
		mt = mt[:64] + "..."
	}
	if want&conf.BitJSON != 0 {
		return 0, "media type " + mt + " is not read as arguments; send JSON arguments as application/json"
	}
	return 0, "media type " + mt + " is not read as arguments; send a form as application/x-www-form-urlencoded"
}

// extractArgs collects a call's arguments from the sources the tool names
// (or, by default, path variables and the query string) and the body read
// as bodySrc (BitJSON, BitForm or 0, from bodySource) into one object; a
// JSON body may nest at most maxDepth deep (0: no bound but encoding/json's).
// Values from string-only sources are coerced where the schema asks for
// numbers, booleans or arrays. A refusal is returned for a malformed body
// or query, a name given by two sources or twice in one JSON object, a JSON
// body nested too deep, or a form body that is also valid JSON (a lenient
// upstream could read it as JSON).
//
// depth is how deep the arguments nest, the object itself 1: the body's
// nesting as its bytes show it, and the string sources' values (coerced
// perhaps into arrays) walked. inRange says that every number in them is
// within policies.NumberInRange, as the JSON body's decoder saw them go
// by; it is false whenever a string source gave arguments (their coerced
// numbers were not looked at).
func extractArgs(t *conf.Tool, r *http.Request, vars map[string]string, body []byte, bodySrc conf.SourceSet, maxDepth int) (args map[string]any, depth int, inRange bool, ref *conf.Refusal) {
	src := t.Sources
	if src == 0 {
		src = conf.BitPath | conf.BitQuery
	}
	src = src&^(conf.BitJSON|conf.BitForm) | bodySrc
	// args is made when a source gives arguments.
	var strs map[string]any // values from string-only sources, coerced together
	var dups []string
	from := make(map[string]string, 8) // the source that gave each name first
	dupFrom := map[string][2]string{}  // the two sources of a duplicate name
	put := func(dst map[string]any, k string, v any, src string) {
		if _, dup := dst[k]; dup {
			if _, seen := dupFrom[k]; !seen {
				dups = append(dups, k)
				dupFrom[k] = [2]string{from[k], src}
			}
			return
		}
		dst[k] = v
		from[k] = src
	}
	if src&(conf.BitPath|conf.BitQuery|conf.BitForm) != 0 {
		strs = make(map[string]any, 8)
	}
	if src&conf.BitPath != 0 {
		for k, v := range vars {
			put(strs, k, v, "the path")
		}
	}
	if src&conf.BitQuery != 0 && r.URL.RawQuery != "" {
		q, err := url.ParseQuery(r.URL.RawQuery)
		if err != nil {
			return nil, 0, false, conf.Refuse(bucketing.CodeValidation, "malformed_query",
				fmt.Sprintf("Tool '%s' got a query string that cannot be decoded", t.Cfg.Name), nil)
		}
		addValues(q, func(k string, v any) { put(strs, k, v, "the query string") })
	}
	if src&conf.BitForm != 0 && len(body) > 0 {
		q, err := url.ParseQuery(string(body))
		if err != nil {
			return nil, 0, false, conf.Refuse(bucketing.CodeValidation, bucketing.ReasonMalformedBody,
				fmt.Sprintf("Tool '%s' got a form body that cannot be decoded", t.Cfg.Name), nil)
		}
		if json.Valid(body) {
			return nil, 0, false, conf.Refuse(bucketing.CodeValidation, bucketing.ReasonUnsupportedMediaType,
				fmt.Sprintf("Tool '%s' got a form body that is also valid JSON; send JSON as application/json", t.Cfg.Name), nil)
		}
		addValues(q, func(k string, v any) { put(strs, k, v, "the form body") })
	}
	if len(strs) > 0 && t.Schema != nil {
		strs = t.Schema.Coerce(strs)
	}
	for _, v := range strs {
		depth = max(depth, 1+valueDepth(v))
	}
	if len(strs) > 0 {
		args = make(map[string]any, len(strs))
		for k, v := range strs {
			args[k] = v
		}
	}
	if src&conf.BitJSON != 0 && len(bytes.TrimSpace(body)) > 0 {
		obj, facts, ref := decodeObjectDepth(t.Cfg.Name, body, maxDepth)
		if ref != nil {
			return nil, 0, false, ref
		}
		depth = max(depth, facts.depth)
		inRange = facts.inRange && len(strs) == 0
		if len(args) == 0 {
			// The body's object is the arguments: nothing to merge it
			// with, and nothing else holds it.
			args = obj
		} else {
			for k, v := range obj {
				if _, dup := args[k]; dup {
					if _, seen := dupFrom[k]; !seen {
						dups = append(dups, k)
						dupFrom[k] = [2]string{from[k], "the JSON body"}
					}
					continue
				}
				args[k] = v
			}
		}
	}
	if len(dups) > 0 {
		sort.Strings(dups)
		vs := make([]policies.Violation, len(dups))
		for i, k := range dups {
			vs[i] = policies.Violation{Path: "/" + conf.EscapePointer(k), Reason: bucketing.ReasonDuplicateArgument,
				Message: "argument given by more than one source", Expected: "one source"}
		}
		d := dupFrom[dups[0]]
		where := "twice in " + d[0]
		if d[0] != d[1] {
			where = "from both " + d[0] + " and " + d[1]
		}
		return nil, 0, false, conf.Refuse(bucketing.CodeValidation, bucketing.ReasonDuplicateArgument,
			fmt.Sprintf("Tool '%s' got argument '%s' %s", t.Cfg.Name, dups[0], where), vs)
	}
	if args == nil {
		args = map[string]any{}
		inRange = len(strs) == 0
	}
	return args, max(depth, 1), inRange, nil
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

// decodeObject decodes a JSON body that must be one object, nested at most
// maxDepth deep, with no name given twice in any object (nor two names
// equal under case folding, which Go's encoding/json matches to one struct
// field). Numbers stay json.Number so large integers keep their precision.
//
// Duplicates cost almost nothing to detect when there are none: the decoder
// sees a map that did not grow when a member went in (decodeJSON). Only
// when one did not, or a map holds a name with upper-case or non-ASCII
// letters, are the names looked at one by one.
func decodeObject(tool string, body []byte, maxDepth int) (map[string]any, *conf.Refusal) {
	obj, _, ref := decodeObjectDepth(tool, body, maxDepth)
	return obj, ref
}

// decodeObjectDepth is decodeObject, and also how deep the object nests
// (itself 1), as its bytes show it, and whether every number in it is
// within policies.NumberInRange: the decoder learns both on its one pass.
func decodeObjectDepth(tool string, body []byte, maxDepth int) (map[string]any, jsonFacts, *conf.Refusal) {
	v, facts, ok := decodeArgs(body, maxDepth)
	if facts.deep {
		return nil, jsonFacts{}, tooDeep(tool, maxDepth)
	}
	dup := facts.dup
	var err error
	if !ok {
		// Invalid: the Decoder says where, as it always has.
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.UseNumber()
		err = dec.Decode(&v)
		if err == nil {
			if _, extra := dec.Token(); extra != io.EOF {
				return nil, jsonFacts{}, conf.Refuse(bucketing.CodeValidation, bucketing.ReasonMalformedBody,
					fmt.Sprintf("Tool '%s' got a JSON body with data after its end (at byte %d)", tool, dec.InputOffset()), nil)
			}
			// decodeArgs refused a text the Decoder takes whole, which
			// FuzzDecodeJSON says never happens: its names are still
			// counted, its depth measured, and its numbers looked at by
			// whoever validates it.
			members, depth := jsonShape(body)
			if maxDepth > 0 && depth > maxDepth {
				return nil, jsonFacts{}, tooDeep(tool, maxDepth)
			}
			n, folds := countMembers(v)
			dup = n != members || folds
			facts = jsonFacts{depth: depth}
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
		return nil, jsonFacts{}, conf.Refuse(bucketing.CodeValidation, bucketing.ReasonMalformedBody,
			fmt.Sprintf("Tool '%s' got a body that is not valid JSON%s", tool, where), nil)
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, jsonFacts{}, conf.Refuse(bucketing.CodeValidation, bucketing.ReasonMalformedBody,
			fmt.Sprintf("Tool '%s' expects a JSON object of arguments; got %s", tool, mcp.JSONType(v)),
			[]policies.Violation{{Path: "", Reason: bucketing.ReasonWrongType, Message: "arguments must be an object", Expected: "object", Got: mcp.JSONType(v)}})
	}
	if dup {
		if vs := duplicateNames(body); len(vs) > 0 {
			return nil, jsonFacts{}, conf.Refuse(bucketing.CodeValidation, bucketing.ReasonDuplicateArgument,
				fmt.Sprintf("Tool '%s' got a JSON object that names '%s' more than once", tool, vs[0].Path), vs)
		}
	}
	return obj, facts, nil
}

// tooDeep refuses a JSON body nested deeper than maxDepth.
func tooDeep(tool string, maxDepth int) *conf.Refusal {
	return conf.Refuse(bucketing.CodeValidation, bucketing.ReasonMalformedBody,
		fmt.Sprintf("Tool '%s' got a JSON body nested deeper than %d levels", tool, maxDepth), nil)
}

// valueDepth is how deep v nests: 0 for a scalar, 1 for an array or
// object of scalars.
func valueDepth(v any) int {
	d := 0
	switch x := v.(type) {
	case map[string]any:
		for _, e := range x {
			d = max(d, valueDepth(e))
		}
	case []any:
		for _, e := range x {
			d = max(d, valueDepth(e))
		}
	default:
		return 0
	}
	return d + 1
}

// CheckJSONNames refuses a JSON text (an MCP message) nested deeper than
// maxDepth, or with a name given twice in one object (exactly or up to case
// folding), whoever parses it afterwards. what names the message's
// receiver in the detail ("MCP server x"). Text that is not JSON passes: the
// parser after it refuses it.
func CheckJSONNames(what string, body []byte, maxDepth int) *conf.Refusal {
	_, depth := jsonShape(body)
	if maxDepth > 0 && depth > maxDepth {
		return conf.Refuse(bucketing.CodeValidation, bucketing.ReasonMalformedBody,
			fmt.Sprintf("%s got a JSON message nested deeper than %d levels", what, maxDepth), nil)
	}
	if _, dup, ok := decodeJSON(body); !ok || !dup {
		return nil
	}
	if vs := duplicateNames(body); len(vs) > 0 {
		return conf.Refuse(bucketing.CodeValidation, bucketing.ReasonDuplicateArgument,
			fmt.Sprintf("%s got a JSON object that names '%s' more than once", what, vs[0].Path), vs)
	}
	return nil
}

// jsonShape scans a JSON text and returns how many object members it holds
// (each is followed by one ':' outside a string) and how deep its arrays
// and objects nest. On text that is not valid JSON the counts mean nothing.
func jsonShape(b []byte) (members, depth int) {
	d := 0
	for i := 0; i < len(b); i++ {
		switch b[i] {
		case '"':
			// The string ends at the next quote preceded by an even
			// number of backslashes.
			for {
				j := bytes.IndexByte(b[i+1:], '"')
				if j < 0 {
					return members, depth
				}
				i += j + 1
				k := i - 1
				for k >= 0 && b[k] == '\\' {
					k--
				}
				if (i-1-k)%2 == 0 {
					break
				}
			}
		case ':':
			members++
		case '{', '[':
			if d++; d > depth {
				depth = d
			}
		case '}', ']':
			d--
		}
	}
	return members, depth
}

// countMembers counts the members of every object in a decoded JSON value,
// and reports whether some object holds two names equal under case folding
// (encoding/json matches both to one struct field).
func countMembers(v any) (n int, folds bool) {
	switch x := v.(type) {
	case map[string]any:
		n = len(x)
		suspect := false
		for k, e := range x {
			suspect = suspect || needsFold(k)
			en, ef := countMembers(e)
			n += en
			folds = folds || ef
		}
		folds = folds || suspect && len(x) > 1 && foldCollision(x)
	case []any:
		for _, e := range x {
			en, ef := countMembers(e)
			n += en
			folds = folds || ef
		}
	}
	return n, folds
}

// foldCollision reports whether two names of m are equal under case
// folding. Only names with an upper-case ASCII or a non-ASCII byte can
// collide with another (distinct lower-case ASCII names never fold
// together), so countMembers calls it only for an object that has one.
func foldCollision(m map[string]any) bool {
	var suspects []string
	for k := range m {
		if needsFold(k) {
			suspects = append(suspects, k)
		}
	}
	if len(suspects) == 0 {
		return false
	}
	if len(m) <= 16 {
		for _, s := range suspects {
			for k := range m {
				if k != s && strings.EqualFold(k, s) {
					return true
				}
			}
		}
		return false
	}
	seen := make(map[string]bool, len(m))
	for k := range m {
		f := foldName(k)
		if seen[f] {
			return true
		}
		seen[f] = true
	}
	return false
}

func needsFold(k string) bool {
	for i := 0; i < len(k); i++ {
		if c := k[i]; c >= 'A' && c <= 'Z' || c >= 0x80 {
			return true
		}
	}
	return false
}

// duplicateNames walks a valid JSON text token by token and returns a
// violation, with its JSON pointer path, for each member whose name an
// earlier member of the same object gave already, exactly or up to case
// folding. Values are never part of a violation.
func duplicateNames(body []byte) []policies.Violation {
	type frame struct {
		obj   bool
		key   string // the member whose value is being read
		index int    // the next array element
		seen  map[string]bool
	}
	var vs []policies.Violation
	var stack []*frame
	path := func(last string) string {
		var b strings.Builder
		for _, f := range stack[:len(stack)-1] {
			b.WriteByte('/')
			if f.obj {
				b.WriteString(conf.EscapePointer(f.key))
			} else {
				fmt.Fprint(&b, f.index-1)
			}
		}
		b.WriteByte('/')
		b.WriteString(conf.EscapePointer(last))
		return b.String()
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	wantKey := false
	for len(vs) < conf.MaxDuplicateViolations {
		tok, err := dec.Token()
		if err != nil {
			break
		}
		if wantKey {
			if d, ok := tok.(json.Delim); ok && d == '}' {
				stack = stack[:len(stack)-1]
				wantKey = len(stack) > 0 && stack[len(stack)-1].obj
				continue
			}
			f := stack[len(stack)-1]
			k, _ := tok.(string)
			f.key = k
			exact, folded := "="+k, "~"+foldName(k)
			switch {
			case f.seen[exact]:
				vs = append(vs, policies.Violation{Path: path(k), Reason: bucketing.ReasonDuplicateArgument,
					Message: "name given more than once in one object", Expected: "each name once"})
			case f.seen[folded]:
				vs = append(vs, policies.Violation{Path: path(k), Reason: bucketing.ReasonDuplicateArgument,
					Message: "name differs from another in the same object only in letter case", Expected: "names that differ beyond letter case"})
			}
			f.seen[exact], f.seen[folded] = true, true
			wantKey = false
			continue
		}
		// A value: in an array it takes the next index.
		if len(stack) > 0 && !stack[len(stack)-1].obj {
			if d, ok := tok.(json.Delim); ok && d == ']' {
				stack = stack[:len(stack)-1]
				wantKey = len(stack) > 0 && stack[len(stack)-1].obj
				continue
			}
			stack[len(stack)-1].index++
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, &frame{obj: true, seen: map[string]bool{}})
			wantKey = true
		case json.Delim('['):
			stack = append(stack, &frame{})
		default:
			wantKey = len(stack) > 0 && stack[len(stack)-1].obj
		}
	}
	return vs
}

// foldName maps a name to one representative of its case-folding class, so
// two names are equal under strings.EqualFold (how encoding/json matches
// struct fields) exactly when their foldName are equal.
func foldName(s string) string {
	var b strings.Builder
	for _, r := range s {
		min := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			if f < min {
				min = f
			}
		}
		b.WriteRune(min)
	}
	return b.String()
}
