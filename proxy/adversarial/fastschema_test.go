package adversarial_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// fastSchema is a tool schema inside the subset toolgate validates valid
// calls of without jsonschema/v6 (policies' fast path): integer, number
// and string bounds, a pattern, a mixed enum, a closed nested object, an
// array, an Optional field as anyOf with null. Every object is closed as
// written, so strict closing leaves it as it is and jsonschema/v6 on this
// document is the reference.
const fastSchema = `{"type": "object", "additionalProperties": false, "required": ["q"], "properties": {
	"q": {"type": "string", "minLength": 1, "maxLength": 4},
	"slug": {"type": "string", "pattern": "^[a-z]+$"},
	"limit": {"type": "integer", "minimum": 1, "maximum": 100},
	"score": {"type": "number", "exclusiveMinimum": 0, "maximum": 0.3},
	"pick": {"enum": [1, 2.5, "x", null]},
	"filters": {"type": "object", "additionalProperties": false, "properties": {"phase": {"type": "integer", "minimum": 1, "maximum": 4}}},
	"ids": {"type": "array", "items": {"type": "string"}, "maxItems": 2},
	"cursor": {"anyOf": [{"type": "string"}, {"type": "null"}]}}}`

// fastCalls are calls at the edges a fast path could get wrong: numbers
// spelt long, with exponents, fractions of integers, near exclusive
// bounds; lengths in code points rather than bytes; a pattern's end of
// line; enum members of another type or spelling; unknown names nested.
var fastCalls = []string{
	`{"q": "abcd"}`,
	`{"q": "ñañá"}`,
	`{"q": "ñañáx"}`,
	`{"q": ""}`,
	`{"q": "a", "slug": "abc"}`,
	`{"q": "a", "slug": "abc\n"}`,
	`{"q": "a", "slug": "Abc"}`,
	`{"q": "a", "limit": 1.0}`,
	`{"q": "a", "limit": 1e2}`,
	`{"q": "a", "limit": 100.000000000000000000000}`,
	`{"q": "a", "limit": 100.0000000000000000000001}`,
	`{"q": "a", "limit": 1.00000000000000000000001e2}`,
	`{"q": "a", "limit": 1.5}`,
	`{"q": "a", "limit": -0}`,
	`{"q": "a", "limit": 99999999999999999999999}`,
	`{"q": "a", "limit": 0.99999999999999999999999}`,
	`{"q": "a", "score": 0.3}`,
	`{"q": "a", "score": 0.30000000000000004}`,
	`{"q": "a", "score": 0.300000000000000000000000001}`,
	`{"q": "a", "score": 3e-1}`,
	`{"q": "a", "score": 0}`,
	`{"q": "a", "score": -0.0}`,
	`{"q": "a", "score": 1e-400}`,
	`{"q": "a", "pick": 2.50}`,
	`{"q": "a", "pick": 25e-1}`,
	`{"q": "a", "pick": 2.5000000000000000000001}`,
	`{"q": "a", "pick": true}`,
	`{"q": "a", "pick": 1.0}`,
	`{"q": "a", "pick": "X"}`,
	`{"q": "a", "pick": null}`,
	`{"q": "a", "filters": {"phase": 4}}`,
	`{"q": "a", "filters": {"phase": 4.000000000000000000001}}`,
	`{"q": "a", "filters": {"Phase": 2}}`,
	`{"q": "a", "ids": ["x", "y"]}`,
	`{"q": "a", "ids": ["x", 1]}`,
	`{"q": "a", "ids": ["x", "y", "z"]}`,
	`{"q": "a", "cursor": null}`,
	`{"q": "a", "cursor": 5}`,
	`{"q": "a", "extra": 1}`,
	`{"limit": 5}`,
}

// TestAdversarialFastSchema sends fastCalls through a real toolgate to a
// real upstream, on a strict tool with fastSchema, and judges by what
// the upstream's handler received: a call reached it exactly when
// jsonschema/v6, compiled from the same document, accepts the call's
// arguments. So the fast path lets nothing through that the library
// refuses, and refuses nothing the library accepts.
func TestAdversarialFastSchema(t *testing.T) {
	c := jsonschema.NewCompiler()
	var doc any
	dec := json.NewDecoder(bytes.NewReader([]byte(fastSchema)))
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil {
		t.Fatal(err)
	}
	if err := c.AddResource("mem:///fast.json", doc); err != nil {
		t.Fatal(err)
	}
	ref, err := c.Compile("mem:///fast.json")
	if err != nil {
		t.Fatal(err)
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, []byte(fastSchema)); err != nil {
		t.Fatal(err)
	}
	up := newRecordingUpstream(t)
	cfg := fmt.Sprintf("listen:\n  forward: 127.0.0.1:0\ntools:\n  - {name: fast, match: {host: %q, method: POST, path: /fast}, schema: %s}\n",
		up.authority(), compact.String())
	g, err := startGate(t, cfg)
	if err != nil {
		t.Fatal(err)
	}
	fwd := g.srv.Addr("forward", 0)
	var reached, refused, leaked int
	for _, body := range fastCalls {
		dec := json.NewDecoder(bytes.NewReader([]byte(body)))
		dec.UseNumber()
		var args any
		if err := dec.Decode(&args); err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		valid := ref.Validate(args) == nil
		trace, tp := newTrace()
		status := goDo(t, fwd, nil, http.MethodPost, "http://"+up.authority()+"/fast", tp, body)
		got := up.received(trace)
		switch {
		case valid && (len(got) != 1 || got[0] != body):
			t.Errorf("%s: jsonschema/v6 accepts it, the upstream received %q (status %d)", body, got, status)
		case !valid && len(got) != 0:
			leaked++
			t.Errorf("%s: jsonschema/v6 refuses it, the upstream received it (status %d)", body, status)
		case !valid && status != http.StatusUnprocessableEntity:
			t.Errorf("%s: status %d, want a 422 refusal", body, status)
		case valid:
			reached++
		default:
			refused++
		}
	}
	t.Logf("%d calls: %d valid reached the upstream, %d invalid refused, %d leaked", len(fastCalls), reached, refused, leaked)
	if reached == 0 || refused == 0 {
		t.Errorf("the table must hold both valid and invalid calls")
	}
}
