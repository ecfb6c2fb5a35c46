package steps

import (
	"encoding/json"
	"strings"
	"unicode/utf8"

	"github.com/toolgate/toolgate/policies"
)

// decodeJSON reads body in one pass: it checks that body is one valid JSON
// text, exactly as json.Valid does (ok is false otherwise, and v and dup
// mean nothing), decodes it into the values encoding/json's Decoder with
// UseNumber gives for it (map[string]any, []any, string, json.Number,
// bool, nil; the last of two equal names wins), and reports whether some
// object names a member twice, exactly or up to case folding (dup), as
// encoding/json matches both to one struct field.
//
// It makes fewer allocations than the Decoder: body is copied once into a
// string, and every name and string value written without escapes, in
// valid UTF-8, is a piece of that string; numbers are their text's
// pieces; an array is made at its length. A string with an escape or
// invalid UTF-8 is unquoted by encoding/json itself, so it reads the same.
// It replaced json.Valid, the decoding and a walk of the decoded maps
// counting their members, three passes (docs/performance.md).
// FuzzDecodeJSON holds it to json.Valid and the Decoder.
func decodeJSON(body []byte) (v any, dup bool, ok bool) {
	v, f, ok := decodeArgs(body, 0)
	return v, f.dup, ok
}

// jsonFacts is what decodeArgs learns of a text on its one pass besides
// its values.
type jsonFacts struct {
	// dup: some object names a member twice, exactly or up to case
	// folding (decodeJSON's dup).
	dup bool
	// depth is how deep arrays and objects nest (an object of scalars
	// 1, a scalar 0), as jsonShape counts it.
	depth int
	// deep: an array or object nested deeper than decodeArgs's maxDepth;
	// the text was read no further, and ok is false.
	deep bool
	// inRange: every number is within policies.NumberInRange.
	inRange bool
}

// decodeArgs is decodeJSON, measuring on the same pass how deep the text
// nests and whether its numbers are within policies.NumberInRange, and
// stopping at the first array or object nested deeper than maxDepth (0:
// no bound other than encoding/json's) with facts.deep set, valid text or
// not. It replaced a scan of the text for its depth before the decoding
// and a walk of the decoded values for their numbers after it.
func decodeArgs(body []byte, maxDepth int) (v any, facts jsonFacts, ok bool) {
	d := argDecoder{s: string(body), limit: maxDepth}
	var buf [16]any
	d.stack = buf[:0]
	defer func() {
		if r := recover(); r != nil {
			if r != errInvalidJSON && r != errTooDeep {
				panic(r)
			}
			v, facts, ok = nil, jsonFacts{deep: r == errTooDeep}, false
		}
	}()
	v = d.value()
	d.space()
	if d.i != len(d.s) {
		return nil, jsonFacts{}, false
	}
	return v, jsonFacts{dup: d.dup, depth: d.deepest, inRange: !d.huge}, true
}

// errInvalidJSON is the panic that unwinds argDecoder from a text that is
// not JSON, and errTooDeep from one nested deeper than its limit;
// decodeArgs recovers them.
var (
	errInvalidJSON = new(int)
	errTooDeep     = new(int)
)

// maxNesting is encoding/json's bound on nested arrays and objects: a
// deeper text is not valid.
const maxNesting = 10000

// argDecoder reads a JSON text; see decodeJSON.
type argDecoder struct {
	s       string
	i       int
	depth   int   // arrays and objects open at d.i
	limit   int   // the depth past which the text is too deep; 0: maxNesting's
	deepest int   // the most open at once so far
	dup     bool  // an object named a member twice, or two up to case folding
	huge    bool  // a number past policies.NumberInRange
	stack   []any // the elements of the arrays being read
}

func (d *argDecoder) fail() { panic(errInvalidJSON) }

