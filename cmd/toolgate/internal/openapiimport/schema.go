package openapiimport

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/toolgate/toolgate/policies"
)

// converter turns one operation's OpenAPI schemas into JSON Schema
// 2020-12: $refs inlined (a recursive one as $defs), OpenAPI 3.0's
// keywords translated, keywords that check nothing (descriptions,
// examples, xml, extensions) left out.
type converter struct {
	im *importer
	// defs are the schemas a recursive $ref names, by their $defs name.
	defs map[string]any
	// defName is each recursive $ref's name in defs.
	defName map[string]string
	// stack are the $refs being inlined, innermost last.
	stack []string
	// recursive are the $refs met again while being inlined.
	recursive map[string]bool
	// nodes counts the schema objects written, against MaxSchemaNodes.
	nodes int
	notes []string
}

// schemaRef converts a kin-openapi schema reference.
func (cv *converter) schemaRef(sr *openapi3.SchemaRef) (any, error) {
	v, err := marshalSchema(sr)
	if err != nil {
		return nil, err
	}
	return cv.convert(v, 0)
}

// knownFormat is the set of formats toolgate checks.
var knownFormat = func() map[string]bool {
	m := map[string]bool{}
	for _, f := range policies.KnownFormats {
		m[f] = true
	}
	return m
}()

// base64Pattern is what OpenAPI's format "byte" (base64 text) allows.
const base64Pattern = `^[A-Za-z0-9+/]*={0,2}$`

// plainKeys are the keywords copied as they are.
var plainKeys = map[string]bool{
	"type": true, "enum": true, "const": true, "minimum": true, "maximum": true, "multipleOf": true,
	"minLength": true, "maxLength": true, "pattern": true, "minItems": true, "maxItems": true,
	"uniqueItems": true, "minContains": true, "maxContains": true, "required": true,
	"minProperties": true, "maxProperties": true, "dependentRequired": true,
}

// oneSchemaKeys hold one schema (or a boolean).
var oneSchemaKeys = map[string]bool{
	"items": true, "not": true, "if": true, "then": true, "else": true, "contains": true,
	"propertyNames": true, "additionalProperties": true, "unevaluatedProperties": true,
	"unevaluatedItems": true,
}

// schemaMapKeys hold a map of schemas; schemaListKeys a list.
var (
	schemaMapKeys  = map[string]bool{"properties": true, "patternProperties": true, "dependentSchemas": true}
	schemaListKeys = map[string]bool{"allOf": true, "anyOf": true, "oneOf": true, "prefixItems": true}
)

func (cv *converter) convert(node any, depth int) (any, error) {
	m, ok := node.(map[string]any)
	if !ok {
		if b, ok := node.(bool); ok {
			return b, nil
		}
		return nil, fmt.Errorf("a schema is a %T, not an object", node)
	}
	cv.nodes++
	if cv.nodes > MaxSchemaNodes {
		return nil, fmt.Errorf("its schema has more than %d nodes once its $refs are inlined", MaxSchemaNodes)
	}
	for _, k := range []string{"$dynamicRef", "$dynamicAnchor", "$anchor", "$id", "$recursiveRef"} {
		if _, ok := m[k]; ok {
			return nil, fmt.Errorf("schema keyword %s is not supported by the importer", k)
		}
	}
	if ref, ok := m["$ref"].(string); ok {
		return cv.ref(ref, m, depth)
	}
	out := map[string]any{}
	for k, v := range m {
		switch {
		case plainKeys[k]:
			out[k] = v
		case oneSchemaKeys[k]:
			if b, ok := v.(bool); ok {
				out[k] = b
				continue
			}
			if k == "items" {
				if _, isList := v.([]any); isList {
					return nil, fmt.Errorf("items given as a list (a tuple) is not OpenAPI 3")
				}
			}
			c, err := cv.convert(v, depth)
			if err != nil {
				return nil, err
			}
			out[k] = c
		case schemaMapKeys[k]:
			mm, ok := v.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("%s is not a map", k)
			}
			cm := make(map[string]any, len(mm))
			for name, sub := range mm {
				c, err := cv.convert(sub, depth)
				if err != nil {
					return nil, err
				}
				cm[name] = c
			}
			out[k] = cm
		case schemaListKeys[k]:
			l, ok := v.([]any)
			if !ok {
				return nil, fmt.Errorf("%s is not a list", k)
			}
			cl := make([]any, 0, len(l))
			for _, sub := range l {
				c, err := cv.convert(sub, depth)
				if err != nil {
					return nil, err
				}
				if d, ok := m["discriminator"].(map[string]any); ok && (k == "oneOf" || k == "anyOf") {
					c = discriminated(c, sub, d)
				}
				cl = append(cl, c)
			}
			out[k] = cl
		case k == "readOnly":
			if v == true {
				out[k] = true
			}
		}
	}
	cv.translateFormat(m, out)
	cv.translateBounds(m, out)
	if !cv.im.is31 && m["nullable"] == true {
		if _, typed := out["type"]; !typed && len(out) > 0 {
			// nullable beside allOf/oneOf without a type (the 3.0 way to
			// make a $ref nullable): null, or the schema.
			ro := out["readOnly"]
			delete(out, "readOnly")
			out = map[string]any{"anyOf": []any{map[string]any{"type": "null"}, out}}
			if ro == true {
				out["readOnly"] = true
			}
		} else {
			nullable(out)
		}
	}
	if d, ok := m["discriminator"].(map[string]any); ok {
		if pn, ok := d["propertyName"].(string); ok {
			if props, ok := out["properties"].(map[string]any); ok && props[pn] != nil {
				req, _ := out["required"].([]any)
				if !slices.Contains(req, any(pn)) {
					out["required"] = append(req, pn)
				}
			}
		}
	}
	dropReadOnly(out)
	return out, nil
}

