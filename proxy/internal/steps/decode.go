package steps

import (
	"encoding/json"
	"strings"
	"unicode/utf8"
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
	d := argDecoder{s: string(body)}
	var buf [16]any
	d.stack = buf[:0]
	defer func() {
		if r := recover(); r != nil {
			if r != errInvalidJSON {
				panic(r)
			}
			v, dup, ok = nil, false, false
		}
	}()
	v = d.value()
	d.space()
	if d.i != len(d.s) {
		return nil, false, false
	}
	return v, d.dup, true
}

// errInvalidJSON is the panic that unwinds argDecoder from a text that is
// not JSON; decodeJSON recovers it.
var errInvalidJSON = new(int)

// maxNesting is encoding/json's bound on nested arrays and objects: a
// deeper text is not valid.
const maxNesting = 10000

// argDecoder reads a JSON text; see decodeJSON.
type argDecoder struct {
	s     string
	i     int
	depth int
	dup   bool  // an object named a member twice, or two up to case folding
	stack []any // the elements of the arrays being read
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
	if d.i < len(d.s) && (d.s[d.i] == 'e' || d.s[d.i] == 'E') {
		d.i++
		if d.i < len(d.s) && (d.s[d.i] == '+' || d.s[d.i] == '-') {
			d.i++
		}
		d.digits()
	}
	return json.Number(d.s[start:d.i])
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