func (d *argDecoder) space() {
	for d.i < len(d.s) {
		switch d.s[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

// next is the byte at d.i after any space; the text may not end there.
func (d *argDecoder) next() byte {
	d.space()
	if d.i >= len(d.s) {
		d.fail()
	}
	return d.s[d.i]
}

func (d *argDecoder) value() any {
	switch d.next() {
	case '{':
		return d.object()
	case '[':
		return d.array()
	case '"':
		return d.str()
	case 't':
		d.literal("true")
		return true
	case 'f':
		d.literal("false")
		return false
	case 'n':
		d.literal("null")
		return nil
	}
	return d.number()
}

func (d *argDecoder) literal(w string) {
	if !strings.HasPrefix(d.s[d.i:], w) {
		d.fail()
	}
	d.i += len(w)
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// digits moves past the digits at d.i, of which there must be one.
func (d *argDecoder) digits() {
	if d.i >= len(d.s) || !isDigit(d.s[d.i]) {
		d.fail()
	}
	for d.i < len(d.s) && isDigit(d.s[d.i]) {
		d.i++
	}
}

// number reads -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? at d.i.
func (d *argDecoder) number() json.Number {
	start := d.i
	if d.s[d.i] == '-' {
		d.i++
	}
	if d.i < len(d.s) && d.s[d.i] == '0' {
		d.i++
	} else {
		d.digits()
	}
	if d.i < len(d.s) && d.s[d.i] == '.' {
		d.i++
		d.digits()
	}
	exp := d.i < len(d.s) && (d.s[d.i] == 'e' || d.s[d.i] == 'E')
	if exp {
		d.i++
		if d.i < len(d.s) && (d.s[d.i] == '+' || d.s[d.i] == '-') {
			d.i++
		}
		d.digits()
	}
	n := json.Number(d.s[start:d.i])
	// Without an exponent only the length can put a number out of range.
	if (exp || len(n) > policies.MaxNumberLen) && !policies.NumberInRange(n) {
		d.huge = true
	}
	return n
}

func isHex(c byte) bool { return isDigit(c) || c|0x20 >= 'a' && c|0x20 <= 'f' }

// str reads a string at d.i (its opening quote).
func (d *argDecoder) str() string {
	start := d.i
	d.i++
	escaped := false
	for {
		if d.i >= len(d.s) {
			d.fail()
		}
		c := d.s[d.i]
		if c == '"' {
			break
		}
		if c < 0x20 {
			d.fail()
		}
		d.i++
		if c != '\\' {
			continue
		}
		escaped = true
		if d.i >= len(d.s) {
			d.fail()
		}
		switch d.s[d.i] {
		case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			d.i++
		case 'u':
			if d.i+5 > len(d.s) || !isHex(d.s[d.i+1]) || !isHex(d.s[d.i+2]) || !isHex(d.s[d.i+3]) || !isHex(d.s[d.i+4]) {
				d.fail()
			}
			d.i += 5
		default:
			d.fail()
		}
	}
	d.i++
	inner := d.s[start+1 : d.i-1]
	if !escaped && utf8.ValidString(inner) {
		return inner
	}
	var out string
	if err := json.Unmarshal([]byte(d.s[start:d.i]), &out); err != nil {
		panic("steps: decodeJSON checked a string encoding/json refuses: " + err.Error())
	}
	return out
}

func (d *argDecoder) nest() {
	if d.depth++; d.depth > maxNesting {
		d.fail()
	}
	if d.depth > d.deepest {
		d.deepest = d.depth
		if d.limit > 0 && d.depth > d.limit {
			panic(errTooDeep)
		}
	}
}

func (d *argDecoder) object() map[string]any {
	d.nest()
	m := make(map[string]any)
	d.i++ // {
	if d.next() == '}' {
		d.i++
		d.depth--
		return m
	}
	suspect := false // a name that may fold together with another
	for {
		if d.next() != '"' {
			d.fail()
		}
		k := d.str()
		if d.next() != ':' {
			d.fail()
		}
		d.i++
		n := len(m)
		m[k] = d.value()
		d.dup = d.dup || len(m) == n
		suspect = suspect || needsFold(k)
		c := d.next()
		d.i++
		if c == '}' {
			break
		}
		if c != ',' {
			d.fail()
		}
	}
	if suspect && !d.dup && len(m) > 1 && foldCollision(m) {
		d.dup = true
	}
	d.depth--
	return m
}

func (d *argDecoder) array() []any {
	d.nest()
	d.i++ // [
	if d.next() == ']' {
		d.i++
		d.depth--
		return []any{}
	}
	mark := len(d.stack)
	for {
		d.stack = append(d.stack, d.value())
		c := d.next()
		d.i++
		if c == ']' {
			break
		}
		if c != ',' {
			d.fail()
		}
	}
	a := make([]any, len(d.stack)-mark)
	copy(a, d.stack[mark:])
	clear(d.stack[mark:])
	d.stack = d.stack[:mark]
	d.depth--
	return a
}
