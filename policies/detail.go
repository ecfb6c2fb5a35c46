package policies

import (
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"slices"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"

	"github.com/toolgate/toolgate/bucketing"
)

// Messages of schema violations, shared by Validate and Detail.
const (
	msgUnknown      = "unknown argument"
	msgMissing      = "missing required argument"
	msgNotEvaluated = "argument declared only by a shape the call does not match"
)

// dropDeclared removes the declared leaves (names the schema declares but
// no subschema that held evaluated) whose location has another problem at
// or below it: there a branch failed for that other problem, and the
// declared names are only its echo. A declared leaf that stands alone is
// kept: the call matched a shape that does not allow the name.
func dropDeclared(ls []leaf) []leaf {
	any := false
	for _, l := range ls {
		if l.declared {
			any = true
			break
		}
	}
	if !any {
		return ls
	}
	out := ls[:0:0]
	for _, l := range ls {
		if l.declared {
			parent := l.v.Path[:strings.LastIndexByte(l.v.Path, '/')]
			echo := false
			for _, o := range ls {
				if !o.declared && (o.v.Path == parent || strings.HasPrefix(o.v.Path, parent+"/")) {
					echo = true
					break
				}
			}
			if echo {
				continue
			}
		}
		out = append(out, l)
	}
	return out
}

// Detail returns the one human sentence for a refusal: the violation that
// explains it best (see headline), plus " (and N more problems)" when there
// are more. It names arguments by
// dotted path (requests[0].insert.index) and never includes a value:
//
//	Tool 'docs_edit' got unknown argument 'requests[0].insert.txt'; expected one of: index, text
//	Tool 'pubmed_search' is missing required argument 'term'
//	Tool 'pubmed_search' got pmid=string, expected array of string
//	Tool 'pubmed_search' got retmax=integer, expected at most 100
//
// Detail returns "" when vs is empty.
func Detail(tool string, vs []Violation) string {
	if len(vs) == 0 {
		return ""
	}
	v := vs[headline(vs)]
	var b strings.Builder
	fmt.Fprintf(&b, "Tool '%s' ", tool)
	switch {
	case v.Reason == bucketing.ReasonUnknownField && strings.HasPrefix(v.Message, msgUnknown):
		fmt.Fprintf(&b, "got unknown argument '%s'%s", displayOf(v), v.Message[len(msgUnknown):])
	case v.Reason == bucketing.ReasonMissingField:
		fmt.Fprintf(&b, "is missing required argument '%s'", displayOf(v))
	case v.Got != "" && v.Expected != "":
		fmt.Fprintf(&b, "got %s=%s, expected %s", displayOrArgs(v), v.Got, v.Expected)
	case v.Path != "":
		fmt.Fprintf(&b, "got %s: %s", displayOrArgs(v), v.Message)
		if v.Expected != "" {
			fmt.Fprintf(&b, ", expected %s", v.Expected)
		}
	default:
		fmt.Fprintf(&b, "was refused: %s", v.Message)
	}
	switch n := len(vs) - 1; {
	case n == 1:
		b.WriteString(" (and 1 more problem)")
	case n > 1:
		fmt.Fprintf(&b, " (and %d more problems)", n)
	}
	return b.String()
}

// Reason returns a refusal's overall reason: the Reason of the violation
// Detail describes. It returns "" when vs is empty.
func Reason(vs []Violation) string {
	if len(vs) == 0 {
		return ""
	}
	return vs[headline(vs)].Reason
}

// headline picks the violation that explains a refusal best: an unknown
// field first (a typo is usually also why a required field is missing),
// then a wrong type, then a missing field, then any other; the first by
// path among equals.
func headline(vs []Violation) int {
	rank := func(r string) int {
		switch r {
		case bucketing.ReasonUnknownField:
			return 0
		case bucketing.ReasonWrongType:
			return 1
		case bucketing.ReasonMissingField:
			return 2
		}
		return 3
	}
	best := 0
	for i, v := range vs {
		if rank(v.Reason) < rank(vs[best].Reason) {
			best = i
		}
	}
	return best
}

