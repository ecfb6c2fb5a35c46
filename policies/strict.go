package policies

import (
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Strict closing, in brief (CompileSchema has the rules a user reads):
//
//  1. Documents in draft-07 and older are translated to draft 2020-12
//     (translateLegacy), so that unevaluatedProperties means the same in
//     every draft.
//  2. On the compiled schema, planStrict groups the schemas that apply at
//     each instance location into classes: the outermost schemas of the
//     location (those reached through properties, items, ... from the
//     parent location's class) plus everything they apply in place ($ref,
//     $dynamicRef, allOf, anyOf, oneOf, if/then/else, dependentSchemas).
//  3. Each outermost schema gets unevaluatedProperties: false, so that at
//     its location a name is refused unless a subschema it applies
//     evaluated it. Every name that any schema of its classes declares (its
//     own branches, sibling branches of the parent, other referrers of a
//     shared schema) is declared on it as {}: the standard's annotations do
//     not flow between schemas reached from different parent branches, nor
//     out of a branch that failed, and a declared name is not unknown.
//     Where no schema it applies in place evaluates names through
//     additionalProperties or unevaluatedProperties, its own properties
//     and patternProperties then cover every name, and the equivalent,
//     cheaper additionalProperties: false is used instead.

// closeEdit says how strict mode changes one schema node of a document.
type closeEdit struct {
	loc      string // compiled location: document URL "#" JSON pointer
	keyword  string // "unevaluatedProperties" or "additionalProperties"
	names    []string
	patterns []string
	allowed  *allowedNames // what an unknown-field message lists
}

// maxStrictClasses bounds the instance-location classes strict planning
// explores, so a pathological schema cannot make loading take forever.
const maxStrictClasses = 20000

// member is one schema of a class, and whether it sits under an if (its
// names count, nothing under it is changed).
type member struct {
	s    *jsonschema.Schema
	cond bool
}

// planner holds the state of one planStrict run.
type planner struct {
	dynAnchors map[string][]*jsonschema.Schema
	recAnchors []*jsonschema.Schema
	closures   map[*jsonschema.Schema][]member
	frozen     map[*jsonschema.Schema]bool
}

// planStrict works out, on the compiled schema (every reference resolved),
// which nodes strict mode closes, with which keyword and extra names.
// anchors are the schemas with a $dynamicAnchor, compiled or not from root.
func planStrict(root *jsonschema.Schema, anchors []*jsonschema.Schema) ([]closeEdit, error) {
	p := &planner{
		dynAnchors: map[string][]*jsonschema.Schema{},
		closures:   map[*jsonschema.Schema][]member{},
		frozen:     map[*jsonschema.Schema]bool{},
	}
	var all []*jsonschema.Schema
	seen := map[*jsonschema.Schema]bool{}
	for _, r := range append([]*jsonschema.Schema{root}, anchors...) {
		walkAll(r, func(x *jsonschema.Schema) {
			if seen[x] {
				return
			}
			seen[x] = true
			all = append(all, x)
			if x.DynamicAnchor != "" {
				p.dynAnchors[x.DynamicAnchor] = append(p.dynAnchors[x.DynamicAnchor], x)
			}
			if x.RecursiveAnchor {
				p.recAnchors = append(p.recAnchors, x)
			}
		})
	}
	// Schemas below not, if, contains, propertyNames and contentSchema
	// express conditions; closing them would change the condition. Schemas
	// applied in place under an author's own unevaluatedProperties feed its
	// evaluation; changing them would loosen or tighten it.
	for _, x := range all {
		for _, c := range []*jsonschema.Schema{x.Not, x.If, x.Contains, x.PropertyNames, x.ContentSchema} {
			if c != nil {
				walkAll(c, func(y *jsonschema.Schema) { p.frozen[y] = true })
			}
		}
		if x.UnevaluatedProperties != nil {
			for _, m := range p.closure(x) {
				if m.s != x {
					p.frozen[m.s] = true
				}
			}
		}
	}

	// Explore the classes, from the root's.
	type class struct {
		outer   []*jsonschema.Schema
		members []member
	}
	var classes []*class
	seenClass := map[string]bool{}
	classesOf := map[*jsonschema.Schema][]int{}
	outermost := map[*jsonschema.Schema]bool{}
	queue := [][]*jsonschema.Schema{{root}}
	for len(queue) > 0 {
		outer := queue[0]
		queue = queue[1:]
		key := classKey(outer)
		if seenClass[key] {
			continue
		}
		seenClass[key] = true
		if len(classes) == maxStrictClasses {
			return nil, fmt.Errorf("schema too complex: more than %d distinct locations", maxStrictClasses)
		}
		k := &class{outer: outer}
		in := map[*jsonschema.Schema]int{} // index in k.members
		for _, o := range outer {
			outermost[o] = true
			for _, m := range p.closure(o) {
				if i, ok := in[m.s]; ok {
					k.members[i].cond = k.members[i].cond && m.cond
					continue
				}
				in[m.s] = len(k.members)
				k.members = append(k.members, m)
			}
		}
		id := len(classes)
		classes = append(classes, k)
		for _, m := range k.members {
			classesOf[m.s] = append(classesOf[m.s], id)
		}
		for _, next := range childClasses(k.members) {
			if !seenClass[classKey(next)] {
				queue = append(queue, next)
			}
		}
	}

	var edits []closeEdit
	for _, x := range all {
		if !outermost[x] || x.Bool != nil || p.frozen[x] || x.UnevaluatedProperties != nil || x.AdditionalProperties != nil {
			continue
		}
		own := map[*jsonschema.Schema]bool{}
		for _, m := range p.closure(x) {
			own[m.s] = true
		}
		extraN, extraP := map[string]bool{}, map[string]bool{}
		skip := false
		for _, id := range classesOf[x] {
			declares := false
			for _, m := range classes[id].members {
				// A properties keyword declares the names, even none:
				// "properties": {} is a tool (or object) that takes no
				// names, what the SDKs generate for a tool without
				// arguments, not a free-form map.
				if m.s.Properties != nil || m.s.PatternProperties != nil {
					declares = true
				}
				if own[m.s] {
					continue
				}
				if opensAll(m.s) {
					skip = true // another schema there lets every name through
				}
				for n := range m.s.Properties {
					extraN[n] = true
				}
				for re := range m.s.PatternProperties {
					extraP[re.String()] = true
				}
			}
			if !declares {
				skip = true // a free-form map at one of its locations
			}
		}
		if skip {
			continue
		}
		// Every name declared in x's closure is declared on x below, so
		// unless a schema x applies in place evaluates names by
		// additionalProperties or unevaluatedProperties, x's own
		// properties and patternProperties cover every name its closure
		// can evaluate: additionalProperties: false then means the same as
		// unevaluatedProperties: false and costs less to check.
		e := closeEdit{loc: x.Location, keyword: "additionalProperties"}
		for _, m := range p.closure(x) {
			if m.s != x && (opensAll(m.s) || m.s.UnevaluatedProperties != nil) {
				e.keyword = "unevaluatedProperties"
			}
		}
		// Every name declared at the location is known, whether or not the
		// branch declaring it holds for this call (an anyOf branch that
		// does not match, a dependentSchemas entry not triggered, a then
		// whose if failed): declared names are declared on x.
		for _, m := range p.closure(x) {
			for n := range m.s.Properties {
				extraN[n] = true
			}
			for re := range m.s.PatternProperties {
				extraP[re.String()] = true
			}
		}
		for n := range extraN {
			if _, ok := x.Properties[n]; !ok {
				e.names = append(e.names, n)
			}
		}
		for pt := range extraP {
			if !hasPattern(x, pt) {
				e.patterns = append(e.patterns, pt)
			}
		}
		slices.Sort(e.names)
		slices.Sort(e.patterns)
		e.allowed = newAllowed(extraN, extraP)
		edits = append(edits, e)
	}
	return edits, nil
}

// opensAll reports whether s, when it applies, evaluates every name.
func opensAll(s *jsonschema.Schema) bool {
	if ap, ok := s.AdditionalProperties.(bool); ok && ap {
		return true
	}
	if _, ok := s.AdditionalProperties.(*jsonschema.Schema); ok {
		return true
	}
	u := s.UnevaluatedProperties
	return u != nil && (u.Bool == nil || *u.Bool)
}

func hasPattern(x *jsonschema.Schema, pt string) bool {
	for re := range x.PatternProperties {
		if re.String() == pt {
			return true
		}
	}
	return false
}

// classKey identifies a class by its outermost schemas.
func classKey(outer []*jsonschema.Schema) string {
	locs := make([]string, len(outer))
	for i, o := range outer {
		locs[i] = o.Location
	}
	return strings.Join(locs, "\x00")
}

// childClasses returns, for each child location the members describe (a
// property name, a pattern, additional properties, an item position), the
// outermost schemas that apply there, sorted by location. It errs on the
// side of more schemas: a pattern counts for every declared name it
// matches, additionalProperties for every name, items for every position.
func childClasses(members []member) [][]*jsonschema.Schema {
	byKey := map[string]map[*jsonschema.Schema]bool{}
	add := func(key string, s *jsonschema.Schema) {
		if s == nil {
			return
		}
		if byKey[key] == nil {
			byKey[key] = map[*jsonschema.Schema]bool{}
		}
		byKey[key][s] = true
	}
	names := map[string]bool{}
	for _, m := range members {
		for n := range m.s.Properties {
			names[n] = true
		}
	}
	maxPrefix := 0
	for _, m := range members {
		x := m.s
		for n, ps := range x.Properties {
			add("p\x00"+n, ps)
		}
		for re, ps := range x.PatternProperties {
			add("pp\x00"+re.String(), ps)
			for n := range names {
				if re.MatchString(n) {
					add("p\x00"+n, ps)
				}
			}
		}
		var extra []*jsonschema.Schema
		if ap, ok := x.AdditionalProperties.(*jsonschema.Schema); ok {
			extra = append(extra, ap)
		}
		if x.UnevaluatedProperties != nil {
			extra = append(extra, x.UnevaluatedProperties)
		}
		for _, ps := range extra {
			add("ap", ps)
			for n := range names {
				add("p\x00"+n, ps)
			}
		}
		for i, ps := range x.PrefixItems {
			add("i\x00"+strconv.Itoa(i), ps)
			maxPrefix = max(maxPrefix, i+1)
		}
		switch it := x.Items.(type) {
		case *jsonschema.Schema:
			add("it", it)
		case []*jsonschema.Schema:
			for i, ps := range it {
				add("i\x00"+strconv.Itoa(i), ps)
				maxPrefix = max(maxPrefix, i+1)
			}
		}
		if ai, ok := x.AdditionalItems.(*jsonschema.Schema); ok {
			add("it", ai)
		}
		add("it", x.Items2020)
		add("it", x.UnevaluatedItems)
	}
	for i := 0; i < maxPrefix; i++ {
		for s := range byKey["it"] {
			add("i\x00"+strconv.Itoa(i), s)
		}
	}
	keys := make([]string, 0, len(byKey))
	for k := range byKey {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	out := make([][]*jsonschema.Schema, 0, len(keys))
	for _, k := range keys {
		set := make([]*jsonschema.Schema, 0, len(byKey[k]))
		for s := range byKey[k] {
			set = append(set, s)
		}
		slices.SortFunc(set, func(a, b *jsonschema.Schema) int { return strings.Compare(a.Location, b.Location) })
		out = append(out, set)
	}
	return out
}

// closure returns x and every schema it applies in place, transitively.
// A $dynamicRef counts for every schema with its dynamic anchor, a
// $recursiveRef for every recursive anchor: which one applies depends on
// the call, so each may.
func (p *planner) closure(x *jsonschema.Schema) []member {
	if c, ok := p.closures[x]; ok {
		return c
	}
	var out []member
	idx := map[*jsonschema.Schema]int{}
	var visit func(s *jsonschema.Schema, cond bool)
	visit = func(s *jsonschema.Schema, cond bool) {
		if s == nil {
			return
		}
		if i, ok := idx[s]; ok {
			if out[i].cond && !cond {
				out[i].cond = false
			} else {
				return
			}
		} else {
			idx[s] = len(out)
			out = append(out, member{s: s, cond: cond})
		}
		if s.Bool != nil {
			return
		}
		visit(s.Ref, cond)
		if s.RecursiveRef != nil {
			visit(s.RecursiveRef, cond)
			for _, a := range p.recAnchors {
				visit(a, cond)
			}
		}
		if s.DynamicRef != nil {
			visit(s.DynamicRef.Ref, cond)
			if s.DynamicRef.Anchor != "" {
				for _, a := range p.dynAnchors[s.DynamicRef.Anchor] {
					visit(a, cond)
				}
			}
		}
		for _, b := range s.AllOf {
			visit(b, cond)
		}
		for _, b := range s.AnyOf {
			visit(b, cond)
		}
		for _, b := range s.OneOf {
			visit(b, cond)
		}
		visit(s.If, true)
		visit(s.Then, cond)
		visit(s.Else, cond)
		for _, d := range s.DependentSchemas {
			visit(d, cond)
		}
		for _, d := range s.Dependencies {
			if ds, ok := d.(*jsonschema.Schema); ok {
				visit(ds, cond)
			}
		}
	}
	visit(x, false)
	p.closures[x] = out
	return out
}

// applyStrict rewrites the documents (keyed by URL) according to edits and
// records in added the property names it declared. Edits of documents
// toolgate does not hold (the metaschemas the library embeds) are skipped:
// those are left as their authors wrote them.
func applyStrict(docs map[string]any, edits []closeEdit, added map[string]map[string]bool) error {
	for _, e := range edits {
		u, _, _ := strings.Cut(e.loc, "#")
		if _, ok := docs[u]; !ok {
			continue
		}
		node, err := lookupNode(docs, e.loc)
		if err != nil {
			return err
		}
		obj, ok := node.(map[string]any)
		if !ok {
			return fmt.Errorf("schema at %s is not an object", e.loc)
		}
		if len(e.names) > 0 {
			props, ok := obj["properties"].(map[string]any)
			if !ok {
				props = map[string]any{}
				obj["properties"] = props
			}
			for _, n := range e.names {
				if _, ok := props[n]; !ok {
					props[n] = map[string]any{}
					if added[e.loc] == nil {
						added[e.loc] = map[string]bool{}
					}
					added[e.loc][n] = true
				}
			}
		}
		if len(e.patterns) > 0 {
			pats, ok := obj["patternProperties"].(map[string]any)
			if !ok {
				pats = map[string]any{}
				obj["patternProperties"] = pats
			}
			for _, pt := range e.patterns {
				if _, ok := pats[pt]; !ok {
					pats[pt] = map[string]any{}
				}
			}
		}
		obj[e.keyword] = false
	}
	return nil
}

// lookupNode finds the JSON node of a compiled location.
func lookupNode(docs map[string]any, loc string) (any, error) {
	u, frag, _ := strings.Cut(loc, "#")
	v, ok := docs[u]
	if !ok {
		return nil, fmt.Errorf("document %s not loaded", u)
	}
	if frag == "" {
		return v, nil
	}
	for _, tok := range strings.Split(frag, "/")[1:] {
		t, err := url.PathUnescape(tok)
		if err != nil {
			return nil, err
		}
		t = strings.NewReplacer("~1", "/", "~0", "~").Replace(t)
		switch x := v.(type) {
		case map[string]any:
			if v, ok = x[t]; !ok {
				return nil, fmt.Errorf("no node at %s", loc)
			}
		case []any:
			i, err := strconv.Atoi(t)
			if err != nil || i < 0 || i >= len(x) {
				return nil, fmt.Errorf("no node at %s", loc)
			}
			v = x[i]
		default:
			return nil, errors.New("no node at " + loc)
		}
	}
	return v, nil
}

func sortStrings(s []string) { slices.Sort(s) }
