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

// closePlan says how to close one schema node of the document.
type closePlan struct {
	loc      string // compiled location: document URL "#" JSON pointer
	names    []string
	patterns []string
	legacy   bool // draft-07 or older: $ref must move into allOf
}

// planStrict works out, on the schema as written and compiled (so every
// reference is resolved), which nodes strict mode closes and with which
// names. See CompileSchema for the rules.
func planStrict(root *jsonschema.Schema) []closePlan {
	var plans []closePlan
	planned := map[string]bool{}
	seen := map[*jsonschema.Schema]bool{}
	queue := []*jsonschema.Schema{root}
	for len(queue) > 0 {
		r := queue[0]
		queue = queue[1:]
		if seen[r] {
			continue
		}
		seen[r] = true
		g := collectGroup(r)
		for _, m := range g.members {
			if !m.cond {
				queue = appendEdges(queue, m.s, edgeLocation)
			}
		}
		if r.Bool != nil || r.AdditionalProperties != nil || r.UnevaluatedProperties != nil || g.open {
			continue
		}
		if len(g.names) == 0 && len(g.patterns) == 0 {
			continue // free-form object: nothing declared, nothing to close
		}
		if !planned[r.Location] {
			planned[r.Location] = true
			plans = append(plans, closePlan{loc: r.Location, names: sortedKeys(g.names), patterns: sortedKeys(g.patterns), legacy: r.DraftVersion < 2019})
		}
		for _, d := range g.oneOfs {
			plans = planOneOf(plans, planned, g, d)
		}
	}
	return plans
}

// planOneOf narrows each branch of a oneOf to the names declared outside
// the oneOf plus the branch's own.
func planOneOf(plans []closePlan, planned map[string]bool, g *group, branches []*jsonschema.Schema) []closePlan {
	inside := map[string]bool{}
	insideP := map[string]bool{}
	own := make([]*allowedNames, len(branches))
	for i, b := range branches {
		own[i] = groupNames(b)
		for _, n := range own[i].names {
			inside[n] = true
		}
		for _, p := range own[i].patterns {
			insideP[p] = true
		}
	}
	if len(inside) == 0 && len(insideP) == 0 {
		return plans
	}
	for i, b := range branches {
		if b.Bool != nil || b.AdditionalProperties != nil || b.UnevaluatedProperties != nil || planned[b.Location] {
			continue
		}
		names, patterns := map[string]bool{}, map[string]bool{}
		for n := range g.names {
			if !inside[n] {
				names[n] = true
			}
		}
		for p := range g.patterns {
			if !insideP[p] {
				patterns[p] = true
			}
		}
		for _, n := range own[i].names {
			names[n] = true
		}
		for _, p := range own[i].patterns {
			patterns[p] = true
		}
		if len(names) == len(g.names) && len(patterns) == len(g.patterns) {
			continue // no narrower than the location itself
		}
		planned[b.Location] = true
		plans = append(plans, closePlan{loc: b.Location, names: sortedKeys(names), patterns: sortedKeys(patterns), legacy: b.DraftVersion < 2019})
	}
	return plans
}

// group is the set of schemas that apply in place at one instance location.
type group struct {
	members  []groupMember
	oneOfs   [][]*jsonschema.Schema // oneOf branch lists not reached via $ref or if
	names    map[string]bool
	patterns map[string]bool
	open     bool // a member declares additional properties allowed
}

type groupMember struct {
	s    *jsonschema.Schema
	cond bool // under if: names count, nothing is closed below it
}

func collectGroup(r *jsonschema.Schema) *group {
	g := &group{names: map[string]bool{}, patterns: map[string]bool{}}
	seen := map[*jsonschema.Schema]bool{}
	var visit func(s *jsonschema.Schema, viaRef, cond bool)
	visit = func(s *jsonschema.Schema, viaRef, cond bool) {
		if s == nil || seen[s] {
			return
		}
		seen[s] = true
		g.members = append(g.members, groupMember{s: s, cond: cond})
		if s.Bool != nil {
			return
		}
		for n := range s.Properties {
			g.names[n] = true
		}
		for p := range s.PatternProperties {
			g.patterns[p.String()] = true
		}
		if s != r && !cond {
			if ap, ok := s.AdditionalProperties.(bool); ok && ap {
				g.open = true
			}
			if _, ok := s.AdditionalProperties.(*jsonschema.Schema); ok {
				g.open = true
			}
			if u := s.UnevaluatedProperties; u != nil && (u.Bool == nil || *u.Bool) {
				g.open = true
			}
		}
		visit(s.Ref, true, cond)
		visit(s.RecursiveRef, true, cond)
		if s.DynamicRef != nil {
			visit(s.DynamicRef.Ref, true, cond)
		}
		for _, b := range s.AllOf {
			visit(b, viaRef, cond)
		}
		for _, b := range s.AnyOf {
			visit(b, viaRef, cond)
		}
		if len(s.OneOf) > 0 && !viaRef && !cond {
			g.oneOfs = append(g.oneOfs, s.OneOf)
		}
		for _, b := range s.OneOf {
			visit(b, viaRef, cond)
		}
		visit(s.If, viaRef, true)
		visit(s.Then, viaRef, cond)
		visit(s.Else, viaRef, cond)
		for _, d := range s.DependentSchemas {
			visit(d, viaRef, cond)
		}
		for _, d := range s.Dependencies {
			if ds, ok := d.(*jsonschema.Schema); ok {
				visit(ds, viaRef, cond)
			}
		}
	}
	visit(r, false, false)
	return g
}

// applyStrict rewrites the documents (keyed by URL) according to plans and
// records in added the property names it declared.
func applyStrict(docs map[string]any, plans []closePlan, added map[string]map[string]bool) error {
	for _, p := range plans {
		node, err := lookupNode(docs, p.loc)
		if err != nil {
			return err
		}
		obj, ok := node.(map[string]any)
		if !ok {
			return fmt.Errorf("schema at %s is not an object", p.loc)
		}
		if len(p.names) > 0 {
			props, ok := obj["properties"].(map[string]any)
			if !ok {
				props = map[string]any{}
				obj["properties"] = props
			}
			for _, n := range p.names {
				if _, ok := props[n]; !ok {
					props[n] = map[string]any{}
					if added[p.loc] == nil {
						added[p.loc] = map[string]bool{}
					}
					added[p.loc][n] = true
				}
			}
		}
		if len(p.patterns) > 0 {
			pats, ok := obj["patternProperties"].(map[string]any)
			if !ok {
				pats = map[string]any{}
				obj["patternProperties"] = pats
			}
			for _, pt := range p.patterns {
				if _, ok := pats[pt]; !ok {
					pats[pt] = map[string]any{}
				}
			}
		}
		obj["additionalProperties"] = false
		if ref, ok := obj["$ref"]; ok && p.legacy {
			delete(obj, "$ref")
			all, _ := obj["allOf"].([]any)
			obj["allOf"] = append(all, map[string]any{"$ref": ref})
		}
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

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func sortStrings(s []string) { slices.Sort(s) }