func displayOrArgs(v Violation) string {
	if v.Path == "" {
		return "arguments"
	}
	return displayOf(v)
}

// displayOf returns the dotted path of a violation for Detail.
func displayOf(v Violation) string {
	if v.Display != "" {
		return v.Display
	}
	return DisplayPath(v.Path)
}

// setDisplay sets Display on the violations whose path holds a key made
// of digits, which DisplayPath would show as an array index.
func setDisplay(vs []Violation, args map[string]any) {
	for i := range vs {
		if d, ok := displayIn(vs[i].Path, args); ok {
			vs[i].Display = d
		}
	}
}

// displayIn builds the dotted path of ptr walking the arguments, so that a
// key of digits is told from an array index; ok is false when ptr has no
// such key (DisplayPath already shows it right).
func displayIn(ptr string, args map[string]any) (string, bool) {
	if ptr == "" {
		return "", false
	}
	toks := strings.Split(ptr[1:], "/")
	digitKey := false
	var b strings.Builder
	var v any = args
	for i, tok := range toks {
		if strings.Contains(tok, "~") {
			tok = strings.NewReplacer("~1", "/", "~0", "~").Replace(tok)
		}
		arr, isArr := v.([]any)
		switch {
		case isArr && isIndex(tok):
			b.WriteString("[" + tok + "]")
			if n, err := strconv.Atoi(tok); err == nil && n < len(arr) {
				v = arr[n]
			} else {
				v = nil
			}
			continue
		case isIndex(tok):
			digitKey = true
			b.WriteString("[" + strconv.Quote(tok) + "]")
		case isPlainKey(tok):
			if i > 0 {
				b.WriteByte('.')
			}
			b.WriteString(tok)
		default:
			b.WriteString("[" + strconv.Quote(tok) + "]")
		}
		if m, ok := v.(map[string]any); ok {
			v = m[tok]
		} else {
			v = nil
		}
	}
	return b.String(), digitKey
}

// DisplayPath turns a JSON pointer into the dotted form used in sentences:
// "/requests/0/txt" becomes "requests[0].txt". ~1 and ~0 are unescaped; a
// token of digits is shown as an index; a key that is not plain letters,
// digits, '_', '-' and '$' is shown quoted, as in a["x.y"]. A pointer alone
// cannot tell a key of digits from an index; Validate sets
// Violation.Display where the arguments say it is a key (a["123"]).
func DisplayPath(ptr string) string {
	if ptr == "" {
		return ""
	}
	var b strings.Builder
	for i, tok := range strings.Split(ptr[1:], "/") {
		if strings.Contains(tok, "~") {
			tok = strings.NewReplacer("~1", "/", "~0", "~").Replace(tok)
		}
		switch {
		case isIndex(tok):
			b.WriteString("[" + tok + "]")
		case isPlainKey(tok):
			if i > 0 {
				b.WriteByte('.')
			}
			b.WriteString(tok)
		default:
			b.WriteString("[" + strconv.Quote(tok) + "]")
		}
	}
	return b.String()
}

func isIndex(tok string) bool {
	if tok == "" {
		return false
	}
	for i := 0; i < len(tok); i++ {
		if tok[i] < '0' || tok[i] > '9' {
			return false
		}
	}
	return true
}

func isPlainKey(tok string) bool {
	if tok == "" {
		return false
	}
	for i := 0; i < len(tok); i++ {
		c := tok[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '$') {
			return false
		}
	}
	return true
}

// leafClass classifies a violation for choosing among anyOf/oneOf branches.
type leafClass uint8

const (
	classOther         leafClass = iota
	classType                    // wrong type (or false schema) at the location
	classDiscriminator           // const, or enum of one value
	classRequired                // missing required field
	classUnknown                 // unknown field
	classShape                   // a nested anyOf/oneOf matched no branch
)

