package budget

import (
	"context"
	"encoding/json"
	"hash/maphash"
	"net/http"
	"testing"
	"time"
)

// FuzzDigest digests arbitrary JSON arguments (outside input: the call's
// body): it never panics, the same arguments decoded twice give the same
// digest, and so does a copy whose object members come in reverse order.
func FuzzDigest(f *testing.F) {
	for _, s := range []string{
		`{}`, `{"term":"p53","retmax":20}`, `{"a":{"b":[1,2,{"c":null}]},"d":true}`,
		`{"x":1e400}`, `{"":[[[[[[[[[[]]]]]]]]]]}`, `{"a":"\u0000","b":-0}`,
	} {
		f.Add([]byte(s))
	}
	seed := maphash.MakeSeed()
	f.Fuzz(func(t *testing.T, data []byte) {
		var a, b map[string]any
		dec := func(v *map[string]any) bool {
			d := json.NewDecoder(bytesReader(data))
			d.UseNumber()
			return d.Decode(v) == nil
		}
		if !dec(&a) || !dec(&b) {
			return
		}
		if Digest(seed, a) != Digest(seed, b) {
			t.Fatalf("the same arguments, two digests: %s", data)
		}
		if Digest(seed, a) != Digest(seed, reversed(a).(map[string]any)) {
			t.Fatalf("member order changed the digest: %s", data)
		}
	})
}

// reversed rebuilds v with every object's members inserted in reverse
// order of a first iteration (Go's map order is random anyway; this makes
// the insertion history differ too).
func reversed(v any) any {
	switch x := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		out := make(map[string]any, len(x))
		for i := len(keys) - 1; i >= 0; i-- {
			out[keys[i]] = reversed(x[keys[i]])
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = reversed(e)
		}
		return out
	}
	return v
}

// FuzzCostHeader settles calls with arbitrary cost header values (outside
// input: upstream's answer): it never panics, the cost charged never goes
// below zero, and a value that is not a non-negative number leaves the
// configured cost.
func FuzzCostHeader(f *testing.F) {
	for _, s := range []string{"7", "0.25", " 3 ", "-1", "NaN", "Inf", "1e309", "", "abc", "0x10", "1_000"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		cfg := Config{
			Limits: []Limit{{Name: "c", Cost: 1e12, Window: time.Hour}},
			Costs:  map[string]Cost{"t": {Header: "X-Cost"}},
		}
		if err := cfg.Validate([]string{"t"}, nil); err != nil {
			t.Fatal(err)
		}
		e := New(&cfg, nil)
		c := &Call{Tool: "t"}
		if r := e.Admit(context.Background(), c); r.Refused {
			t.Fatal(r)
		}
		e.Settle(c, Outcome{Header: http.Header{"X-Cost": {v}}})
		got := e.Counters(&Call{Tool: "t"})["limits"].(map[string]any)["c"].(map[string]any)["cost"].(float64)
		if got < 0 || got != got {
			t.Fatalf("cost %v after header %q", got, v)
		}
	})
}
