package steps

import (
	"encoding/json"
	"unicode/utf8"
)

// decodeValid decodes body, which json.Valid accepted, into the values
// encoding/json's Decoder with UseNumber gives for it (map[string]any,
// []any, string, json.Number, bool, nil; the last of two equal names
// wins), with fewer allocations: body is copied once into a string, and
// every name and string value written without escapes, in valid UTF-8, is
// a piece of that string; numbers are their text's pieces; an array is
// made at its length. A string with an escape or invalid UTF-8 is
// unquoted by encoding/json itself, so it reads the same.
// FuzzDecodeValid holds it to the Decoder.
func decodeValid(body []byte) any {
	d := argDecoder{s: string(body)}
	var buf [16]any
	d.stack = buf[:0]
	return d.value()
}

// argDecoder reads a valid JSON text; see decodeValid.
type argDecoder struct {
	s     string
	i     int
	stack []any // the elements of the arrays being read
}

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

func (d *argDecoder) value() any {
	d.space()
	switch d.s[d.i] {
	case '{':
		return d.object()
	case '[':
		return d.array()
	case '"':
		return d.str()
	case 't':
		d.i += len("true")
		return true
	case 'f':
		d.i += len("false")
		return false
	case 'n':
		d.i += len("null")
		return nil
	}
	start := d.i
	for d.i < len(d.s) {
		switch c := d.s[d.i]; {
		case c >= '0' && c <= '9', c == '-', c == '+', c == '.', c == 'e', c == 'E':
			d.i++
			continue
		}
		break
	}
	return json.Number(d.s[start:d.i])
}

// str reads a string at d.i (its opening quote).
func (d *argDecoder) str() string {
	start := d.i
	d.i++
	escaped := false
	for d.s[d.i] != '"' {
		if d.s[d.i] == '\\' {
			escaped = true
			d.i++
		}
		d.i++
	}
	d.i++
	inner := d.s[start+1 : d.i-1]
	if !escaped && utf8.ValidString(inner) {
		return inner
	}
	var out string
	if err := json.Unmarshal([]byte(d.s[start:d.i]), &out); err != nil {
		panic("steps: decodeValid given invalid JSON: " + err.Error())
	}
	return out
}

func (d *argDecoder) object() map[string]any {
	m := make(map[string]any)
	d.i++ // {
	d.space()
	if d.s[d.i] == '}' {
		d.i++
		return m
	}
	for {
		d.space()
		k := d.str()
		d.space()
		d.i++ // :
		m[k] = d.value()
		d.space()
		c := d.s[d.i]
		d.i++ // , or }
		if c == '}' {
			return m
		}
	}
}

func (d *argDecoder) array() []any {
	d.i++ // [
	d.space()
	if d.s[d.i] == ']' {
		d.i++
		return []any{}
	}
	mark := len(d.stack)
	for {
		d.stack = append(d.stack, d.value())
		d.space()
		c := d.s[d.i]
		d.i++ // , or ]
		if c == ']' {
			break
		}
	}
	a := make([]any, len(d.stack)-mark)
	copy(a, d.stack[mark:])
	clear(d.stack[mark:])
	d.stack = d.stack[:mark]
	return a
}