type leaf struct {
	v     Violation
	depth int // number of tokens in the instance location
	class leafClass
	// declared marks an unevaluated name that the schema does declare at
	// its location, in a branch that did not hold (a failed allOf branch,
	// an anyOf or oneOf branch that did not match, an if that failed).
	declared bool
}

// collector maps a library ValidationError tree to flat leaf violations.
// It reads only schema-side data and instance locations and types, never
// the library's messages, which may quote the rejected value.
type collector struct {
	s    *Schema
	args map[string]any
}

func (c *collector) collect(e *jsonschema.ValidationError) []leaf {
	switch k := e.ErrorKind.(type) {
	case *kind.Schema, *kind.Group, *kind.Reference, *kind.AllOf:
		var out []leaf
		for _, cause := range e.Causes {
			out = append(out, c.collect(cause)...)
		}
		return out
	case *kind.AnyOf:
		return c.disjunction(e)
	case *kind.OneOf:
		if len(k.Subschemas) == 0 {
			return c.disjunction(e)
		}
		return []leaf{c.leafAt(e.InstanceLocation, bucketing.ReasonSchema, "matches more than one allowed shape", "exactly one of the allowed shapes", classOther)}
	}
	return c.leaves(e)
}

// disjunction reports a failed anyOf or oneOf (no branch matched). A branch
// whose type, or const discriminator, does not fit the value is out; among
// the rest the branch with the fewest missing and unknown fields at this
// location is reported, if it is the only one. Otherwise: wrong_type when
// every branch wanted another type, else one "does not match any allowed
// shape" violation at the location.
func (c *collector) disjunction(e *jsonschema.ValidationError) []leaf {
	own := len(e.InstanceLocation)
	best, bestScore, ties := -1, math.MaxInt, 0
	allType := len(e.Causes) > 0
	branches := make([][]leaf, len(e.Causes))
	for i, cause := range e.Causes {
		ls := c.collect(cause)
		branches[i] = ls
		excluded, typeOnly, score := false, false, 0
		for _, l := range ls {
			switch {
			case (l.class == classType || l.class == classShape) && l.depth == own:
				excluded = true
				typeOnly = typeOnly || l.class == classType
			case l.class == classDiscriminator && (l.depth == own || l.depth == own+1):
				excluded = true
			case (l.class == classRequired || l.class == classUnknown) && l.depth == own+1:
				score++
			}
		}
		if !typeOnly {
			allType = false
		}
		if excluded {
			continue
		}
		switch {
		case score < bestScore:
			best, bestScore, ties = i, score, 1
		case score == bestScore:
			ties++
		}
	}
	if best >= 0 && ties == 1 {
		return branches[best]
	}
	if allType {
		return []leaf{c.leafAt(e.InstanceLocation, bucketing.ReasonWrongType, "wrong type", c.describeLoc(e.SchemaURL), classType)}
	}
	return []leaf{c.leafAt(e.InstanceLocation, bucketing.ReasonSchema, "does not match any allowed shape",
		fmt.Sprintf("one of %d allowed shapes", len(e.Causes)), classShape)}
}

// leafAt builds a leaf at an instance location, with Got set from the
// value's JSON type.
func (c *collector) leafAt(loc []string, reason, msg, expected string, class leafClass) leaf {
	return leaf{
		v:     Violation{Path: pointerOf(loc), Reason: reason, Message: msg, Expected: expected, Got: c.gotAt(loc)},
		depth: len(loc),
		class: class,
	}
}

func (c *collector) gotAt(loc []string) string {
	var v any = c.args
	for _, tok := range loc {
		switch x := v.(type) {
		case map[string]any:
			var ok bool
			if v, ok = x[tok]; !ok {
				return ""
			}
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(x) {
				return ""
			}
			v = x[i]
		default:
			return ""
		}
	}
	return JSONTypeName(v)
}

func child(loc []string, tok string) []string {
	out := make([]string, len(loc)+1)
	copy(out, loc)
	out[len(loc)] = tok
	return out
}

