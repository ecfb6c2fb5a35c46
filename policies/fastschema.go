package policies

import (
	"encoding/json"
	"math"
	"math/big"
	"strconv"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/toolgate/toolgate/internal/jsonnum"
)

// The fast path of Schema.Validate.
//
// jsonschema/v6 stays the authority on every call: it alone refuses, and
// its errors alone make the violations. But for arguments that are valid
// it costs ~50 allocations per call (a scope and an unevaluated-names
// record per value, every number through fmt and big.Rat). A fastNode
// tree, compiled once from the library's compiled schema, answers the one
// question "is this surely valid?" without allocating; when it says yes,
// Validate returns nil without calling the library, and when it says no
// (invalid, or unsure) the library runs as it always did.
//
// A tree exists only for a schema whose every reachable subschema sets no
// keyword outside the subset below, each implemented the way the library
// implements it (validator.go in jsonschema/v6 v6.0.3):
//
//   - boolean schemas, type, enum, const, $ref (in draft-07 and older, its
//     siblings other than type, enum and const ignored, as the library
//     does), allOf, anyOf;
//   - properties, patternProperties (the library's compiled regexps),
//     additionalProperties (boolean or schema), required, minProperties,
//     maxProperties;
//   - prefixItems and items (2020-12), items and additionalItems (older
//     drafts), minItems, maxItems;
//   - minLength, maxLength (in code points, invalid UTF-8 bytes counting
//     one each, as utf8.RuneCount does), pattern (the library's compiled
//     regexp);
//   - minimum, maximum, exclusiveMinimum, exclusiveMaximum;
//   - annotations (title, description, default, examples, $comment,
//     readOnly, writeOnly, deprecated) and identifiers ($id, $anchor,
//     $dynamicAnchor, $recursiveAnchor), which validate nothing.
//
// Anything else reachable (format, not, oneOf, if/then/else, dependent*,
// propertyNames, contains, uniqueItems, multipleOf, content*,
// unevaluated*, $dynamicRef, $recursiveRef, extensions) means no tree.
//
// Numbers are compared exactly as decimals of at most 19 significant
// digits (json.Number, Go integers, and float64 through the shortest
// decimal that fmt prints, which is what the library reads); a number
// with more digits, a bound or enum member with more digits, or any other
// number type is unsure. So is a value of a type encoding/json does not
// produce.

// fastMaxDepth bounds the fast path's recursion (schemas applied to one
// value plus nesting); past it the answer is unsure.
const fastMaxDepth = 512

// Type bits of a fastNode's type keyword.
const (
	ftNull = 1 << iota
	ftBool
	ftNumber
	ftInteger
	ftString
	ftArray
	ftObject
)

// addlMode values: what additionalProperties says of a name that no
// properties or patternProperties entry evaluated.
const (
	addlAny    = iota // absent or true
	addlNone          // false
	addlSchema        // a schema
)

// fastNode is one compiled schema of the fast path. Read-only after
// compileFast.
type fastNode struct {
	boolean bool // a boolean schema: only always or never apply
	always  bool // the boolean schema true

	types uint8 // 0 = no type keyword

	hasConst bool
	constV   fastValue
	hasEnum  bool
	enum     []fastValue

	ref *fastNode
	// refOnly is a draft-07 or older $ref: its siblings other than type,
	// enum and const are ignored.
	refOnly bool
	allOf   []*fastNode
	anyOf   []*fastNode

	// Objects.
	minProps, maxProps int // -1 = absent
	required           []string
	props              map[string]*fastNode
	patterns           []fastPattern
	addl               int // addlMode
	addlNode           *fastNode

	// Arrays: prefix applies to the first items, rest to those past them
	// (nil = no constraint).
	minItems, maxItems int // -1 = absent
	prefix             []*fastNode
	rest               *fastNode

	// Strings.
	minLen, maxLen int // -1 = absent
	pattern        jsonschema.Regexp

	// Numbers. numUnsure is set when a bound has more significant digits
	// than a decimal holds: every number at this schema is then unsure.
	min, max, exMin, exMax *decimal
	numUnsure              bool
	// numbers says whether a number needs parsing here (integer type,
	// bounds, or a number member in enum or const).
	numbers bool
}

type fastPattern struct {
	re jsonschema.Regexp
	n  *fastNode
}

