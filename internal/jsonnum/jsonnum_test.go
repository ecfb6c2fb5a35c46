package jsonnum

import (
	"math/big"
	"regexp"
	"strconv"
	"testing"
)

// jsonNumber is RFC 8259's number grammar.
var jsonNumber = regexp.MustCompile(`^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?$`)

// FuzzParse holds Parse to the grammar, and its decimal, where its digits
// and exponent are held exactly, to big.Rat's reading of the same text.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"0", "-0", "1", "-12.50e+3", "0.001", "100", "1e-7", "01", "1.", ".5", "+1", "1e", "0e0000000000000000009", "12345678901234567890123", "1.5.2", " 1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, ok := Parse(s)
		if want := jsonNumber.MatchString(s); ok != want {
			t.Fatalf("Parse(%q) ok = %v, the grammar says %v", s, ok, want)
		}
		// big.Rat would build 10^Exp: only small exponents are compared.
		if !ok || d.NSig > 19 || d.ExpDigits > 3 || len(s) > 200 {
			return
		}
		want, _ := new(big.Rat).SetString(s)
		got := new(big.Rat)
		if d.NSig > 0 {
			m := strconv.FormatUint(d.M, 10)
			if d.Neg {
				m = "-" + m
			}
			e := d.Exp + d.Shift
			if e > 400 || e < -400 {
				return
			}
			got.SetString(m + "e" + strconv.FormatInt(e, 10))
		}
		if got.Cmp(want) != 0 {
			t.Errorf("Parse(%q) = %+v: %s, big.Rat reads %s", s, d, got.RatString(), want.RatString())
		}
		if d.NSig > 0 && s[d.First] == '0' {
			t.Errorf("Parse(%q): First = %d, not a significant digit", s, d.First)
		}
	})
}
