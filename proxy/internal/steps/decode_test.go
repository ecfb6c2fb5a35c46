package steps

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
)

// FuzzDecodeValid holds decodeValid to encoding/json's Decoder with
// UseNumber: every valid JSON text decodes to the same values (the same
// types, the same strings after unquoting, the same number texts, the last
// of two equal names, empty arrays non-nil).
func FuzzDecodeValid(f *testing.F) {
	for _, s := range []string{
		`{"a":1,"b":"x","c":[1,2.5e-3,-0,true,false,null],"d":{"e":{}},"f":[]}`,
		` { "a" : [ { "b" : [ ] } , "\u00e9\n\"" ] } `, `{"a":1,"a":2}`, `{"\ud800":"\udc00x"}`,
		"{\"inv\xffalid\":\"\xc3\x28\"}", `"top"`, `[1,[2,[3]]]`, `1e999`, `-12.5E+7`, `null`,
		`{"k":"\\","K":"\/"}`, "{\"a\":\"caf\xc3\xa9\"}", `{"a":"\t"}`, `[{},{"x":[{}]}]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if !json.Valid(body) {
			return
		}
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.UseNumber()
		var want any
		if err := dec.Decode(&want); err != nil {
			t.Fatalf("Decoder refused a valid text: %v", err)
		}
		if got := decodeValid(body); !reflect.DeepEqual(got, want) {
			t.Fatalf("decodeValid(%q) = %#v, Decoder: %#v", body, got, want)
		}
	})
}

// TestDecodeValidAllocations checks that a typical argument object costs
// fewer allocations than the Decoder made of it: the reason decodeValid
// exists.
func TestDecodeValidAllocations(t *testing.T) {
	body := []byte(`{"query":"weather in paris","limit":10,"filters":{"lang":"en","tags":["a","b"]},"strict":true}`)
	ours := testing.AllocsPerRun(100, func() { decodeValid(body) })
	std := testing.AllocsPerRun(100, func() {
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.UseNumber()
		var v any
		_ = dec.Decode(&v)
	})
	if ours >= std {
		t.Fatalf("decodeValid made %.0f allocations, the Decoder %.0f", ours, std)
	}
	t.Logf("decodeValid: %.0f allocations, Decoder: %.0f", ours, std)
}