// ref inlines a $ref (a recursive one becomes a $ref into $defs). In
// OpenAPI 3.1 the keywords beside a $ref apply too; in 3.0 they are
// ignored, as 3.0 says.
func (cv *converter) ref(ref string, m map[string]any, depth int) (any, error) {
	if !strings.HasPrefix(ref, "#") {
		return nil, fmt.Errorf("external $ref %q: the importer resolves references within the document only", ref)
	}
	if slices.Contains(cv.stack, ref) {
		if cv.recursive == nil {
			cv.recursive = map[string]bool{}
		}
		cv.recursive[ref] = true
		return map[string]any{"$ref": "#/$defs/" + cv.nameOf(ref)}, nil
	}
	if depth >= MaxRefDepth {
		return nil, fmt.Errorf("$refs nest more than %d deep", MaxRefDepth)
	}
	target, ok := jsonPointerGet(cv.im.raw, ref)
	if !ok {
		return nil, fmt.Errorf("$ref %q names nothing in the document", ref)
	}
	cv.stack = append(cv.stack, ref)
	res, err := cv.convert(target, depth+1)
	cv.stack = cv.stack[:len(cv.stack)-1]
	if err != nil {
		return nil, err
	}
	if cv.recursive[ref] {
		name := cv.nameOf(ref)
		if cv.defs == nil {
			cv.defs = map[string]any{}
		}
		if _, done := cv.defs[name]; !done {
			cv.defs[name] = res
		}
		res = map[string]any{"$ref": "#/$defs/" + name}
	}
	if !cv.im.is31 {
		return res, nil
	}
	sib := map[string]any{}
	for k, v := range m {
		if k != "$ref" {
			sib[k] = v
		}
	}
	if len(sib) == 0 {
		return res, nil
	}
	cs, err := cv.convert(sib, depth)
	if err != nil {
		return nil, err
	}
	s, _ := cs.(map[string]any)
	if len(s) == 0 {
		return res, nil
	}
	rm, ok := res.(map[string]any)
	if !ok {
		return map[string]any{"allOf": []any{res, s}}, nil
	}
	if _, isRef := rm["$ref"]; !isRef {
		merged := make(map[string]any, len(rm)+len(s))
		for k, v := range rm {
			merged[k] = v
		}
		clash := false
		for k, v := range s {
			if k == "required" {
				a, _ := merged["required"].([]any)
				b, _ := v.([]any)
				for _, x := range b {
					if !slices.Contains(a, x) {
						a = append(a, x)
					}
				}
				merged["required"] = a
				continue
			}
			if _, ok := merged[k]; ok {
				clash = true
				break
			}
			merged[k] = v
		}
		if !clash {
			return merged, nil
		}
	}
	s["allOf"] = append([]any{res}, anyList(s["allOf"])...)
	return s, nil
}

func anyList(v any) []any {
	l, _ := v.([]any)
	return l
}

// nameOf is a recursive $ref's name in $defs.
func (cv *converter) nameOf(ref string) string {
	if n, ok := cv.defName[ref]; ok {
		return n
	}
	if cv.defName == nil {
		cv.defName = map[string]string{}
	}
	base := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' || r == '.' {
			return r
		}
		return '_'
	}, refName(ref))
	if base == "" {
		base = "def"
	}
	name := base
	for n := 2; slices.Contains(mapValues(cv.defName), name); n++ {
		name = fmt.Sprintf("%s_%d", base, n)
	}
	cv.defName[ref] = name
	return name
}