// leaves maps one library error kind to violations.
func (c *collector) leaves(e *jsonschema.ValidationError) []leaf {
	loc := e.InstanceLocation
	at := func(reason, msg, expected string) []leaf {
		return []leaf{c.leafAt(loc, reason, msg, expected, classOther)}
	}
	switch k := e.ErrorKind.(type) {
	case *kind.AdditionalProperties:
		allowed := c.s.closed[e.SchemaURL]
		out := make([]leaf, 0, len(k.Properties))
		for _, p := range k.Properties {
			out = append(out, c.unknown(child(loc, p), allowed))
		}
		return out
	case *kind.FalseSchema:
		if len(loc) > 0 {
			holder, ok := strings.CutSuffix(e.SchemaURL, "/unevaluatedProperties")
			if !ok {
				holder, ok = strings.CutSuffix(e.SchemaURL, "/additionalProperties")
			}
			if ok {
				return []leaf{c.unknown(loc, c.s.closed[holder])}
			}
		}
		return []leaf{c.leafAt(loc, bucketing.ReasonSchema, "not allowed here", "absent", classType)}
	case *kind.Required:
		return c.missing(loc, e.SchemaURL, k.Missing, "")
	case *kind.DependentRequired:
		return c.missing(loc, e.SchemaURL, k.Missing, k.Prop)
	case *kind.Dependency:
		return c.missing(loc, e.SchemaURL, k.Missing, k.Prop)
	case *kind.Type:
		return []leaf{c.leafAt(loc, bucketing.ReasonWrongType, "wrong type", c.describeLoc(e.SchemaURL), classType)}
	case *kind.InvalidJsonValue:
		l := c.leafAt(loc, bucketing.ReasonWrongType, "unsupported value", c.describeLoc(e.SchemaURL), classType)
		l.v.Got = "unsupported"
		return []leaf{l}
	case *kind.Enum:
		l := c.leafAt(loc, bucketing.ReasonSchema, "not one of the allowed values", "one of: "+formatValues(k.Want), classOther)
		if len(k.Want) == 1 {
			l.class = classDiscriminator
		}
		return []leaf{l}
	case *kind.Const:
		l := c.leafAt(loc, bucketing.ReasonSchema, "not the allowed value", "exactly "+formatValue(k.Want), classDiscriminator)
		return []leaf{l}
	case *kind.Format:
		return at(bucketing.ReasonSchema, "wrong format", "string in "+k.Want+" format")
	case *kind.Pattern:
		return at(bucketing.ReasonSchema, "does not match the required pattern", "string matching "+k.Want)
	case *kind.MinLength:
		return at(bucketing.ReasonSchema, "too short", "at least "+plural(k.Want, "character"))
	case *kind.MaxLength:
		return at(bucketing.ReasonSchema, "too long", "at most "+plural(k.Want, "character"))
	case *kind.Minimum:
		return at(bucketing.ReasonSchema, "too small", "at least "+formatRat(k.Want))
	case *kind.Maximum:
		return at(bucketing.ReasonSchema, "too large", "at most "+formatRat(k.Want))
	case *kind.ExclusiveMinimum:
		return at(bucketing.ReasonSchema, "too small", "greater than "+formatRat(k.Want))
	case *kind.ExclusiveMaximum:
		return at(bucketing.ReasonSchema, "too large", "less than "+formatRat(k.Want))
	case *kind.MultipleOf:
		return at(bucketing.ReasonSchema, "not a multiple of the step", "a multiple of "+formatRat(k.Want))
	case *kind.MinItems:
		return at(bucketing.ReasonSchema, "too few items", "at least "+plural(k.Want, "item"))
	case *kind.MaxItems:
		return at(bucketing.ReasonSchema, "too many items", "at most "+plural(k.Want, "item"))
	case *kind.AdditionalItems:
		n := 0
		if sch := c.s.byLoc[e.SchemaURL]; sch != nil {
			if items, ok := sch.Items.([]*jsonschema.Schema); ok {
				n = len(items)
			}
		}
		return at(bucketing.ReasonSchema, "too many items", "at most "+plural(n, "item"))
	case *kind.UniqueItems:
		return at(bucketing.ReasonSchema, "duplicate items", "unique items")
	case *kind.Contains:
		return at(bucketing.ReasonSchema, "no item has the required shape", "at least one item matching the contains schema")
	case *kind.MinContains:
		return at(bucketing.ReasonSchema, "too few matching items", "at least "+plural(k.Want, "matching item"))
	case *kind.MaxContains:
		return at(bucketing.ReasonSchema, "too many matching items", "at most "+plural(k.Want, "matching item"))
	case *kind.MinProperties:
		return at(bucketing.ReasonSchema, "too few fields", "at least "+plural(k.Want, "field"))
	case *kind.MaxProperties:
		return at(bucketing.ReasonSchema, "too many fields", "at most "+plural(k.Want, "field"))
	case *kind.PropertyNames:
		l := c.leafAt(child(loc, k.Property), bucketing.ReasonSchema, "field name not allowed", "an allowed field name", classOther)
		l.v.Got = ""
		return []leaf{l}
	case *kind.Not:
		return at(bucketing.ReasonSchema, "matches a forbidden shape", "a value not matching the forbidden shape")
	case *kind.ContentEncoding:
		return at(bucketing.ReasonSchema, "wrong content encoding", "string encoded as "+k.Want)
	case *kind.ContentMediaType:
		return at(bucketing.ReasonSchema, "wrong content type", "string holding "+k.Want)
	case *kind.ContentSchema:
		return at(bucketing.ReasonSchema, "content does not match its schema", "content matching the contentSchema")
	case *kind.RefCycle:
		return at(bucketing.ReasonSchema, "schema reference cycle", "a schema without reference cycles")
	}
	kw := strings.Join(e.ErrorKind.KeywordPath(), "/")
	return at(bucketing.ReasonSchema, "fails the "+kw+" constraint", "a value satisfying "+kw)
}

