// Package jsonnum reads a JSON number's text as an exact decimal, without
// allocating: what the fleet budgets digest (policies/budget) and the
// schema fast path compares (policies) both start from.
package jsonnum

// Decimal is a JSON number read as sign × M × 10^(Exp+Shift): M its
// significant digits, from the first non-zero digit to the last.
type Decimal struct {
	Neg       bool
	M         uint64 // the significant digits, when NSig <= 19
	NSig      int    // significant digits: first to last non-zero digit (0 for zero)
	First     int    // index of the first significant digit in the text
	Shift     int64  // trailing zeros dropped minus fraction digits kept
	Exp       int64  // the written exponent, when ExpDigits <= 15
	ExpDigits int    // the written exponent's digits, leading zeros aside
	ExpAt     int    // index of the exponent's sign or first digit
	zeros     int64  // zeros read since the last non-zero digit
}

// digit takes one mantissa digit at index at; frac says it follows the
// decimal point.
func (d *Decimal) digit(c byte, frac bool, at int) {
	if frac {
		d.Shift--
	}
	if c == '0' {
		if d.NSig > 0 {
			d.zeros++
		}
		return
	}
	if d.NSig == 0 {
		d.First = at
	}
	for ; d.zeros > 0; d.zeros-- {
		d.NSig++
		d.M *= 10
	}
	d.NSig++
	d.M = d.M*10 + uint64(c-'0')
}

// Parse reads a JSON number (RFC 8259 grammar: -?int[.digits][e[+-]digits],
// no leading zeros); ok is false for any other text.
func Parse[T string | []byte](s T) (d Decimal, ok bool) {
	i := 0
	if i < len(s) && s[i] == '-' {
		d.Neg = true
		i++
	}
	switch {
	case i >= len(s):
		return d, false
	case s[i] == '0':
		i++
	case s[i] >= '1' && s[i] <= '9':
		for ; i < len(s) && s[i] >= '0' && s[i] <= '9'; i++ {
			d.digit(s[i], false, i)
		}
	default:
		return d, false
	}
	if i < len(s) && s[i] == '.' {
		i++
		start := i
		for ; i < len(s) && s[i] >= '0' && s[i] <= '9'; i++ {
			d.digit(s[i], true, i)
		}
		if i == start {
			return d, false
		}
	}
	d.Shift += d.zeros
	d.zeros = 0
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		d.ExpAt = i
		eneg := false
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			eneg = s[i] == '-'
			i++
		}
		start := i
		for ; i < len(s) && s[i] == '0'; i++ {
		}
		for ; i < len(s) && s[i] >= '0' && s[i] <= '9'; i++ {
			d.ExpDigits++
			if d.ExpDigits <= 15 {
				d.Exp = d.Exp*10 + int64(s[i]-'0')
			}
		}
		if i == start {
			return d, false
		}
		if eneg {
			d.Exp = -d.Exp
		}
	}
	return d, i == len(s)
}
