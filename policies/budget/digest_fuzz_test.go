package budget

import (
	"bytes"
	"encoding/json"
	"fmt"
	"hash/maphash"
	"math/big"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzDigestMeaning checks the loop digest against a slow reference
// canonical form (numbers as exact decimals written with math/big, object
// members sorted): two arguments digest alike exactly when the reference
// says they are the same value, and a random respelling of the first
// (numbers in another form, strings with other escapes, members in
// another order, other white space) digests as the first.
func FuzzDigestMeaning(f *testing.F) {
	for _, s := range [][2]string{
		{`{"n":5}`, `{"n":50e-1}`},
		{`{"n":5}`, `{"n":5.0000000000000000001}`},
		{`{"n":12345678901234567890}`, `{"n":12345678901234567891}`},
		{`{"n":-0}`, `{"n":0.0e5}`},
		{`{"a":"\u0041","b":[1,2]}`, `{"b":[1,2.0],"a":"A"}`},
		{`{"n":1e10000000000000000}`, `{"n":10e9999999999999999}`},
		{`{"n":0.1}`, `{"n":0.10000000000000001}`},
		{`{"s":"5"}`, `{"s":5}`},
	} {
		f.Add([]byte(s[0]), []byte(s[1]), uint64(1))
	}
	seed := maphash.MakeSeed()
	f.Fuzz(func(t *testing.T, a, b []byte, choice uint64) {
		va, ok := decodeArgs(a)
		if !ok {
			return
		}
		da := Digest(seed, va)
		// A respelling of a digests as a.
		r := rand.New(rand.NewPCG(choice, 0x5eed))
		var buf bytes.Buffer
		respell(&buf, va, r)
		vr, ok := decodeArgs(buf.Bytes())
		if !ok {
			t.Fatalf("the respelling of %s does not decode: %s", a, buf.Bytes())
		}
		if Digest(seed, vr) != da {
			t.Fatalf("%s respelt as %s digests apart", a, buf.Bytes())
		}
		vb, ok := decodeArgs(b)
		if !ok {
			return
		}
		sameRef := refCanon(va) == refCanon(vb)
		if sameDigest := Digest(seed, vb) == da; sameDigest != sameRef {
			t.Fatalf("%s and %s: same value %v, same digest %v", a, b, sameRef, sameDigest)
		}
	})
}

func decodeArgs(data []byte) (map[string]any, bool) {
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	var v map[string]any
	if d.Decode(&v) != nil || v == nil || d.More() {
		return nil, false
	}
	return v, true
}

// respell writes v as JSON in a randomly chosen spelling of the same value.
func respell(w *bytes.Buffer, v any, r *rand.Rand) {
	ws := func() {
		if r.IntN(4) == 0 {
			w.WriteString(" \n\t"[:r.IntN(3)+1])
		}
	}
	switch x := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		r.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
		w.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				w.WriteByte(',')
			}
			ws()
			respellString(w, k, r)
			ws()
			w.WriteByte(':')
			respell(w, x[k], r)
		}
		ws()
		w.WriteByte('}')
	case []any:
		w.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				w.WriteByte(',')
			}
			ws()
			respell(w, e, r)
		}
		w.WriteByte(']')
	case string:
		respellString(w, x, r)
	case json.Number:
		w.WriteString(respellNumber(string(x), r))
	default:
		b, _ := json.Marshal(x)
		w.Write(b)
	}
}

// respellString writes s as a JSON string, each character plain or
// escaped at random.
func respellString(w *bytes.Buffer, s string, r *rand.Rand) {
	w.WriteByte('"')
	for _, c := range s {
		switch {
		case c == '"' || c == '\\' || c < 0x20 || r.IntN(3) == 0:
			if c > 0xffff {
				c1, c2 := utf16Pair(c)
				fmt.Fprintf(w, `\u%04x\u%04X`, c1, c2)
			} else if r.IntN(2) == 0 {
				fmt.Fprintf(w, `\u%04x`, c)
			} else {
				fmt.Fprintf(w, `\u%04X`, c)
			}
		case c == '/' && r.IntN(2) == 0:
			w.WriteString(`\/`)
		default:
			var b [utf8.UTFMax]byte
			w.Write(b[:utf8.EncodeRune(b[:], c)])
		}
	}
	w.WriteByte('"')
}

func utf16Pair(c rune) (rune, rune) {
	c -= 0x10000
	return 0xd800 + (c>>10)&0x3ff, 0xdc00 + c&0x3ff
}

// respellNumber writes a JSON number's value in another form: its digits
// moved across the decimal point with the exponent adjusted, zeros added.
func respellNumber(s string, r *rand.Rand) string {
	neg, digits, exp := refDecimal(s)
	if digits == "0" {
		return []string{"0", "-0", "0.0", "-0.0e-3", "0E+7"}[r.IntN(5)]
	}
	// digits × 10^exp; write it as 0.digits×10^(exp+len) or with k
	// trailing zeros added.
	k := r.IntN(4)
	digits += strings.Repeat("0", k)
	exp.Sub(exp, big.NewInt(int64(k)))
	sign := ""
	if neg {
		sign = "-"
	}
	switch r.IntN(3) {
	case 0:
		return sign + digits + "e" + exp.String()
	case 1:
		e := new(big.Int).Add(exp, big.NewInt(int64(len(digits))))
		return sign + "0." + digits + "E+" + strings.TrimPrefix(e.String(), "+")
	default:
		if exp.Sign() >= 0 && exp.Cmp(big.NewInt(30)) < 0 {
			return sign + digits + strings.Repeat("0", int(exp.Int64()))
		}
		// d.ddd form
		e := new(big.Int).Add(exp, big.NewInt(int64(len(digits)-1)))
		frac := digits[1:]
		if frac == "" {
			frac = "0"
		}
		return sign + digits[:1] + "." + frac + "e" + e.String()
	}
}

// refDecimal reads a JSON number the slow way: sign, significant digits
// without leading or trailing zeros ("0" for zero), and the exponent.
func refDecimal(s string) (neg bool, digits string, exp *big.Int) {
	neg = strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	exp = new(big.Int)
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		exp.SetString(strings.TrimPrefix(s[i+1:], "+"), 10)
		s = s[:i]
	}
	if i := strings.IndexByte(s, '.'); i >= 0 {
		exp.Sub(exp, big.NewInt(int64(len(s)-i-1)))
		s = s[:i] + s[i+1:]
	}
	s = strings.TrimLeft(s, "0")
	t := strings.TrimRight(s, "0")
	exp.Add(exp, big.NewInt(int64(len(s)-len(t))))
	if t == "" {
		return false, "0", new(big.Int)
	}
	return neg, t, exp
}

// refCanon is the reference canonical form of a decoded value.
func refCanon(v any) string {
	switch x := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var b strings.Builder
		b.WriteByte('{')
		for _, k := range keys {
			b.WriteString(strconv.Quote(k) + ":" + refCanon(x[k]) + ",")
		}
		return b.String() + "}"
	case []any:
		var b strings.Builder
		b.WriteByte('[')
		for _, e := range x {
			b.WriteString(refCanon(e) + ",")
		}
		return b.String() + "]"
	case string:
		return strconv.Quote(x)
	case json.Number:
		neg, d, e := refDecimal(string(x))
		return fmt.Sprintf("n%v%se%s", neg, d, e)
	default:
		return fmt.Sprint(x)
	}
}
