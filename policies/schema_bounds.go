package policies

import (
	"errors"
	"fmt"
	"regexp/syntax"
)

// ErrSchemaTooComplex is matched (errors.Is) by the error of a schema past
// its SchemaLimits: nested too deep, too many values, or patterns whose
// compiled programs would be too large. Compiling such a schema is refused
// before the JSON Schema library sees it, because the library's cost grows
// faster than the square of the depth (a 247 KB schema of items nested
// 9,900 deep took minutes and gigabytes).
var ErrSchemaTooComplex = errors.New("schema too complex")

// SchemaLimits bound the shape of a schema document (with every document
// it references), checked on the decoded JSON before it is compiled. A
// zero field takes the default of DefaultSchemaLimits.
type SchemaLimits struct {
	// MaxDepth bounds the nesting of JSON objects and arrays. Default 64.
	MaxDepth int
	// MaxNodes bounds the JSON values (objects, arrays, strings, numbers,
	// booleans, nulls) of all documents together. Default 10,000.
	MaxNodes int
	// MaxPatternSize bounds one regular expression ("pattern", a
	// "patternProperties" name), measured as the instructions of its
	// compiled program with every repetition expanded (a{1000} is 1,000).
	// Default 10,000.
	MaxPatternSize int
	// MaxPatternsSize bounds the sum of MaxPatternSize's measure over all
	// patterns. Default 50,000.
	MaxPatternsSize int
}

// DefaultSchemaLimits are the bounds of a schema when SchemaOptions.Limits
// leaves a field zero: the bounds of a schema an MCP server lists.
var DefaultSchemaLimits = SchemaLimits{MaxDepth: 64, MaxNodes: 10000, MaxPatternSize: 10000, MaxPatternsSize: 50000}

// FileSchemaLimits are the bounds of a schema from a file of the
// configuration: the operator's own, so more values are allowed; the depth
// and pattern bounds are the same.
var FileSchemaLimits = SchemaLimits{MaxDepth: 64, MaxNodes: 100000, MaxPatternSize: 10000, MaxPatternsSize: 200000}

// withDefaults fills l's zero fields from DefaultSchemaLimits.
func (l SchemaLimits) withDefaults() SchemaLimits {
	d := DefaultSchemaLimits
	if l.MaxDepth > 0 {
		d.MaxDepth = l.MaxDepth
	}
	if l.MaxNodes > 0 {
		d.MaxNodes = l.MaxNodes
	}
	if l.MaxPatternSize > 0 {
		d.MaxPatternSize = l.MaxPatternSize
	}
	if l.MaxPatternsSize > 0 {
		d.MaxPatternsSize = l.MaxPatternsSize
	}
	return d
}

// shapeBudget is what is left of a compile's SchemaLimits as its documents
// are checked.
type shapeBudget struct {
	l               SchemaLimits
	nodes, patterns int
}

// shapeError is the error of a document past a bound at pointer ptr.
type shapeError struct {
	ptr string
	msg string
}

func (e *shapeError) Error() string {
	if e.ptr == "" {
		return fmt.Sprintf("%s: %s", ErrSchemaTooComplex, e.msg)
	}
	return fmt.Sprintf("%s at %s: %s", ErrSchemaTooComplex, e.ptr, e.msg)
}

func (e *shapeError) Unwrap() error { return ErrSchemaTooComplex }

// check walks document v, spending the budget, and returns a *shapeError
// at the first bound it crosses. The walk stops at MaxDepth, so its own
// stack is bounded.
func (b *shapeBudget) check(v any) error {
	return b.walk(v, "", 0, false)
}

