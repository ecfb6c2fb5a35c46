package mcppin

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// ListFunc says what a tools/list answer shows of one tool (by name; ""
// for a tool without a string name): the action, and for ListPinned the
// pinned definition's JSON (nil: not known, and the tool is hidden).
type ListFunc func(tool string) (ListAction, json.RawMessage)

// Lister returns the ListFunc of a route for one listing: each tool is
// treated (Treat) by its verdict from the Observe of that listing, and a
// tool without one (no string name) is hidden when the route has an
// allow-list, else left as is.
func (m *Mode) Lister(p *Pins, verdicts []Verdict) ListFunc {
	by := make(map[string]*Verdict, len(verdicts))
	for i := range verdicts {
		by[verdicts[i].Tool] = &verdicts[i]
	}
	return func(tool string) (ListAction, json.RawMessage) {
		v := by[tool]
		if v == nil {
			if tool == "" && len(m.Allow) == 0 {
				return ListAsIs, nil
			}
			v = &Verdict{Tool: tool, State: StateUnknown}
		}
		t := m.Treat(v)
		if t.List == ListPinned {
			return ListPinned, p.PinnedDefinition(v.Route, v.Server, v.Tool)
		}
		return t.List, nil
	}
}

// Filter returns a tools/list result (the JSON-RPC result object) with
// each tool treated as listFor says: passed as is, replaced by its pinned
// definition, or removed. Every other member of the result, and every
// tool passed, keeps its meaning: the result is re-encoded only when a
// tool is replaced or removed (members then in sorted order, white space
// dropped), and returned as it came otherwise. A result ParseTools would
// refuse is refused here too.
func Filter(result []byte, listFor ListFunc) ([]byte, error) {
	if err := checkNames(result); err != nil {
		return nil, err
	}
	var res map[string]json.RawMessage
	if err := json.Unmarshal(result, &res); err != nil || res == nil {
		return nil, fmt.Errorf("%w: the result is not an object", ErrMalformedList)
	}
	var tools []json.RawMessage
	if raw, ok := res["tools"]; ok {
		if err := json.Unmarshal(raw, &tools); err != nil {
			return nil, fmt.Errorf("%w: tools is not an array", ErrMalformedList)
		}
	}
	kept := make([]json.RawMessage, 0, len(tools))
	edited := false
	for _, raw := range tools {
		var t struct {
			Name any `json:"name"`
		}
		_ = json.Unmarshal(raw, &t)
		name, _ := t.Name.(string)
		action, pinned := listFor(name)
		switch {
		case action == ListAsIs:
			kept = append(kept, raw)
		case action == ListPinned && pinned != nil:
			kept = append(kept, pinned)
			edited = true
		default:
			edited = true
		}
	}
	if !edited {
		return result, nil
	}
	b, err := marshal(kept)
	if err != nil {
		return nil, err
	}
	res["tools"] = b
	return marshal(res)
}

// marshal encodes v without HTML escapes (strings keep their characters).
func marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformedList, err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}
