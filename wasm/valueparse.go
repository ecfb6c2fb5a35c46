package wasm

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/open-policy-agent/opa/v1/ast"
)

// maxValueDepth bounds the nesting of a value parseRegoValue reads.
const maxValueDepth = 1000

// parseRegoValue parses what opa_value_dump writes: JSON, with sets as
// {a, b} or set(), and object keys of any type. It is what ast.ParseTerm
// reads for such text, at a fraction of its cost (ast.ParseTerm sets up
// Rego's whole parser for every value).
func parseRegoValue(b []byte) (ast.Value, error) {
	p := valueParser{b: b}
	v, err := p.value(0)
	if err != nil {
		return nil, err
	}
	p.space()
	if p.i != len(p.b) {
		return nil, p.errorf("text after the value")
	}
	return v, nil
}

type valueParser struct {
	b []byte
	i int
}

func (p *valueParser) errorf(format string, args ...any) error {
	return fmt.Errorf("value at byte %d: %s", p.i, fmt.Sprintf(format, args...))
}

func (p *valueParser) space() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

// lit consumes s if the text continues with it.
func (p *valueParser) lit(s string) bool {
	if len(p.b)-p.i >= len(s) && string(p.b[p.i:p.i+len(s)]) == s {
		p.i += len(s)
		return true
	}
	return false
}

func (p *valueParser) value(depth int) (ast.Value, error) {
	if depth > maxValueDepth {
		return nil, p.errorf("nested deeper than %d", maxValueDepth)
	}
	p.space()
	if p.i >= len(p.b) {
		return nil, p.errorf("unexpected end")
	}
	switch c := p.b[p.i]; {
	case c == '"':
		return p.str()
	case c == '-' || c >= '0' && c <= '9':
		return p.number()
	case p.lit("null"):
		return ast.NullValue, nil
	case p.lit("true"):
		return ast.Boolean(true), nil
	case p.lit("false"):
		return ast.Boolean(false), nil
	case p.lit("set()"):
		return ast.NewSet(), nil
	case c == '[':
		p.i++
		var elems []*ast.Term
		p.space()
		if p.lit("]") {
			return ast.NewArray(), nil
		}
		for {
			v, err := p.value(depth + 1)
			if err != nil {
				return nil, err
			}
			elems = append(elems, ast.NewTerm(v))
			p.space()
			if p.lit("]") {
				return ast.NewArray(elems...), nil
			}
			if !p.lit(",") {
				return nil, p.errorf("expected , or ]")
			}
		}
	case c == '{':
		return p.collection(depth)
	}
	return nil, p.errorf("unexpected %q", p.b[p.i])
}

// collection reads an object ({k: v, ...}) or a non-empty set ({a, ...}).
func (p *valueParser) collection(depth int) (ast.Value, error) {
	p.i++
	p.space()
	if p.lit("}") {
		return ast.NewObject(), nil
	}
	first, err := p.value(depth + 1)
	if err != nil {
		return nil, err
	}
	p.space()
	if !p.lit(":") { // a set
		elems := []*ast.Term{ast.NewTerm(first)}
		for {
			p.space()
			if p.lit("}") {
				return ast.NewSet(elems...), nil
			}
			if !p.lit(",") {
				return nil, p.errorf("expected , or }")
			}
			v, err := p.value(depth + 1)
			if err != nil {
				return nil, err
			}
			elems = append(elems, ast.NewTerm(v))
		}
	}
	var pairs [][2]*ast.Term
	k := first
	for {
		v, err := p.value(depth + 1)
		if err != nil {
			return nil, err
		}
		pairs = append(pairs, [2]*ast.Term{ast.NewTerm(k), ast.NewTerm(v)})
		p.space()
		if p.lit("}") {
			return ast.NewObject(pairs...), nil
		}
		if !p.lit(",") {
			return nil, p.errorf("expected , or }")
		}
		if k, err = p.value(depth + 1); err != nil {
			return nil, err
		}
		p.space()
		if !p.lit(":") {
			return nil, p.errorf("expected :")
		}
	}
}

func (p *valueParser) str() (ast.Value, error) {
	start := p.i
	p.i++
	escaped := false
	for p.i < len(p.b) {
		switch c := p.b[p.i]; {
		case c == '\\':
			escaped = true
			p.i += 2
			continue
		case c < 0x20:
			return nil, p.errorf("control character in a string")
		case c == '"':
			p.i++
			if !escaped {
				raw := p.b[start+1 : p.i-1]
				if !utf8.Valid(raw) {
					return ast.String(strings.ToValidUTF8(string(raw), "\uFFFD")), nil
				}
				return ast.String(raw), nil
			}
			var s string
			if err := json.Unmarshal(p.b[start:p.i], &s); err != nil {
				return nil, p.errorf("bad string: %v", err)
			}
			return ast.String(s), nil
		}
		p.i++
	}
	return nil, errors.New("unterminated string")
}

// number reads a JSON number and keeps its text.
func (p *valueParser) number() (ast.Value, error) {
	start := p.i
	digits := func() int {
		n := 0
		for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
			p.i++
			n++
		}
		return n
	}
	p.lit("-")
	if p.lit("0") {
		// no leading zeros
	} else if digits() == 0 {
		return nil, p.errorf("bad number")
	}
	if p.lit(".") && digits() == 0 {
		return nil, p.errorf("bad number")
	}
	if p.lit("e") || p.lit("E") {
		if !p.lit("+") {
			p.lit("-")
		}
		if digits() == 0 {
			return nil, p.errorf("bad number")
		}
	}
	return ast.Number(p.b[start:p.i]), nil
}

// isJSONNumber reports whether s is a number as JSON spells it.
func isJSONNumber(s string) bool {
	if s == "" || s[0] != '-' && (s[0] < '0' || s[0] > '9') {
		return false
	}
	p := valueParser{b: []byte(s)}
	_, err := p.number()
	return err == nil && p.i == len(s)
}