// fastValue is one member of enum or const. A number with too many digits
// is never matched (unsure), nor is an array or object holding one.
type fastValue struct {
	kind uint8 // a type bit; 0 = an unrepresentable number
	s    string
	b    bool
	d    decimal
	raw  any // an array or object member as compiled
}

// compileFast returns the fast path of sch, or nil when some schema it
// reaches is outside the subset.
func compileFast(sch *jsonschema.Schema) *fastNode {
	b := fastBuilder{memo: map[*jsonschema.Schema]*fastNode{}}
	n := b.node(sch)
	if b.failed {
		return nil
	}
	return n
}

type fastBuilder struct {
	memo   map[*jsonschema.Schema]*fastNode
	failed bool
}

func (b *fastBuilder) node(x *jsonschema.Schema) *fastNode {
	if b.failed || x == nil {
		b.failed = true
		return nil
	}
	if n, ok := b.memo[x]; ok {
		return n
	}
	n := &fastNode{minProps: -1, maxProps: -1, minItems: -1, maxItems: -1, minLen: -1, maxLen: -1}
	b.memo[x] = n
	if x.Bool != nil {
		n.boolean, n.always = true, *x.Bool
		return n
	}
	if x.Format != nil || len(x.Extensions) > 0 || x.RecursiveRef != nil || x.DynamicRef != nil {
		b.failed = true
		return nil
	}
	if x.Types != nil {
		for _, t := range x.Types.ToStrings() {
			switch t {
			case "null":
				n.types |= ftNull
			case "boolean":
				n.types |= ftBool
			case "number":
				n.types |= ftNumber
			case "integer":
				n.types |= ftInteger
			case "string":
				n.types |= ftString
			case "array":
				n.types |= ftArray
			case "object":
				n.types |= ftObject
			}
		}
		if n.types&ftInteger != 0 && n.types&ftNumber == 0 {
			n.numbers = true
		}
	}
	if x.Const != nil {
		n.hasConst, n.constV = true, newFastValue(*x.Const)
		n.numbers = n.numbers || n.constV.kind == ftNumber
	}
	if x.Enum != nil {
		n.hasEnum = true
		for _, v := range x.Enum.Values {
			fv := newFastValue(v)
			n.numbers = n.numbers || fv.kind == ftNumber
			n.enum = append(n.enum, fv)
		}
	}
	if x.Ref != nil {
		n.ref = b.node(x.Ref)
		if x.DraftVersion < 2019 {
			n.refOnly = true
			return n
		}
	}
	if x.Not != nil || len(x.OneOf) > 0 || x.If != nil || x.Then != nil || x.Else != nil ||
		x.PropertyNames != nil || len(x.Dependencies) > 0 || len(x.DependentRequired) > 0 ||
		len(x.DependentSchemas) > 0 || x.UnevaluatedProperties != nil || x.UnevaluatedItems != nil ||
		x.UniqueItems || x.Contains != nil || x.MinContains != nil || x.MaxContains != nil ||
		x.ContentEncoding != nil || x.ContentMediaType != nil || x.ContentSchema != nil ||
		x.MultipleOf != nil {
		b.failed = true
		return nil
	}
	for _, m := range x.AllOf {
		n.allOf = append(n.allOf, b.node(m))
	}
	for _, m := range x.AnyOf {
		n.anyOf = append(n.anyOf, b.node(m))
	}

	n.minProps, n.maxProps = intOr(x.MinProperties), intOr(x.MaxProperties)
	n.required = x.Required
	if len(x.Properties) > 0 {
		n.props = make(map[string]*fastNode, len(x.Properties))
		for name, p := range x.Properties {
			n.props[name] = b.node(p)
		}
	}
	for re, p := range x.PatternProperties {
		n.patterns = append(n.patterns, fastPattern{re: re, n: b.node(p)})
	}
	switch ap := x.AdditionalProperties.(type) {
	case nil:
	case bool:
		if !ap {
			n.addl = addlNone
		}
	case *jsonschema.Schema:
		n.addl, n.addlNode = addlSchema, b.node(ap)
	default:
		b.failed = true
		return nil
	}

	n.minItems, n.maxItems = intOr(x.MinItems), intOr(x.MaxItems)
	if x.DraftVersion >= 2020 {
		if x.Items != nil || x.AdditionalItems != nil {
			b.failed = true
			return nil
		}
		for _, p := range x.PrefixItems {
			n.prefix = append(n.prefix, b.node(p))
		}
		if x.Items2020 != nil {
			n.rest = b.node(x.Items2020)
		}
	} else {
		if len(x.PrefixItems) > 0 || x.Items2020 != nil {
			b.failed = true
			return nil
		}
		// The library: items as one schema applies to every item (and
		// additionalItems to none); as a tuple, to the first items, and
		// additionalItems to the rest; with no items, additionalItems
		// applies to every item.
		tuple := false
		switch it := x.Items.(type) {
		case nil:
		case *jsonschema.Schema:
			n.rest = b.node(it)
		case []*jsonschema.Schema:
			tuple = true
			for _, p := range it {
				n.prefix = append(n.prefix, b.node(p))
			}
		default:
			b.failed = true
			return nil
		}
		if x.Items == nil || tuple {
			switch ai := x.AdditionalItems.(type) {
			case nil:
			case bool:
				if !ai {
					n.rest = &fastNode{boolean: true}
				}
			case *jsonschema.Schema:
				n.rest = b.node(ai)
			default:
				b.failed = true
				return nil
			}
		}
	}

	n.minLen, n.maxLen = intOr(x.MinLength), intOr(x.MaxLength)
	n.pattern = x.Pattern

	for _, bd := range []struct {
		r   *big.Rat
		dst **decimal
	}{{x.Minimum, &n.min}, {x.Maximum, &n.max}, {x.ExclusiveMinimum, &n.exMin}, {x.ExclusiveMaximum, &n.exMax}} {
		if bd.r == nil {
			continue
		}
		n.numbers = true
		d, ok := ratDecimal(bd.r)
		if !ok {
			n.numUnsure = true
			continue
		}
		*bd.dst = &d
	}
	return n
}

