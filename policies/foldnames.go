package policies

import (
	"strconv"
	"strings"

	"github.com/toolgate/toolgate/bucketing"
)

// FoldedNames returns an unknown_field violation for each argument name, at
// any depth, that the schema does not declare where it stands but that
// equals a property declared there up to Unicode case folding ("Title" or
// "TITLE" where "title" is declared). A strict schema refuses such a name
// as unknown already; an open one (strict: false, or its own
// additionalProperties) lets it through as an argument of its own, while a
// server decoding with Go's encoding/json into tagged structs reads it as
// the declared property, which the schema never checked. Locations are
// found as Coerce finds them (properties, patternProperties,
// additionalProperties, items, prefixItems, $ref, allOf, every anyOf/oneOf
// branch); a name a patternProperties matches counts as declared, and a
// location past Coerce's analysis limits is not looked into.
func (s *Schema) FoldedNames(args map[string]any) []Violation {
	if args == nil || !s.mayFold {
		return nil
	}
	alts, ok := s.root, s.rootOK
	if !ok {
		return nil
	}
	var vs []Violation
	s.foldObject(args, alts, nil, &vs)
	return vs
}

func (s *Schema) foldValue(v any, alts []alt, path []string, vs *[]Violation) {
	switch x := v.(type) {
	case map[string]any:
		s.foldObject(x, alts, path, vs)
	case []any:
		alts = s.filter(alts, maskArray)
		for i, e := range x {
			if next := s.itemAlts(alts, i); len(next) > 0 {
				s.foldValue(e, next, append(path[:len(path):len(path)], strconv.Itoa(i)), vs)
			}
		}
	}
}

func (s *Schema) foldObject(obj map[string]any, alts []alt, path []string, vs *[]Violation) {
	alts = s.filter(alts, maskObject)
	if len(alts) == 0 {
		return
	}
	for k, v := range obj {
		if d := foldedProperty(alts, k); d != "" {
			*vs = append(*vs, Violation{Path: pointerOf(append(path[:len(path):len(path)], k)), Reason: bucketing.ReasonUnknownField,
				Message: msgUnknown + "; it is '" + d + "' in another letter case, which some servers read as '" + d + "'", Expected: "absent"})
			continue
		}
		switch v.(type) {
		case map[string]any, []any:
		default:
			continue
		}
		if next := s.propAlts(alts, k); len(next) > 0 {
			s.foldValue(v, next, append(path[:len(path):len(path)], k), vs)
		}
	}
}

// foldedProperty returns the property of alts that k spells in another
// letter case, or "" when k is declared as it is (by a property or a
// patternProperties) or folds to none.
func foldedProperty(alts []alt, k string) string {
	folded := ""
	for _, a := range alts {
		for _, x := range a {
			if x.Bool != nil {
				continue
			}
			if _, ok := x.Properties[k]; ok {
				return ""
			}
			for re := range x.PatternProperties {
				if re.MatchString(k) {
					return ""
				}
			}
			if folded != "" {
				continue
			}
			for d := range x.Properties {
				if strings.EqualFold(d, k) {
					folded = d
					break
				}
			}
		}
	}
	return folded
}
