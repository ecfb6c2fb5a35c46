package policies

import (
	"encoding/json"
	"math/big"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// typeMask is a set of JSON types. Numbers are split into integral and
// fractional so that "number" and "integer" intersect properly.
type typeMask uint8

const (
	maskNull typeMask = 1 << iota
	maskBoolean
	maskInteger
	maskFraction
	maskString
	maskArray
	maskObject

	maskNumber = maskInteger | maskFraction
	maskAll    = maskNull | maskBoolean | maskNumber | maskString | maskArray | maskObject
)

// ownWants is the set of types x admits on its own type, enum and const
// keywords (subschemas are not consulted).
func ownWants(x *jsonschema.Schema) typeMask {
	if x.Bool != nil {
		if *x.Bool {
			return maskAll
		}
		return 0
	}
	m := maskAll
	if x.Types != nil && !x.Types.IsEmpty() {
		var t typeMask
		for _, name := range x.Types.ToStrings() {
			switch name {
			case "null":
				t |= maskNull
			case "boolean":
				t |= maskBoolean
			case "integer":
				t |= maskInteger
			case "number":
				t |= maskNumber
			case "string":
				t |= maskString
			case "array":
				t |= maskArray
			case "object":
				t |= maskObject
			}
		}
		m &= t
	}
	if x.Enum != nil {
		var t typeMask
		for _, v := range x.Enum.Values {
			t |= valueMask(v)
		}
		m &= t
	}
	if x.Const != nil {
		m &= valueMask(*x.Const)
	}
	return m
}

func valueMask(v any) typeMask {
	switch JSONTypeName(v) {
	case "null":
		return maskNull
	case "boolean":
		return maskBoolean
	case "integer":
		return maskInteger
	case "number":
		return maskFraction
	case "string":
		return maskString
	case "array":
		return maskArray
	case "object":
		return maskObject
	}
	return 0
}

// Limits of the schema analysis behind Coerce. A location past them is left
// as it is.
const (
	maxCoerceAlternatives = 32 // anyOf/oneOf combinations at one location
	maxCoerceRefDepth     = 16 // in-place $ref/allOf/anyOf/oneOf nesting
)

// alt is one alternative for a location: the schemas that all apply when a
// given branch of each anyOf/oneOf is taken. An empty alt constrains nothing.
type alt []*jsonschema.Schema

// Coerce converts string values that came from string-only sources (query
// string, form body, path variables) to what the schema asks for at their
// location, in the manner of pydantic's lax mode, and returns args (changed
// in place). Rules:
//
//   - A location that admits a string is left alone.
//   - Where the schema wants an integer, a decimal integer ("42", "-7",
//     surrounding spaces ignored) becomes a json.Number; where it wants a
//     number, a decimal number ("2.5", "1e3") does. NaN, Inf, hex and
//     underscores are not numbers.
//   - Where it wants a boolean: "true", "false", "1", "0", "yes", "no",
//     "on", "off", "t", "f", "y", "n" (any case) become true or false.
//   - Where it wants an array, a single string becomes a one-element array,
//     its item coerced by the item schema; an array of strings (a repeated
//     query key) has its items coerced. An array where a scalar is wanted is
//     not unwrapped.
//   - A string that does not parse stays a string, so Validate reports
//     wrong_type.
//
// The location's schema is found through properties, patternProperties,
// additionalProperties, items and prefixItems, following $ref and allOf.
// anyOf/oneOf branches are all considered (dropping those whose type cannot
// hold the object or array being descended into): a value is converted only
// when exactly one target type (number, boolean or array) both is wanted by
// some branch and parses, and no branch admits a string. So "1" against
// oneOf [integer, boolean] stays a string, while "5" becomes 5. if/then/else
// and not are not consulted.
func (s *Schema) Coerce(args map[string]any) map[string]any {
	if args == nil {
		return nil
	}
	alts, ok := s.root, s.rootOK
	if !ok {
		return args
	}
	s.coerceObject(args, alts)
	return args
}

func (s *Schema) coerceValue(v any, alts []alt, wrap bool) any {
	switch x := v.(type) {
	case string:
		return s.coerceString(x, alts, wrap)
	case map[string]any:
		s.coerceObject(x, alts)
	case []any:
		s.coerceArray(x, alts)
	}
	return v
}

func (s *Schema) coerceObject(obj map[string]any, alts []alt) {
	alts = s.filter(alts, maskObject)
	if len(alts) == 0 {
		return
	}
	for k, v := range obj {
		switch v.(type) {
		case string, map[string]any, []any:
		default:
			continue
		}
		if next := s.propAlts(alts, k); len(next) > 0 {
			obj[k] = s.coerceValue(v, next, true)
		}
	}
}

func (s *Schema) coerceArray(arr []any, alts []alt) {
	alts = s.filter(alts, maskArray)
	if len(alts) == 0 {
		return
	}
	for i, v := range arr {
		if next := s.itemAlts(alts, i); len(next) > 0 {
			arr[i] = s.coerceValue(v, next, false)
		}
	}
}

// propAlts returns the alternatives that apply to property k's value under
// alts, expanded; nil when none does or there are too many to follow.
func (s *Schema) propAlts(alts []alt, k string) []alt {
	return s.childAlts(alts, func(a alt) (alt, bool) { return propSchemas(a, k) })
}

// itemAlts is propAlts for the item at index i of an array.
func (s *Schema) itemAlts(alts []alt, i int) []alt {
	return s.childAlts(alts, func(a alt) (alt, bool) { return itemSchemas(a, i) })
}

// childAlts expands the schemas that of gives for a child under each
// alternative of alts.
func (s *Schema) childAlts(alts []alt, of func(alt) (alt, bool)) []alt {
	var next []alt
	for _, a := range alts {
		c, dead := of(a)
		if dead {
			continue
		}
		ex, ok := s.expand(c)
		if !ok {
			return nil
		}
		next = append(next, ex...)
		if len(next) > maxCoerceAlternatives {
			return nil
		}
	}
	return next
}

// coerceString converts str if exactly one wanted, non-string target type
// accepts it. wrap allows a one-element array (not for items of an array).
func (s *Schema) coerceString(str string, alts []alt, wrap bool) any {
	if len(alts) == 0 {
		return str
	}
	var m typeMask
	for _, a := range alts {
		m |= s.altWants(a)
	}
	if m == 0 || m&maskString != 0 {
		return str
	}
	var out any
	n := 0
	if m&maskFraction != 0 {
		if num, ok := parseNumber(str); ok {
			out, n = num, n+1
		}
	} else if m&maskInteger != 0 {
		if num, ok := parseInteger(str); ok {
			out, n = num, n+1
		}
	}
	if m&maskBoolean != 0 {
		if b, ok := parseBool(str); ok {
			out, n = b, n+1
		}
	}
	if m&maskArray != 0 && wrap {
		elem := any(str)
		if next := s.itemAlts(s.filter(alts, maskArray), 0); len(next) > 0 {
			elem = s.coerceString(str, next, false)
		}
		out, n = []any{elem}, n+1
	}
	if n != 1 {
		return str
	}
	return out
}

// filter keeps the alternatives that admit a type in m.
func (s *Schema) filter(alts []alt, m typeMask) []alt {
	all := true
	for _, a := range alts {
		if s.altWants(a)&m == 0 {
			all = false
			break
		}
	}
	if all {
		return alts // the callers only read it: no copy when none is dropped
	}
	out := alts[:0:0]
	for _, a := range alts {
		if s.altWants(a)&m != 0 {
			out = append(out, a)
		}
	}
	return out
}

func (s *Schema) altWants(a alt) typeMask {
	m := maskAll
	for _, x := range a {
		w, ok := s.wants[x]
		if !ok {
			w = ownWants(x)
		}
		m &= w
	}
	return m
}

// expand resolves in-place composition: each schema of c is added with its
// $ref targets and allOf branches, and every anyOf/oneOf multiplies the
// alternatives. ok is false past the analysis limits.
func (s *Schema) expand(c alt) ([]alt, bool) {
	alts := []alt{{}}
	var ok bool
	for _, x := range c {
		if alts, ok = addSchema(alts, x, 0); !ok {
			return nil, false
		}
	}
	return alts, true
}

func addSchema(alts []alt, x *jsonschema.Schema, depth int) ([]alt, bool) {
	if x == nil {
		return alts, true
	}
	if depth > maxCoerceRefDepth {
		return nil, false
	}
	for i := range alts {
		alts[i] = append(alts[i][:len(alts[i]):len(alts[i])], x)
	}
	if x.Bool != nil {
		return alts, true
	}
	var ok bool
	refs := []*jsonschema.Schema{x.Ref, x.RecursiveRef}
	if x.DynamicRef != nil {
		refs = append(refs, x.DynamicRef.Ref)
	}
	for _, r := range append(refs, x.AllOf...) {
		if r == nil {
			continue
		}
		if alts, ok = addSchema(alts, r, depth+1); !ok {
			return nil, false
		}
	}
	for _, branches := range [][]*jsonschema.Schema{x.AnyOf, x.OneOf} {
		if len(branches) == 0 {
			continue
		}
		var next []alt
		for _, b := range branches {
			for _, a := range alts {
				cp := append(alt(nil), a...)
				r, ok := addSchema([]alt{cp}, b, depth+1)
				if !ok {
					return nil, false
				}
				next = append(next, r...)
				if len(next) > maxCoerceAlternatives {
					return nil, false
				}
			}
		}
		alts = next
	}
	return alts, true
}

// propSchemas returns the schemas that apply to property k under the
// alternative a; dead is true when the alternative forbids k.
func propSchemas(a alt, k string) (c alt, dead bool) {
	for _, x := range a {
		if x.Bool != nil {
			continue
		}
		matched := false
		if p, ok := x.Properties[k]; ok {
			c, matched = append(c, p), true
		}
		for re, p := range x.PatternProperties {
			if re.MatchString(k) {
				c, matched = append(c, p), true
			}
		}
		if matched {
			continue
		}
		switch ap := x.AdditionalProperties.(type) {
		case bool:
			if !ap {
				return nil, true
			}
		case *jsonschema.Schema:
			c = append(c, ap)
		}
	}
	return c, false
}

// itemSchemas returns the schemas that apply to item i under a.
func itemSchemas(a alt, i int) (c alt, dead bool) {
	for _, x := range a {
		if x.Bool != nil {
			continue
		}
		if x.DraftVersion >= 2020 {
			if i < len(x.PrefixItems) {
				c = append(c, x.PrefixItems[i])
			} else if x.Items2020 != nil {
				c = append(c, x.Items2020)
			}
			continue
		}
		switch it := x.Items.(type) {
		case *jsonschema.Schema:
			c = append(c, it)
		case []*jsonschema.Schema:
			if i < len(it) {
				c = append(c, it[i])
				continue
			}
			switch ai := x.AdditionalItems.(type) {
			case bool:
				if !ai {
					return nil, true
				}
			case *jsonschema.Schema:
				c = append(c, ai)
			}
		}
	}
	return c, false
}

// parseInteger accepts an optional sign and decimal digits.
func parseInteger(s string) (json.Number, bool) {
	s = strings.TrimSpace(s)
	if len(s) > MaxNumberLen || !isDecimal(s, false) {
		return "", false
	}
	n, ok := new(big.Int).SetString(s, 10)
	if !ok {
		return "", false
	}
	return json.Number(n.String()), true
}

// parseNumber accepts a decimal number with optional fraction and exponent.
func parseNumber(s string) (json.Number, bool) {
	s = strings.TrimSpace(s)
	if len(s) > MaxNumberLen || !isDecimal(s, true) {
		return "", false
	}
	if i, ok := parseInteger(s); ok {
		return i, true
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return "", false
	}
	return json.Number(strconv.FormatFloat(f, 'g', -1, 64)), true
}

// isDecimal reports whether s is [+-]digits, or with fraction also
// [+-](digits[.digits*]|.digits)([eE][+-]digits).
func isDecimal(s string, fraction bool) bool {
	i := 0
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		i++
	}
	digits := func() int {
		j := i
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		return i - j
	}
	n := digits()
	if !fraction {
		return n > 0 && i == len(s)
	}
	if i < len(s) && s[i] == '.' {
		i++
		n += digits()
	}
	if n == 0 {
		return false
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		if digits() == 0 {
			return false
		}
	}
	return i == len(s)
}

// parseBool accepts pydantic's boolean strings.
func parseBool(s string) (bool, bool) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "true", "1", "yes", "on", "t", "y":
		return true, true
	case "false", "0", "no", "off", "f", "n":
		return false, true
	}
	return false, false
}
