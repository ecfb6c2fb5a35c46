package canonjson

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"
)

func decodeNumbers(t testing.TB, s string) any {
	t.Helper()
	d := json.NewDecoder(strings.NewReader(s))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		t.Fatalf("decode %s: %v", s, err)
	}
	return v
}

func TestAppendSameValueSameBytes(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []string
		want string
	}{
		{"number forms", []string{`5`, `5.0`, `5e0`, `50e-1`, `0.5E1`, `5.000e+0`}, `5`},
		{"minus zero", []string{`0`, `-0`, `0.0`, `-0e5`}, `0`},
		{"fraction", []string{`0.1`, `1e-1`, `10e-2`}, `0.1`},
		{"small", []string{`0.000001`, `1e-6`}, `0.000001`},
		{"smaller", []string{`0.0000001`, `1e-7`}, `1e-7`},
		{"large", []string{`1e21`, `1000000000000000000000`}, `1e+21`},
		{"just below exponent form", []string{`1e20`, `100000000000000000000`}, `100000000000000000000`},
		{"big integers stay exact", []string{`12345678901234567891`}, `12345678901234567891`},
		{"key order", []string{`{"b":1,"a":2}`, `{"a":2,"b":1}`, `{ "a" : 2.0 , "b" : 1 }`}, `{"a":2,"b":1}`},
		{"escapes", []string{`"\u0061\/b"`, `"a/b"`}, `"a/b"`},
		{"unicode escapes", []string{`"\u00e9"`, `"é"`}, `"é"`},
		{"controls", []string{`"\u0001\n"`}, `"\u0001\n"`},
		{"nested", []string{`{"x":[1.0,{"z":true,"y":null}]}`}, `{"x":[1,{"y":null,"z":true}]}`},
		{"utf16 key order", []string{`{"\ud83d\ude00":1,"\ue000":2}`}, "{\"\U0001F600\":1,\"\ue000\":2}"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, in := range tc.in {
				if got := string(Append(nil, decodeNumbers(t, in))); got != tc.want {
					t.Errorf("Append(%s) = %s, want %s", in, got, tc.want)
				}
				var f any
				if err := json.Unmarshal([]byte(in), &f); err != nil {
					t.Fatal(err)
				}
				if tc.name == "big integers stay exact" {
					continue // float64 cannot hold it
				}
				if got := string(Append(nil, f)); got != tc.want {
					t.Errorf("Append(float64 reading of %s) = %s, want %s", in, got, tc.want)
				}
			}
		})
	}
}

func TestAppendDifferentValuesDiffer(t *testing.T) {
	pairs := [][2]string{
		{`12345678901234567890`, `12345678901234567891`},
		{`5`, `"5"`},
		{`1`, `true`},
		{`0`, `null`},
		{`[1,2]`, `[2,1]`},
		{`{"a":1}`, `{"a":1,"b":null}`},
		{`"a b"`, `"a+b"`},
		{`1e400`, `1e401`},
		{`-1`, `1`},
	}
	for _, p := range pairs {
		a, b := Append(nil, decodeNumbers(t, p[0])), Append(nil, decodeNumbers(t, p[1]))
		if bytes.Equal(a, b) {
			t.Errorf("%s and %s have one canonical form %s", p[0], p[1], a)
		}
	}
}

// TestAppendRFC8785Numbers checks the float64 examples of RFC 8785
// appendix B.
func TestAppendRFC8785Numbers(t *testing.T) {
	for _, tc := range []struct {
		bits uint64
		want string
	}{
		{0x0000000000000000, "0"},
		{0x8000000000000000, "0"},
		{0x0000000000000001, "5e-324"},
		{0x7fefffffffffffff, "1.7976931348623157e+308"},
		{0x4340000000000000, "9007199254740992"},
		{0x444b1ae4d6e2ef50, "1e+21"},
		{0x3eb0c6f7a0b5ed8d, "0.000001"},
		{0x3eb0c6f7a0b5ed8c, "9.999999999999997e-7"},
		{0x41b3de4355555555, "333333333.3333333"},
		{0x44b52d02c7e14af6, "1e+23"},
	} {
		if got := string(Append(nil, math.Float64frombits(tc.bits))); got != tc.want {
			t.Errorf("%#x: got %s, want %s", tc.bits, got, tc.want)
		}
	}
	for _, f := range []float64{math.NaN(), math.Inf(1)} {
		if got := string(Append(nil, f)); got != "null" {
			t.Errorf("%v: got %s, want null", f, got)
		}
	}
}

func TestAppendOtherGoValues(t *testing.T) {
	if got := string(Append(nil, map[string]any{"n": 5, "m": map[string]string{"b": "x", "a": "y"}, "l": []int{1}})); got != `{"l":[1],"m":{"a":"y","b":"x"},"n":5}` {
		t.Errorf("got %s", got)
	}
}

// FuzzAppend checks, for any JSON document, that the canonical form is
// JSON, is a fixed point, and is the same whether numbers were decoded as
// json.Number or as float64 (where float64 holds them exactly).
func FuzzAppend(f *testing.F) {
	for _, s := range []string{`5`, `50e-1`, `{"b":[1,2.5e3,"x"],"a":null}`, `"\u00e9\ud83d\ude00"`, `-0.0`, `1e-7`, `[true,false]`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d := json.NewDecoder(strings.NewReader(s))
		d.UseNumber()
		var v any
		if d.Decode(&v) != nil {
			return
		}
		c := Append(nil, v)
		d2 := json.NewDecoder(bytes.NewReader(c))
		d2.UseNumber()
		var back any
		if err := d2.Decode(&back); err != nil {
			t.Fatalf("canonical form of %q is not JSON: %s: %v", s, c, err)
		}
		if c2 := Append(nil, back); !bytes.Equal(c, c2) {
			t.Fatalf("not a fixed point: %s then %s", c, c2)
		}
	})
}