func mapValues(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

// translateFormat keeps the formats toolgate checks and turns OpenAPI's
// own into checks toolgate has: int32 becomes its bounds, byte (base64) a
// pattern. The rest (int64, float, double, binary, password, and formats
// toolgate does not know) are left out: toolgate refuses a schema naming a
// format it would not check.
func (cv *converter) translateFormat(m, out map[string]any) {
	f, ok := m["format"].(string)
	if !ok {
		return
	}
	switch {
	case knownFormat[f]:
		out["format"] = f
	case f == "int32":
		if lo, ok := num(out["minimum"]); !ok || lo < math.MinInt32 {
			out["minimum"] = math.MinInt32
		}
		if hi, ok := num(out["maximum"]); !ok || hi > math.MaxInt32 {
			out["maximum"] = math.MaxInt32
		}
	case f == "byte":
		if _, ok := out["pattern"]; !ok {
			out["pattern"] = base64Pattern
		}
	}
}

func num(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, true
	case int:
		return float64(x), true
	}
	return 0, false
}

// translateBounds turns OpenAPI 3.0's (draft-04's) boolean
// exclusiveMinimum and exclusiveMaximum into 2020-12's numbers.
func (cv *converter) translateBounds(m, out map[string]any) {
	for _, p := range [][2]string{{"exclusiveMinimum", "minimum"}, {"exclusiveMaximum", "maximum"}} {
		switch v := m[p[0]].(type) {
		case bool:
			if v {
				if b, ok := out[p[1]]; ok {
					out[p[0]] = b
					delete(out, p[1])
				}
			}
		case float64:
			out[p[0]] = v
		}
	}
}

// nullable applies OpenAPI 3.0's nullable: true: null joins the type and
// the enum.
func nullable(out map[string]any) {
	switch t := out["type"].(type) {
	case string:
		out["type"] = []any{t, "null"}
	case []any:
		if !slices.Contains(t, any("null")) {
			out["type"] = append(t, "null")
		}
	}
	if e, ok := out["enum"].([]any); ok && !slices.Contains(e, nil) {
		out["enum"] = append(e, nil)
	}
}

// dropReadOnly removes from a request schema the properties the document
// marks readOnly (they "SHOULD NOT be sent as part of the request"), from
// properties and required alike.
func dropReadOnly(out map[string]any) {
	props, ok := out["properties"].(map[string]any)
	if !ok {
		return
	}
	var gone []string
	for name, p := range props {
		if pm, ok := p.(map[string]any); ok {
			if pm["readOnly"] == true {
				delete(props, name)
				gone = append(gone, name)
				continue
			}
			delete(pm, "readOnly")
		}
	}
	if req, ok := out["required"].([]any); ok && len(gone) > 0 {
		kept := req[:0:0]
		for _, r := range req {
			if s, ok := r.(string); !ok || !slices.Contains(gone, s) {
				kept = append(kept, r)
			}
		}
		if len(kept) == 0 {
			delete(out, "required")
		} else {
			out["required"] = kept
		}
	}
}

// discriminated makes one branch of a oneOf or anyOf with a discriminator
// hold only for its own discriminator values: the property the
// discriminator names must be present and one of the values that map to
// this branch (the mapping's keys for its $ref, or the name of the schema
// it refers to). So a call matches the branch its discriminator names, as
// OpenAPI means, not every branch whose shape it happens to fit.
func discriminated(conv, raw any, d map[string]any) any {
	pn, _ := d["propertyName"].(string)
	rm, _ := raw.(map[string]any)
	ref, _ := rm["$ref"].(string)
	if pn == "" || ref == "" {
		return conv
	}
	var values []any
	if mp, ok := d["mapping"].(map[string]any); ok {
		keys := make([]string, 0, len(mp))
		for k := range mp {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			if v, _ := mp[k].(string); v == ref || v == refName(ref) {
				values = append(values, k)
			}
		}
	}
	if len(values) == 0 {
		values = []any{refName(ref)}
	}
	var cond map[string]any
	if len(values) == 1 {
		cond = map[string]any{"const": values[0]}
	} else {
		cond = map[string]any{"enum": values}
	}
	return map[string]any{"allOf": []any{conv, map[string]any{
		"properties": map[string]any{pn: cond},
		"required":   []any{pn},
	}}}
}