func (b *shapeBudget) walk(v any, ptr string, depth int, patternKeys bool) error {
	if b.nodes++; b.nodes > b.l.MaxNodes {
		return &shapeError{ptr, fmt.Sprintf("more than %d JSON values", b.l.MaxNodes)}
	}
	switch x := v.(type) {
	case map[string]any:
		if depth >= b.l.MaxDepth {
			return &shapeError{ptr, fmt.Sprintf("nested deeper than %d levels", b.l.MaxDepth)}
		}
		for _, k := range sortedKeysAny(x) {
			if patternKeys {
				if err := b.pattern(k, ptr+"/"+escapeToken(k)); err != nil {
					return err
				}
			}
			if s, ok := x[k].(string); ok && k == "pattern" {
				if err := b.pattern(s, ptr+"/pattern"); err != nil {
					return err
				}
			}
			if err := b.walk(x[k], ptr+"/"+escapeToken(k), depth+1, k == "patternProperties"); err != nil {
				return err
			}
		}
	case []any:
		if depth >= b.l.MaxDepth {
			return &shapeError{ptr, fmt.Sprintf("nested deeper than %d levels", b.l.MaxDepth)}
		}
		for i, e := range x {
			if err := b.walk(e, fmt.Sprintf("%s/%d", ptr, i), depth+1, false); err != nil {
				return err
			}
		}
	}
	return nil
}

// pattern spends the budget of regular expression re at ptr. A pattern
// that does not parse is left to the library, which reports it.
func (b *shapeBudget) pattern(re, ptr string) error {
	if len(re) > b.l.MaxPatternSize {
		return &shapeError{ptr, fmt.Sprintf("a pattern longer than %d characters", b.l.MaxPatternSize)}
	}
	p, err := syntax.Parse(re, syntax.Perl)
	if err != nil {
		return nil
	}
	n := progSize(p, b.l.MaxPatternSize+1)
	if n > b.l.MaxPatternSize {
		return &shapeError{ptr, fmt.Sprintf("a pattern whose program exceeds %d instructions (repetitions expanded)", b.l.MaxPatternSize)}
	}
	if b.patterns += n; b.patterns > b.l.MaxPatternsSize {
		return &shapeError{ptr, fmt.Sprintf("patterns whose programs exceed %d instructions together", b.l.MaxPatternsSize)}
	}
	return nil
}

// progSize estimates the instructions of re's compiled program, with
// repetitions expanded as the compiler expands them; it stops counting
// past limit.
func progSize(re *syntax.Regexp, limit int) int {
	n := 1
	switch re.Op {
	case syntax.OpLiteral:
		n = max(len(re.Rune), 1)
	case syntax.OpConcat:
		n = 0
	case syntax.OpRepeat:
		reps := max(re.Min, re.Max)
		if reps <= 0 {
			reps = 1
		}
		sub := 0
		for _, s := range re.Sub {
			sub += progSize(s, limit)
		}
		if sub > 0 && reps > limit/sub {
			return limit + 1
		}
		return sub * reps
	}
	for _, s := range re.Sub {
		if n += progSize(s, limit); n > limit {
			return limit + 1
		}
	}
	return n
}

// tooComplex is CompileSchema's error for a shape error in tool's schema.
func tooComplex(tool string, err error) *SchemaError {
	var se *shapeError
	if errors.As(err, &se) {
		return &SchemaError{Tool: tool, Pointer: se.ptr, Msg: "too complex: " + se.msg, Err: err}
	}
	return &SchemaError{Tool: tool, Msg: err.Error(), Err: err}
}

// CheckSchemaShape checks the shape of schema document doc against l (zero
// fields: DefaultSchemaLimits) without compiling it, as CompileSchema
// does first: nil, or a *SchemaError matching ErrSchemaTooComplex. A
// document that is not JSON is left to CompileSchema to report.
func CheckSchemaShape(tool string, doc []byte, l SchemaLimits) error {
	root, err := decodeJSON(doc)
	if err != nil {
		return nil
	}
	if err := (&shapeBudget{l: l.withDefaults()}).check(root); err != nil {
		return tooComplex(tool, err)
	}
	return nil
}
