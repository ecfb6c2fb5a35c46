package openapiimport

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"go.yaml.in/yaml/v3"
)

// internalizeIDs rewrites, in an OpenAPI 3.1 document, the $refs that name
// a schema by its $id or $anchor within the same document
// ("/components/schemas/petdetails#pet_details_id") as JSON pointers
// ("#/components/schemas/PetDetails/properties/id"), and drops the $id
// and $anchor keywords, so the document's references are all local
// pointers. An $id is matched as written (the importer never resolves one
// against a network base). A document without $id or $anchor is returned
// as it is.
func internalizeIDs(data []byte) ([]byte, error) {
	if !bytes.Contains(data, []byte("$id")) && !bytes.Contains(data, []byte("$anchor")) {
		return data, nil
	}
	var raw any
	if err := yaml.Unmarshal(data, &raw); err != nil {
		return nil, err
	}
	raw = stringKeys(raw, 0)
	ids := map[string]string{}
	var collect func(v any, ptr, base string, depth int)
	collect = func(v any, ptr, base string, depth int) {
		if depth > maxWalkDepth {
			return
		}
		switch x := v.(type) {
		case map[string]any:
			if id, ok := x["$id"].(string); ok && id != "" {
				ids[id] = ptr
				base = id
			}
			if a, ok := x["$anchor"].(string); ok && a != "" {
				ids[base+"#"+a] = ptr
			}
			for k, e := range x {
				collect(e, ptr+"/"+escapePointer(k), base, depth+1)
			}
		case []any:
			for i, e := range x {
				collect(e, fmt.Sprintf("%s/%d", ptr, i), base, depth+1)
			}
		}
	}
	collect(raw, "", "", 0)
	var rewrite func(v any, depth int)
	rewrite = func(v any, depth int) {
		if depth > maxWalkDepth {
			return
		}
		switch x := v.(type) {
		case map[string]any:
			if ref, ok := x["$ref"].(string); ok && !strings.HasPrefix(ref, "#/") && ref != "#" {
				if p, ok := ids[ref]; ok {
					x["$ref"] = "#" + p
				} else if id, frag, ok := strings.Cut(ref, "#"); ok && strings.HasPrefix(frag, "/") {
					if p, ok := ids[id]; ok {
						x["$ref"] = "#" + p + frag
					}
				}
			}
			delete(x, "$id")
			delete(x, "$anchor")
			for _, e := range x {
				rewrite(e, depth+1)
			}
		case []any:
			for _, e := range x {
				rewrite(e, depth+1)
			}
		}
	}
	rewrite(raw, 0)
	return json.Marshal(raw)
}

// maxWalkDepth bounds the walks over a raw document.
const maxWalkDepth = 512

func escapePointer(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

// stringKeys makes every mapping's keys strings (YAML allows 200: as an
// integer key; JSON does not).
func stringKeys(v any, depth int) any {
	if depth > maxWalkDepth {
		return nil
	}
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = stringKeys(e, depth+1)
		}
		return x
	case map[any]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[fmt.Sprint(k)] = stringKeys(e, depth+1)
		}
		return out
	case []any:
		for i, e := range x {
			x[i] = stringKeys(e, depth+1)
		}
		return x
	}
	return v
}