func intOr(p *int) int {
	if p == nil {
		return -1
	}
	return *p
}

// newFastValue converts an enum or const member.
func newFastValue(v any) fastValue {
	switch x := v.(type) {
	case nil:
		return fastValue{kind: ftNull}
	case bool:
		return fastValue{kind: ftBool, b: x}
	case string:
		return fastValue{kind: ftString, s: x}
	case []any:
		return fastValue{kind: ftArray, raw: x}
	case map[string]any:
		return fastValue{kind: ftObject, raw: x}
	}
	if d, ok := numberDecimal(v); ok {
		return fastValue{kind: ftNumber, d: d}
	}
	return fastValue{}
}

// ratDecimal converts a bound the library compiled to a decimal, when it
// is one of at most 19 significant digits. A bound read from JSON is
// always a finite decimal.
func ratDecimal(r *big.Rat) (decimal, bool) {
	const places = 40
	s := r.FloatString(places)
	back, ok := new(big.Rat).SetString(s)
	if !ok || back.Cmp(r) != 0 {
		return decimal{}, false
	}
	return parseDecimal(s)
}

// ok reports whether v is surely valid against n; false means invalid or
// unsure.
func (n *fastNode) ok(v any, depth int) bool {
	if n.boolean {
		return n.always
	}
	if depth > fastMaxDepth {
		return false
	}
	kind, num, numOK := fastKind(v, n.numbers)
	if kind == 0 {
		return false
	}
	if n.types != 0 {
		if n.types&kind == 0 {
			if !(kind == ftNumber && n.types&ftInteger != 0 && numOK && num.isInteger()) {
				return false
			}
		}
	}
	if n.hasConst && !n.constV.equals(kind, v, num, numOK) {
		return false
	}
	if n.hasEnum {
		found := false
		for i := range n.enum {
			if n.enum[i].equals(kind, v, num, numOK) {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	if n.ref != nil && !n.ref.ok(v, depth+1) {
		return false
	}
	if n.refOnly {
		return true
	}
	switch kind {
	case ftObject:
		if !n.object(v.(map[string]any), depth) {
			return false
		}
	case ftArray:
		if !n.array(v.([]any), depth) {
			return false
		}
	case ftString:
		if !n.str(v.(string)) {
			return false
		}
	case ftNumber:
		if !n.number(num, numOK) {
			return false
		}
	}
	for _, m := range n.allOf {
		if !m.ok(v, depth+1) {
			return false
		}
	}
	if len(n.anyOf) > 0 {
		found := false
		for _, m := range n.anyOf {
			if m.ok(v, depth+1) {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

func (n *fastNode) object(obj map[string]any, depth int) bool {
	if n.minProps >= 0 && len(obj) < n.minProps {
		return false
	}
	if n.maxProps >= 0 && len(obj) > n.maxProps {
		return false
	}
	for _, r := range n.required {
		if _, ok := obj[r]; !ok {
			return false
		}
	}
	if n.props == nil && n.patterns == nil && n.addl == addlAny {
		return true
	}
	for name, v := range obj {
		evaluated := false
		if p, ok := n.props[name]; ok {
			evaluated = true
			if !p.ok(v, depth+1) {
				return false
			}
		}
		for _, pp := range n.patterns {
			if pp.re.MatchString(name) {
				evaluated = true
				if !pp.n.ok(v, depth+1) {
					return false
				}
			}
		}
		if evaluated {
			continue
		}
		switch n.addl {
		case addlNone:
			return false
		case addlSchema:
			if !n.addlNode.ok(v, depth+1) {
				return false
			}
		}
	}
	return true
}

func (n *fastNode) array(arr []any, depth int) bool {
	if n.minItems >= 0 && len(arr) < n.minItems {
		return false
	}
	if n.maxItems >= 0 && len(arr) > n.maxItems {
		return false
	}
	for i, v := range arr {
		var m *fastNode
		if i < len(n.prefix) {
			m = n.prefix[i]
		} else {
			m = n.rest
		}
		if m != nil && !m.ok(v, depth+1) {
			return false
		}
	}
	return true
}

func (n *fastNode) str(s string) bool {
	if n.minLen >= 0 || n.maxLen >= 0 {
		l := utf8.RuneCountInString(s)
		if n.minLen >= 0 && l < n.minLen {
			return false
		}
		if n.maxLen >= 0 && l > n.maxLen {
			return false
		}
	}
	return n.pattern == nil || n.pattern.MatchString(s)
}

func (n *fastNode) number(d decimal, ok bool) bool {
	if n.min == nil && n.max == nil && n.exMin == nil && n.exMax == nil && !n.numUnsure {
		return true
	}
	if !ok || n.numUnsure {
		return false
	}
	return (n.min == nil || d.cmp(*n.min) >= 0) &&
		(n.max == nil || d.cmp(*n.max) <= 0) &&
		(n.exMin == nil || d.cmp(*n.exMin) > 0) &&
		(n.exMax == nil || d.cmp(*n.exMax) < 0)
}

// equals reports whether a value of the given kind (and decimal, for a
// number) is surely equal to the member, as the library's equals decides.
func (fv *fastValue) equals(kind uint8, v any, d decimal, dOK bool) bool {
	if fv.kind != kind {
		return false
	}
	switch kind {
	case ftNull:
		return true
	case ftBool:
		return v.(bool) == fv.b
	case ftString:
		return v.(string) == fv.s
	case ftNumber:
		return dOK && d.cmp(fv.d) == 0
	case ftArray, ftObject:
		return sameValue(v, fv.raw)
	}
	return false
}

// sameValue reports whether a and b are surely equal JSON values, as the
// library's equals decides (numbers by value, objects whatever their
// order); false when unequal or unsure.
func sameValue(a, b any) bool {
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, xv := range x {
			yv, ok := y[k]
			if !ok || !sameValue(xv, yv) {
				return false
			}
		}
		return true
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !sameValue(x[i], y[i]) {
				return false
			}
		}
		return true
	}
	ka, da, oka := fastKind(a, true)
	kb, db, okb := fastKind(b, true)
	if ka == 0 || ka != kb {
		return false
	}
	switch ka {
	case ftNull:
		return true
	case ftBool:
		return a.(bool) == b.(bool)
	case ftString:
		return a.(string) == b.(string)
	case ftNumber:
		return oka && okb && da.cmp(db) == 0
	}
	return false
}

// fastKind returns v's type bit as the library's typeOf decides it (0 for
// a value it calls invalid, and for float32, left to the library), and,
// for a number when parse is set, its decimal.
func fastKind(v any, parse bool) (kind uint8, d decimal, ok bool) {
	switch x := v.(type) {
	case nil:
		return ftNull, d, false
	case bool:
		return ftBool, d, false
	case string:
		return ftString, d, false
	case []any:
		return ftArray, d, false
	case map[string]any:
		return ftObject, d, false
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return 0, d, false
		}
	case json.Number, int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64:
	default:
		return 0, d, false
	}
	if !parse {
		return ftNumber, d, false
	}
	d, ok = numberDecimal(v)
	return ftNumber, d, ok
}

// numberDecimal converts a number to a decimal: a json.Number from its
// text, a float64 from the shortest decimal that reads back as it (what
// fmt's %v prints, and so what the library reads), a Go integer exactly.
func numberDecimal(v any) (decimal, bool) {
	switch x := v.(type) {
	case json.Number:
		return parseDecimal(string(x))
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return decimal{}, false
		}
		var buf [32]byte
		return parseDecimal(strconv.AppendFloat(buf[:0], x, 'e', -1, 64))
	case int:
		return intDecimal(int64(x))
	case int8:
		return intDecimal(int64(x))
	case int16:
		return intDecimal(int64(x))
	case int32:
		return intDecimal(int64(x))
	case int64:
		return intDecimal(x)
	case uint:
		return uintDecimal(uint64(x), false)
	case uint8:
		return uintDecimal(uint64(x), false)
	case uint16:
		return uintDecimal(uint64(x), false)
	case uint32:
		return uintDecimal(uint64(x), false)
	case uint64:
		return uintDecimal(x, false)
	}
	return decimal{}, false
}

func intDecimal(x int64) (decimal, bool) {
	if x < 0 {
		return uintDecimal(uint64(-(x+1))+1, true)
	}
	return uintDecimal(uint64(x), false)
}

func uintDecimal(m uint64, neg bool) (decimal, bool) {
	if m == 0 {
		return decimal{}, true
	}
	exp := 0
	for m%10 == 0 {
		m /= 10
		exp++
	}
	nd := 0
	for t := m; t > 0; t /= 10 {
		nd++
	}
	if nd > maxDecimalDigits {
		return decimal{}, false
	}
	return decimal{neg: neg, mant: m, nd: nd, exp: exp}, true
}

// maxDecimalDigits is the most significant digits a decimal holds: every
// 19-digit integer fits in a uint64.
const maxDecimalDigits = 19

// decimal is mant × 10^exp, negative when neg, mant without trailing
// zeros (zero is all fields zero) and nd its digit count.
type decimal struct {
	neg  bool
	mant uint64
	nd   int
	exp  int
}

var pow10 = func() (p [maxDecimalDigits + 1]uint64) {
	p[0] = 1
	for i := 1; i < len(p); i++ {
		p[i] = p[i-1] * 10
	}
	return p
}()

// parseDecimal reads a JSON number's text (jsonnum.Parse: JSON's
// grammar only, though big.Rat would read more, as a decoder never
// produces it). It fails on a number with more than maxDecimalDigits
// significant digits or a written exponent past ±1e6.
func parseDecimal[T string | []byte](s T) (decimal, bool) {
	n, ok := jsonnum.Parse(s)
	if !ok || n.NSig > maxDecimalDigits || n.ExpDigits > 15 || n.Exp > 1e6 || n.Exp < -1e6 {
		return decimal{}, false
	}
	if n.NSig == 0 {
		return decimal{}, true
	}
	return decimal{neg: n.Neg, mant: n.M, nd: n.NSig, exp: int(n.Exp + n.Shift)}, true
}

func (d decimal) sign() int {
	switch {
	case d.mant == 0:
		return 0
	case d.neg:
		return -1
	}
	return 1
}

// isInteger reports whether d has no fractional part.
func (d decimal) isInteger() bool { return d.mant == 0 || d.exp >= 0 }

// cmp compares d and o exactly: -1, 0 or +1.
func (d decimal) cmp(o decimal) int {
	sd, so := d.sign(), o.sign()
	if sd != so {
		if sd < so {
			return -1
		}
		return 1
	}
	if sd == 0 {
		return 0
	}
	c := cmpAbs(d, o)
	if sd < 0 {
		c = -c
	}
	return c
}

// cmpAbs compares |a| and |b|, both non-zero.
func cmpAbs(a, b decimal) int {
	// a = 0.(digits) × 10^(nd+exp): the larger magnitude wins.
	ma, mb := a.nd+a.exp, b.nd+b.exp
	if ma != mb {
		if ma < mb {
			return -1
		}
		return 1
	}
	x, y := a.mant, b.mant
	if a.nd < b.nd {
		x *= pow10[b.nd-a.nd]
	} else {
		y *= pow10[a.nd-b.nd]
	}
	switch {
	case x < y:
		return -1
	case x > y:
		return 1
	}
	return 0
}