// maxListedNames bounds the allowed names an unknown-field message lists.
const maxListedNames = 40

// unknown builds an unknown_field leaf whose message lists the allowed
// names. A name the location declares, but that no subschema which held
// evaluated, is a declared leaf instead (see dropDeclared).
func (c *collector) unknown(loc []string, allowed *allowedNames) leaf {
	if allowed != nil && len(loc) > 0 && allowed.declares(loc[len(loc)-1]) {
		return leaf{v: Violation{Path: pointerOf(loc), Reason: bucketing.ReasonSchema, Message: msgNotEvaluated, Expected: "absent, or valid for a shape that declares it", Got: c.gotAt(loc)},
			depth: len(loc), class: classOther, declared: true}
	}
	msg := msgUnknown
	if allowed != nil {
		names := allowed.names
		if len(names) > maxListedNames {
			names = append(names[:maxListedNames:maxListedNames], fmt.Sprintf("... (%d more)", len(allowed.names)-maxListedNames))
		}
		switch {
		case len(names) > 0 && len(allowed.patterns) > 0:
			msg += "; expected one of: " + strings.Join(names, ", ") + ", or a name matching " + strings.Join(allowed.patterns, " or ")
		case len(names) > 0:
			msg += "; expected one of: " + strings.Join(names, ", ")
		case len(allowed.patterns) > 0:
			msg += "; expected a name matching " + strings.Join(allowed.patterns, " or ")
		default:
			msg += "; expected no arguments"
		}
	}
	return leaf{v: Violation{Path: pointerOf(loc), Reason: bucketing.ReasonUnknownField, Message: msg, Expected: "absent"}, depth: len(loc), class: classUnknown}
}

// missing builds missing_field leaves, with Expected describing each
// property's schema when it says what it wants.
func (c *collector) missing(loc []string, schemaURL string, names []string, because string) []leaf {
	holder := c.s.byLoc[schemaURL]
	msg := msgMissing
	if because != "" {
		msg += " (required with '" + because + "')"
	}
	out := make([]leaf, 0, len(names))
	for _, n := range names {
		l := leaf{v: Violation{Path: pointerOf(child(loc, n)), Reason: bucketing.ReasonMissingField, Message: msg}, depth: len(loc) + 1, class: classRequired}
		if p := c.s.findProp(holder, n); p != nil {
			l.v.Expected = c.s.describe(p, 0)
		}
		out = append(out, l)
	}
	return out
}

