package policies

import (
	"encoding/hex"
	"strconv"
	"strings"
)

// draft2020URL is the $schema of draft 2020-12.
const draft2020URL = "https://json-schema.org/draft/2020-12/schema"

// schemaDraft returns the draft a $schema value names (4, 6, 7, 2019,
// 2020), or 0 when it names none of them.
func schemaDraft(s string) int {
	switch {
	case strings.Contains(s, "draft-04"):
		return 4
	case strings.Contains(s, "draft-06"):
		return 6
	case strings.Contains(s, "draft-07"):
		return 7
	case strings.Contains(s, "draft/2019-09"):
		return 2019
	case strings.Contains(s, "draft/2020-12"):
		return 2020
	}
	return 0
}

// translateLegacy rewrites a schema document written in draft-04, -06 or
// -07 into draft 2020-12 with the same meaning, so that strict closing can
// use unevaluatedProperties, which those drafts lack:
//
//   - a schema holding $ref keeps only the $ref (and its definitions),
//     since those drafts ignore every keyword beside $ref;
//   - $id "#name" becomes $anchor "name" (id in draft-04);
//   - items as an array becomes prefixItems, and additionalItems becomes
//     items; additionalItems without an items array is dropped (ignored);
//   - dependencies splits into dependentRequired and dependentSchemas;
//   - draft-04's boolean exclusiveMinimum/exclusiveMaximum become numbers;
//   - a JSON-pointer $ref within the document ("#/items/0") follows the
//     renamed keywords.
//
// The document is not modified; a new one is returned. A subschema that
// names a 2019-09 or 2020-12 $schema is kept as it is.
func translateLegacy(doc any, draft int) any {
	t := &translator{}
	return t.schema(doc, draft, doc)
}

type translator struct{}

// schema translates one schema; res is the original JSON of the resource
// that JSON pointers in its $ref values start from.
func (t *translator) schema(v any, draft int, res any) any {
	obj, ok := v.(map[string]any)
	if !ok {
		return v
	}
	if s, ok := obj["$schema"].(string); ok {
		if d := schemaDraft(s); d != 0 {
			draft = d
		}
	}
	if draft >= 2019 {
		return v
	}
	idKey := "$id"
	if draft == 4 {
		idKey = "id"
	}
	if id, ok := obj[idKey].(string); ok && !strings.HasPrefix(id, "#") {
		res = v // a new resource: pointers start here
	}
	out := map[string]any{}
	if _, ok := obj["$schema"]; ok {
		out["$schema"] = draft2020URL
	}
	for _, k := range []string{"definitions", "$defs"} {
		if defs, ok := obj[k].(map[string]any); ok {
			out[k] = t.schemaMap(defs, draft, res)
		}
	}
	if ref, ok := obj["$ref"].(string); ok {
		out["$ref"] = t.ref(ref, res)
		return out
	}
	for k, val := range obj {
		switch k {
		case "$schema", "definitions", "$defs":
		case idKey:
			id, ok := val.(string)
			if !ok {
				out[k] = val
				continue
			}
			base, frag, _ := strings.Cut(id, "#")
			if base != "" {
				out["$id"] = base
			}
			if frag != "" {
				out["$anchor"] = anchorName(frag)
			}
		case "properties", "patternProperties":
			if m, ok := val.(map[string]any); ok {
				out[k] = t.schemaMap(m, draft, res)
			} else {
				out[k] = val
			}
		case "allOf", "anyOf", "oneOf":
			if a, ok := val.([]any); ok {
				out[k] = t.schemaList(a, draft, res)
			} else {
				out[k] = val
			}
		case "additionalProperties", "not", "if", "then", "else", "contains", "propertyNames":
			out[k] = t.schema(val, draft, res)
		case "items":
			if a, ok := val.([]any); ok {
				out["prefixItems"] = t.schemaList(a, draft, res)
				if ai, ok := obj["additionalItems"]; ok {
					out["items"] = t.schema(ai, draft, res)
				}
			} else {
				out["items"] = t.schema(val, draft, res)
			}
		case "additionalItems":
			// handled with items; ignored without an items array
		case "dependencies":
			deps, ok := val.(map[string]any)
			if !ok {
				out[k] = val
				continue
			}
			req, sch := map[string]any{}, map[string]any{}
			for name, d := range deps {
				if a, ok := d.([]any); ok {
					req[name] = a
				} else {
					sch[name] = t.schema(d, draft, res)
				}
			}
			if len(req) > 0 {
				out["dependentRequired"] = req
			}
			if len(sch) > 0 {
				out["dependentSchemas"] = sch
			}
		case "exclusiveMaximum", "exclusiveMinimum":
			if b, ok := val.(bool); ok {
				bound := "maximum"
				if k == "exclusiveMinimum" {
					bound = "minimum"
				}
				if n, ok := obj[bound]; ok && b {
					out[k] = n
				}
				continue
			}
			out[k] = val
		case "maximum", "minimum":
			if b, ok := obj["exclusive"+strings.ToUpper(k[:1])+k[1:]].(bool); ok && b {
				continue // became the exclusive bound
			}
			out[k] = val
		default:
			out[k] = val
		}
	}
	return out
}

