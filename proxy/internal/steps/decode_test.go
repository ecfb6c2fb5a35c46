package steps

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/policies"
)

// FuzzDecodeJSON holds decodeJSON to encoding/json: it accepts exactly
// what json.Valid accepts; every valid text decodes to the values the
// Decoder with UseNumber gives (the same types, the same strings after
// unquoting, the same number texts, the last of two equal names, empty
// arrays non-nil); and it reports a name given twice, exactly or up to
// case folding, exactly when the members counted in the text (jsonShape)
// are more than the decoded maps hold, or two names of one map fold
// together (countMembers). decodeArgs's facts on the same pass are held
// to the passes they replaced: its depth to jsonShape's, its inRange to a
// walk of the Decoder's values with policies.NumberInRange, and with a
// depth limit it stops exactly the valid texts nested deeper (and takes
// the others whole).
func FuzzDecodeJSON(f *testing.F) {
	for _, s := range []string{
		`{"a":1,"b":"x","c":[1,2.5e-3,-0,true,false,null],"d":{"e":{}},"f":[]}`,
		` { "a" : [ { "b" : [ ] } , "\u00e9\n\"" ] } `, `{"a":1,"a":2}`, `{"\ud800":"\udc00x"}`,
		"{\"inv\xffalid\":\"\xc3\x28\"}", `"top"`, `[1,[2,[3]]]`, `1e999`, `-12.5E+7`, `null`,
		`{"k":"\\","K":"\/"}`, "{\"a\":\"caf\xc3\xa9\"}", `{"a":"\t"}`, `[{},{"x":[{}]}]`,
		`{"a":[{"b":1,"B":2}]}`, `{"x":{"y":1,"y":2}}`, "{\"\u212a\":1,\"k\":2}",
		// Not JSON: each must be refused.
		`{"a":1,}`, `[1,]`, `{"a" 1}`, `{a:1}`, `01`, `-`, `1.`, `1e`, `.5`, `+1`, `tru`, `nul`, `"\x"`,
		`"\u12g4"`, "\"a\tb\"", `[1 2]`, `{"a":1}{}`, `{"a":1`, `[`, ``, ` `, `"abc`, `{"a":1 "b":2}`,
		`[1,,2]`, `{,}`, `{"a":}`, `-01`, `1.5e+`, "\xef\xbb\xbf{}",
	} {
		f.Add([]byte(s))
	}
	f.Add([]byte(strings.Repeat("[", maxNesting) + strings.Repeat("]", maxNesting)))
	f.Add([]byte(strings.Repeat("[", maxNesting+1) + strings.Repeat("]", maxNesting+1)))
	f.Add([]byte(`{"a":[1e1001],"b":{"c":[[1E-7]]}}`))
	f.Add([]byte(`[` + strings.Repeat("9", 513) + `,0.5e+1000]`))
	f.Fuzz(func(t *testing.T, body []byte) {
		got, dup, ok := decodeJSON(body)
		if valid := json.Valid(body); ok != valid {
			t.Fatalf("decodeJSON(%q): ok %v, json.Valid %v", body, ok, valid)
		}
		if !ok {
			return
		}
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.UseNumber()
		var want any
		if err := dec.Decode(&want); err != nil {
			t.Fatalf("Decoder refused a valid text: %v", err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("decodeJSON(%q) = %#v, Decoder: %#v", body, got, want)
		}
		members, _ := jsonShape(body)
		n, folds := countMembers(want)
		if wantDup := n != members || folds; dup != wantDup {
			t.Fatalf("decodeJSON(%q): dup %v, counted %v (%d members in the text, %d decoded, folds %v)", body, dup, wantDup, members, n, folds)
		}
		_, facts, _ := decodeArgs(body, 0)
		_, depth := jsonShape(body)
		if facts.depth != depth || facts.deep {
			t.Fatalf("decodeArgs(%q): depth %d (deep %v), jsonShape %d", body, facts.depth, facts.deep, depth)
		}
		if facts.inRange == policies.HasHugeNumber(want) {
			t.Fatalf("decodeArgs(%q): in range %v, the Decoder's values' numbers say %v", body, facts.inRange, !policies.HasHugeNumber(want))
		}
		for _, limit := range []int{1, 2, 3} {
			v, lf, ok := decodeArgs(body, limit)
			if lf.deep != (depth > limit) || ok == lf.deep {
				t.Fatalf("decodeArgs(%q, %d): ok %v, deep %v; the text nests %d deep", body, limit, ok, lf.deep, depth)
			}
			if ok && !reflect.DeepEqual(v, want) {
				t.Fatalf("decodeArgs(%q, %d) = %#v, Decoder: %#v", body, limit, v, want)
			}
		}
	})
}

// TestNumberInRangeLength holds policies.MaxNumberLen to policies.NumberInRange:
// the decoder asks it only of numbers with an exponent or longer.
func TestNumberInRangeLength(t *testing.T) {
	if !policies.NumberInRange(json.Number(strings.Repeat("9", policies.MaxNumberLen))) {
		t.Fatalf("%d digits refused", policies.MaxNumberLen)
	}
	if policies.NumberInRange(json.Number(strings.Repeat("9", policies.MaxNumberLen+1))) {
		t.Fatalf("%d digits taken: policies.MaxNumberLen is behind policies.NumberInRange", policies.MaxNumberLen+1)
	}
	if policies.NumberInRange(json.Number("-" + strings.Repeat("9", policies.MaxNumberLen))) {
		t.Fatal("a sign and policies.MaxNumberLen digits taken")
	}
}

// TestDecodeValidAllocations checks that a typical argument object costs
// fewer allocations than the Decoder made of it: the reason decodeJSON
// exists.
func TestDecodeValidAllocations(t *testing.T) {
	body := []byte(`{"query":"weather in paris","limit":10,"filters":{"lang":"en","tags":["a","b"]},"strict":true}`)
	ours := testing.AllocsPerRun(100, func() { decodeJSON(body) })
	std := testing.AllocsPerRun(100, func() {
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.UseNumber()
		var v any
		_ = dec.Decode(&v)
	})
	if ours >= std {
		t.Fatalf("decodeJSON made %.0f allocations, the Decoder %.0f", ours, std)
	}
	t.Logf("decodeJSON: %.0f allocations, Decoder: %.0f", ours, std)
}