// findProp finds the schema declared for property name at the location of
// holder: on holder itself, or on a schema applying in place with it. Names
// that strict closing declared as {} are skipped in favour of the real one.
func (s *Schema) findProp(holder *jsonschema.Schema, name string) *jsonschema.Schema {
	seen := map[*jsonschema.Schema]bool{}
	var find func(x *jsonschema.Schema) *jsonschema.Schema
	find = func(x *jsonschema.Schema) *jsonschema.Schema {
		if x == nil || seen[x] {
			return nil
		}
		seen[x] = true
		if p, ok := x.Properties[name]; ok && !s.added[x.Location][name] {
			return p
		}
		for _, m := range appendEdges(nil, x, edgeInPlace) {
			if p := find(m); p != nil {
				return p
			}
		}
		return nil
	}
	return find(holder)
}

func (c *collector) describeLoc(schemaURL string) string {
	if sch := c.s.byLoc[schemaURL]; sch != nil {
		return c.s.describe(sch, 0)
	}
	return ""
}

// describe says in a few words what a schema accepts: "integer", "string or
// null", "array of string", "one of: human, mouse". It returns "" when the
// schema does not say.
func (s *Schema) describe(x *jsonschema.Schema, depth int) string {
	if x == nil || depth > 4 {
		return ""
	}
	for i := 0; i < 8 && x.Ref != nil && x.Types == nil && x.Enum == nil && x.Const == nil; i++ {
		x = x.Ref
	}
	if x.Bool != nil {
		if *x.Bool {
			return ""
		}
		return "absent"
	}
	if x.Const != nil {
		return "exactly " + formatValue(*x.Const)
	}
	if x.Enum != nil {
		return "one of: " + formatValues(x.Enum.Values)
	}
	if x.Types != nil && !x.Types.IsEmpty() {
		ts := x.Types.ToStrings()
		var parts []string
		for _, t := range []string{"string", "integer", "number", "boolean", "array", "object", "null"} {
			if !slices.Contains(ts, t) || (t == "integer" && slices.Contains(ts, "number")) {
				continue
			}
			if t == "array" {
				if it := s.describe(itemSchema(x), depth+1); it != "" && !strings.Contains(it, " or ") && !strings.HasPrefix(it, "one of") && !strings.HasPrefix(it, "exactly") {
					t = "array of " + it
				}
			}
			parts = append(parts, t)
		}
		return strings.Join(parts, " or ")
	}
	branches := x.AnyOf
	if len(branches) == 0 {
		branches = x.OneOf
	}
	if len(branches) > 0 {
		var parts []string
		for _, b := range branches {
			d := s.describe(b, depth+1)
			if d == "" {
				return ""
			}
			if !slices.Contains(parts, d) {
				parts = append(parts, d)
			}
		}
		return strings.Join(parts, " or ")
	}
	for _, b := range x.AllOf {
		if d := s.describe(b, depth+1); d != "" {
			return d
		}
	}
	return ""
}

// itemSchema returns the schema every item of an array must match, if one.
func itemSchema(x *jsonschema.Schema) *jsonschema.Schema {
	if x.Items2020 != nil && len(x.PrefixItems) == 0 {
		return x.Items2020
	}
	if it, ok := x.Items.(*jsonschema.Schema); ok {
		return it
	}
	return nil
}