func (t *translator) schemaMap(m map[string]any, draft int, res any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = t.schema(v, draft, res)
	}
	return out
}

func (t *translator) schemaList(a []any, draft int, res any) []any {
	out := make([]any, len(a))
	for i, v := range a {
		out[i] = t.schema(v, draft, res)
	}
	return out
}

// anchorName returns a draft-07 plain-name fragment as a 2020-12 $anchor:
// itself when 2020-12 allows it, else "_" and its bytes in hex (draft-07
// allows "#0"; 2020-12 wants a letter or '_' first).
func anchorName(frag string) string {
	ok := frag != ""
	for i := 0; i < len(frag) && ok; i++ {
		c := frag[i]
		ok = c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c == '_' ||
			i > 0 && (c >= '0' && c <= '9' || c == '-' || c == '.')
	}
	if ok {
		return frag
	}
	return "_" + hex.EncodeToString([]byte(frag))
}

// ref rewrites a JSON-pointer reference within the resource so that it
// follows the renamed keywords, and a plain-name fragment as anchorName
// does; any other reference is returned as is.
func (t *translator) ref(ref string, res any) string {
	if base, frag, ok := strings.Cut(ref, "#"); ok && frag != "" && !strings.HasPrefix(frag, "/") {
		return base + "#" + anchorName(frag)
	}
	if !strings.HasPrefix(ref, "#/") {
		return ref
	}
	toks := strings.Split(ref[2:], "/")
	v := res
	changed := false
	for i := 0; i < len(toks); i++ {
		obj, ok := v.(map[string]any)
		if !ok {
			a, ok := v.([]any)
			if !ok {
				break
			}
			n, err := strconv.Atoi(toks[i])
			if err != nil || n < 0 || n >= len(a) {
				break
			}
			v = a[n]
			continue
		}
		key := strings.NewReplacer("~1", "/", "~0", "~").Replace(toks[i])
		next := obj[key]
		switch key {
		case "items":
			if _, isArr := next.([]any); isArr {
				toks[i], changed = "prefixItems", true
			}
		case "additionalItems":
			if _, isArr := obj["items"].([]any); isArr {
				toks[i], changed = "items", true
			}
		case "dependencies":
			if i+1 < len(toks) {
				if deps, ok := next.(map[string]any); ok {
					if _, isArr := deps[toks[i+1]].([]any); isArr {
						toks[i] = "dependentRequired"
					} else {
						toks[i] = "dependentSchemas"
					}
					changed = true
				}
			}
		}
		v = next
	}
	if !changed {
		return ref
	}
	return "#/" + strings.Join(toks, "/")
}
