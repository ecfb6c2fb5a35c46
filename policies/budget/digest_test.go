package budget

import (
	"encoding/json"
	"hash/maphash"
	"math"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/toolgate/toolgate/internal/jsonnum"
)

// TestDigestByMeaning checks what counts as the same call for loop
// breaking: spellings of one JSON value digest alike, values that a
// mainstream reader (float64, int64, a decimal type) tells apart do not.
func TestDigestByMeaning(t *testing.T) {
	seed := maphash.MakeSeed()
	n := func(s string) any { return json.Number(s) }
	same := []struct {
		name string
		vs   []any
	}{
		{"five", []any{n("5"), n("5.0"), n("5e0"), n("50e-1"), n("0.5e1"), n("5.000E+0"), n("500e-2"), 5.0, 5, int64(5)}},
		{"zero and minus zero", []any{n("0"), n("-0"), n("0.0"), n("-0.0e-7"), n("0e99999999999999999999"), 0.0, math.Copysign(0, -1), 0}},
		{"a fraction", []any{n("0.25"), n("2.5e-1"), n("25E-2"), n("0.250"), 0.25}},
		{"negative", []any{n("-1200"), n("-1.2e3"), n("-12e2"), n("-1200.00"), -1200.0, -1200}},
		{"a float64 beyond 2^53", []any{n("1e20"), n("100000000000000000000"), 1e20}},
		{"a long decimal", []any{n("1.23456789012345678901"), n("123456789012345678901e-20"), n("0.0123456789012345678901e2")}},
		{"a huge exponent", []any{n("1e10000000000000000"), n("10e9999999999999999"), n("0.1e10000000000000001")}},
		{"min int64", []any{n("-9223372036854775808"), int64(math.MinInt64)}},
		{"escapes are decoded", []any{decode(t, `"A\u00e9"`), decode(t, `"Aé"`), decode(t, `"\u0041\u00E9"`)}},
		{"key order", []any{decode(t, `{"a":1,"b":{"c":[1,2],"d":"x"}}`), decode(t, `{"b":{"d":"x","c":[1.0,2e0]},"a":10e-1}`)}},
		{"query values", []any{[]string{"a", "b"}, []any{"a", "b"}}},
	}
	for _, tc := range same {
		want := Digest(seed, map[string]any{"x": tc.vs[0]})
		for _, v := range tc.vs[1:] {
			if got := Digest(seed, map[string]any{"x": v}); got != want {
				t.Errorf("%s: %#v digests apart from %#v", tc.name, v, tc.vs[0])
			}
		}
	}
	// Each of these differs from every other: a reader tells them apart.
	differ := []any{
		n("12345678901234567890"), n("12345678901234567891"), // one float64, two int64s
		n("9007199254740993"), n("9007199254740992"), // 2^53+1 and 2^53: one float64
		n("0.1"), n("0.10000000000000000001"), 0.30000000000000004, n("0.3"),
		n("1e400"), n("1e401"), n("-1e400"), // beyond float64: infinite for floats, apart for decimals
		n("1e-400"), n("1e-401"), // below float64: zero for floats, apart for decimals
		n("5"), n("-5"), n("6"), n("50"), n("0.5"),
		"5", true, false, nil, []any{}, map[string]any{}, []any{n("5")},
		"A\u00e9", "Ae\u0301", // NFC and NFD: different strings to every reader
		math.Inf(1), math.Inf(-1), math.NaN(),
		n("1e10000000000000000"), n("1e10000000000000001"),
		n("0x10"), // not a JSON number: itself
	}
	seen := map[uint64]int{}
	for i, v := range differ {
		d := Digest(seed, map[string]any{"x": v})
		if j, dup := seen[d]; dup {
			t.Errorf("%#v and %#v digest alike", differ[j], v)
		}
		seen[d] = i
	}
}

func decode(t *testing.T, s string) any {
	t.Helper()
	d := json.NewDecoder(bytesReader([]byte(s)))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

// TestParseDecimalRefusesNonNumbers checks that text outside JSON's number
// grammar is not read as a number (it digests as itself).
func TestParseDecimalRefusesNonNumbers(t *testing.T) {
	for _, s := range []string{"", "-", "+1", "01", "1.", ".5", "1e", "1e+", "0x1", "1_0", "NaN", "Infinity", "1.5.2", "--1", "1 ", " 1", "1e5e5"} {
		if _, ok := jsonnum.Parse(s); ok {
			t.Errorf("%q read as a number", s)
		}
	}
}

// TestDigestFloatFastPath checks the float64 fast path against the
// shortest decimal strconv writes, on floats with few decimals and on
// random bit patterns.
func TestDigestFloatFastPath(t *testing.T) {
	seed := maphash.MakeSeed()
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 200000; i++ {
		var f float64
		switch i % 3 {
		case 0:
			f = float64(r.Int64N(1e12)-5e11) / pow10[r.IntN(len(pow10))]
		case 1:
			f = math.Float64frombits(r.Uint64())
		default:
			f = r.NormFloat64() * pow10[r.IntN(8)]
		}
		if math.IsNaN(f) || math.IsInf(f, 0) {
			continue
		}
		want := digestNumber(seed, strconv.FormatFloat(f, 'e', -1, 64))
		if got := digestFloat(seed, f); got != want {
			t.Fatalf("%v (%b): the fast path digests apart from %s", f, f, strconv.FormatFloat(f, 'e', -1, 64))
		}
	}
}