// finish sorts, de-duplicates and bounds the leaves.
func finish(ls []leaf) []Violation {
	if len(ls) == 0 {
		return nil
	}
	vs := make([]Violation, 0, len(ls))
	for _, l := range ls {
		vs = append(vs, l.v)
	}
	slices.SortStableFunc(vs, func(a, b Violation) int {
		if c := comparePointers(a.Path, b.Path); c != 0 {
			return c
		}
		return strings.Compare(a.Reason, b.Reason)
	})
	// Duplicates come from a closed location and a closed oneOf branch both
	// refusing a name, or from several branches requiring one. Keep the
	// shortest message: the branch's, whose list of names is narrower.
	out := vs[:0]
	var seen map[Violation]int // problem key -> index in out
	if len(vs) > 1 {
		seen = make(map[Violation]int, len(vs))
	}
	for _, v := range vs {
		key := problemKey(v)
		if i, dup := seen[key]; dup {
			if len(v.Message) < len(out[i].Message) {
				out[i] = v
			}
			continue
		}
		if seen != nil {
			seen[key] = len(out)
		}
		out = append(out, v)
	}
	if len(out) > MaxViolations {
		out = out[:MaxViolations]
	}
	return out
}

// problemKey identifies a problem: an unknown or missing field by path,
// anything else by path, message and expectation.
func problemKey(v Violation) Violation {
	if v.Reason == bucketing.ReasonUnknownField || v.Reason == bucketing.ReasonMissingField {
		return Violation{Path: v.Path, Reason: v.Reason}
	}
	return Violation{Path: v.Path, Reason: v.Reason, Message: v.Message, Expected: v.Expected}
}

// comparePointers orders JSON pointers token by token, indexes numerically.
func comparePointers(a, b string) int {
	if a == b {
		return 0
	}
	for a != "" && b != "" {
		var ta, tb string
		ta, a = nextToken(a)
		tb, b = nextToken(b)
		if ta == tb {
			continue
		}
		if isIndex(ta) && isIndex(tb) {
			if len(ta) != len(tb) {
				return len(ta) - len(tb)
			}
		}
		return strings.Compare(ta, tb)
	}
	return len(a) - len(b)
}

func nextToken(p string) (tok, rest string) {
	p = p[1:]
	if i := strings.IndexByte(p, '/'); i >= 0 {
		return p[:i], p[i:]
	}
	return p, ""
}

// JSONTypeName names the JSON type of a value decoded from JSON (null,
// boolean, string, array, object, number), as JSON Schema's type keyword
// does: an integral number is "integer". A value JSON does not produce is
// "unsupported". Every message that names what a value is uses it.
func JSONTypeName(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case string:
		return "string"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	case json.Number:
		s := string(x)
		if !strings.ContainsAny(s, ".eE") {
			return "integer"
		}
		if r, ok := new(big.Rat).SetString(s); ok && r.IsInt() {
			return "integer"
		}
		return "number"
	case float64:
		if x == math.Trunc(x) && !math.IsInf(x, 0) {
			return "integer"
		}
		return "number"
	case float32:
		return JSONTypeName(float64(x))
	case int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64:
		return "integer"
	}
	return "unsupported"
}

// formatValues lists schema values (enum) for Expected, bounded.
func formatValues(vs []any) string {
	const max = 12
	parts := make([]string, 0, min(len(vs), max+1))
	for i, v := range vs {
		if i == max {
			parts = append(parts, fmt.Sprintf("... (%d more)", len(vs)-max))
			break
		}
		parts = append(parts, formatValue(v))
	}
	return strings.Join(parts, ", ")
}

// formatValue shows a schema value (enum member, const): strings bare,
// composites as compact JSON, cut at 40 characters.
func formatValue(v any) string {
	var s string
	switch x := v.(type) {
	case string:
		if x == "" {
			return `""`
		}
		s = x
	case nil:
		return "null"
	case json.Number:
		return string(x)
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64)
	case bool:
		return strconv.FormatBool(x)
	default:
		b, err := json.Marshal(v)
		if err != nil {
			return "a fixed value"
		}
		s = string(b)
	}
	if r := []rune(s); len(r) > 40 {
		s = string(r[:40]) + "..."
	}
	return s
}

func formatRat(r *big.Rat) string {
	if r == nil {
		return "?"
	}
	if r.IsInt() {
		return r.Num().String()
	}
	f, _ := r.Float64()
	return strconv.FormatFloat(f, 'g', -1, 64)
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}
