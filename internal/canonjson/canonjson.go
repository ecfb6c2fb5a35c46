// Package canonjson writes a JSON value in one canonical form, after RFC
// 8785 (JSON Canonicalization Scheme), so that two spellings of the same
// value are the same bytes: object members sorted by their names' UTF-16
// code units, no insignificant white space, strings with the fewest
// escapes, and numbers by value (5, 5.0, 5e0 and 50e-1 are all 5).
//
// Numbers are canonical by their exact decimal value, not by the float64
// they round to: where RFC 8785 would write a number that float64 holds
// exactly, this package writes the same text (ECMAScript's
// Number.prototype.toString), and two numbers that differ only past
// float64's precision (12345678901234567890 and 12345678901234567891)
// stay different, as a reader that keeps big integers would see them.
// Digests that bind a grant or count repeats hash this form.
package canonjson

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// Append appends v's canonical form to dst and returns the result. v is a
// value as encoding/json decodes into an any (with or without UseNumber):
// nil, bool, float64, json.Number, string, []any, map[string]any. Other Go
// values (integers, typed maps and slices) are written as their JSON
// encoding would be read back; a value JSON cannot encode, and a NaN or
// infinity, is written as null.
func Append(dst []byte, v any) []byte {
	switch x := v.(type) {
	case nil:
		return append(dst, "null"...)
	case bool:
		if x {
			return append(dst, "true"...)
		}
		return append(dst, "false"...)
	case string:
		return appendString(dst, x)
	case json.Number:
		return appendNumber(dst, string(x))
	case float64:
		return appendFloat(dst, x, 64)
	case float32:
		return appendFloat(dst, float64(x), 32)
	case int:
		return appendNumber(dst, strconv.FormatInt(int64(x), 10))
	case int64:
		return appendNumber(dst, strconv.FormatInt(x, 10))
	case int32:
		return appendNumber(dst, strconv.FormatInt(int64(x), 10))
	case uint64:
		return appendNumber(dst, strconv.FormatUint(x, 10))
	case uint:
		return appendNumber(dst, strconv.FormatUint(uint64(x), 10))
	case []any:
		dst = append(dst, '[')
		for i, e := range x {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = Append(dst, e)
		}
		return append(dst, ']')
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.SortFunc(keys, compareUTF16)
		dst = append(dst, '{')
		for i, k := range keys {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendString(dst, k)
			dst = append(dst, ':')
			dst = Append(dst, x[k])
		}
		return append(dst, '}')
	}
	// Anything else: its JSON, read back as a plain value.
	b, err := json.Marshal(v)
	if err != nil {
		return append(dst, "null"...)
	}
	d := json.NewDecoder(strings.NewReader(string(b)))
	d.UseNumber()
	var back any
	if d.Decode(&back) != nil {
		return append(dst, "null"...)
	}
	return Append(dst, back)
}

// appendFloat writes a float by its shortest round-trip decimal value.
func appendFloat(dst []byte, f float64, bits int) []byte {
	s := strconv.FormatFloat(f, 'e', -1, bits)
	if s == "NaN" || s == "+Inf" || s == "-Inf" {
		return append(dst, "null"...)
	}
	return appendNumber(dst, s)
}

// appendNumber writes a number given in JSON (or Go 'e') syntax by its
// exact value. Text that is no number is written as a string.
func appendNumber(dst []byte, s string) []byte {
	neg, digits, exp, ok := parseDecimal(s)
	if !ok {
		return appendString(dst, s)
	}
	if digits == "" {
		return append(dst, '0') // zero, and minus zero
	}
	if neg {
		dst = append(dst, '-')
	}
	// The value is 0.digits × 10^n (ECMAScript's k and n).
	k := int64(len(digits))
	n := exp + k
	switch {
	case k <= n && n <= 21:
		dst = append(dst, digits...)
		for i := k; i < n; i++ {
			dst = append(dst, '0')
		}
	case 0 < n && n <= 21:
		dst = append(dst, digits[:n]...)
		dst = append(dst, '.')
		dst = append(dst, digits[n:]...)
	case -6 < n && n <= 0:
		dst = append(dst, '0', '.')
		for i := n; i < 0; i++ {
			dst = append(dst, '0')
		}
		dst = append(dst, digits...)
	default:
		dst = append(dst, digits[0])
		if k > 1 {
			dst = append(dst, '.')
			dst = append(dst, digits[1:]...)
		}
		dst = append(dst, 'e')
		if n-1 >= 0 {
			dst = append(dst, '+')
		}
		dst = strconv.AppendInt(dst, n-1, 10)
	}
	return dst
}

// maxExponent bounds a number's exponent; a larger one is not read as a
// number (its text is written as a string, so it stays distinct).
const maxExponent = 1 << 40

// parseDecimal reads a JSON number as digits × 10^exp, the digits without
// leading or trailing zeros ("" for zero).
func parseDecimal(s string) (neg bool, digits string, exp int64, ok bool) {
	i := 0
	if i < len(s) && s[i] == '-' {
		neg, i = true, i+1
	}
	start := i
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	intPart := s[start:i]
	if intPart == "" {
		return false, "", 0, false
	}
	frac := ""
	if i < len(s) && s[i] == '.' {
		i++
		fs := i
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		frac = s[fs:i]
		if frac == "" {
			return false, "", 0, false
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		es := i
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		ds := i
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		if i == ds {
			return false, "", 0, false
		}
		e, err := strconv.ParseInt(strings.TrimLeft(s[es:i], "+"), 10, 64)
		if err != nil || e > maxExponent || e < -maxExponent {
			return false, "", 0, false
		}
		exp = e
	}
	if i != len(s) {
		return false, "", 0, false
	}
	all := intPart + frac
	exp -= int64(len(frac))
	all = strings.TrimLeft(all, "0")
	trimmed := strings.TrimRight(all, "0")
	exp += int64(len(all) - len(trimmed))
	if trimmed == "" {
		return neg, "", 0, true
	}
	return neg, trimmed, exp, true
}

// appendString writes a string as RFC 8785 does: '"' and '\\' escaped,
// \b \t \n \f \r for those controls, other controls as \u00xx, everything
// else as UTF-8 (bytes that are not UTF-8 as U+FFFD, as encoding/json
// reads them).
func appendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				dst = append(dst, '\\', c)
			case c == '\b':
				dst = append(dst, '\\', 'b')
			case c == '\t':
				dst = append(dst, '\\', 't')
			case c == '\n':
				dst = append(dst, '\\', 'n')
			case c == '\f':
				dst = append(dst, '\\', 'f')
			case c == '\r':
				dst = append(dst, '\\', 'r')
			case c < 0x20:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			default:
				dst = append(dst, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = utf8.AppendRune(dst, utf8.RuneError)
		} else {
			dst = append(dst, s[i:i+size]...)
		}
		i += size
	}
	return append(dst, '"')
}

const hexDigits = "0123456789abcdef"

// compareUTF16 orders strings by their UTF-16 code units (RFC 8785 section
// 3.2.3), which differs from byte order only past U+FFFF.
func compareUTF16(a, b string) int {
	if isASCII(a) && isASCII(b) {
		return strings.Compare(a, b)
	}
	return slices.Compare(utf16.Encode([]rune(a)), utf16.Encode([]rune(b)))
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}
