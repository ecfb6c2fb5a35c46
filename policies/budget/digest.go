package budget

import (
	"encoding/json"
	"hash/maphash"
	"math"
	"math/big"
	"strconv"

	"github.com/toolgate/toolgate/internal/jsonnum"
)

// Digest is a 64-bit digest of a call's arguments as JSON values, for loop
// breaking: two spellings of the same value give the same digest, and a
// changed value, name or type gives another (but for collisions, one in
// 2^64). The canonical form is RFC 8785's in spirit:
//
//   - objects: the order of members does not matter;
//   - strings: compared as decoded, so escapes (\u0041 or A) do not matter;
//   - numbers: compared by their exact decimal value, so 5, 5.0, 5e0,
//     50e-1 and 0.5e1 are one number, and -0 is 0; but every digit
//     counts, so 12345678901234567891 and 12345678901234567890 (one
//     float64, two int64s) and 0.1 and 0.10000000000000000001 (one
//     float64, two decimals) are different numbers. A float64 counts as
//     the shortest decimal that reads back as it (JSON's reading), an
//     int or int64 as its decimal digits.
//
// It allocates nothing for numbers of up to 19 significant digits and
// exponents up to 15 digits. Values nest at most maxDigestDepth deep;
// deeper levels are folded in by type only (the proxy's extraction bounds
// depth well below that).
func Digest(seed maphash.Seed, args map[string]any) uint64 {
	return digestValue(seed, args, 0)
}

// maxDigestDepth bounds the recursion of digestValue.
const maxDigestDepth = 64

// mix is the finalizer of SplitMix64: a cheap, good bit mixer.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// The type tags mixed into a value's digest.
const (
	tagNull = 1 + iota
	tagTrue
	tagFalse
	tagString
	tagNumber
	tagArray
	tagObject
	tagOther
	tagZero
	tagBigNumber
	tagNaN
	tagInf
	tagBadNumber
)

func digestValue(seed maphash.Seed, v any, depth int) uint64 {
	if depth > maxDigestDepth {
		return mix(0xdead)
	}
	switch x := v.(type) {
	case nil:
		return mix(tagNull)
	case bool:
		if x {
			return mix(tagTrue)
		}
		return mix(tagFalse)
	case string:
		return digestString(seed, x)
	case json.Number:
		return digestNumber(seed, string(x))
	case float64:
		return digestFloat(seed, x)
	case int:
		return digestInt(int64(x), 0)
	case int64:
		return digestInt(x, 0)
	case []any:
		h := mix(tagArray<<32 + uint64(len(x)))
		for _, e := range x {
			h = mix(h ^ digestValue(seed, e, depth+1))
		}
		return h
	case []string: // query arguments: the same as an array of strings
		h := mix(tagArray<<32 + uint64(len(x)))
		for _, e := range x {
			h = mix(h ^ digestString(seed, e))
		}
		return h
	case map[string]any:
		// Members are summed, so their order does not matter; each is
		// its name and value mixed.
		var sum uint64
		for k, e := range x {
			sum += mix(maphash.String(seed, k) ^ mix(digestValue(seed, e, depth+1)+0x9e3779b97f4a7c15))
		}
		return mix(tagObject<<32 ^ sum ^ uint64(len(x)))
	default:
		return mix(tagOther)
	}
}

func digestString(seed maphash.Seed, s string) uint64 {
	return mix(tagString ^ maphash.String(seed, s))
}

// digestDecimal is the digest of the number sign × m × 10^e, m > 0 with no
// trailing zero digit.
func digestDecimal(neg bool, m uint64, e int64) uint64 {
	h := mix(tagNumber ^ m)
	if neg {
		h = ^h
	}
	return mix(h ^ mix(uint64(e)+0x9e3779b97f4a7c15))
}

// digestInt is the digest of i × 10^e.
func digestInt(i, e int64) uint64 {
	if i == 0 {
		return mix(tagZero)
	}
	neg := i < 0
	m := uint64(i)
	if neg {
		m = -m // two's complement: right for math.MinInt64 too
	}
	for m%10 == 0 {
		m /= 10
		e++
	}
	return digestDecimal(neg, m, e)
}

// maxExactInt is the largest float64 integer whose neighbours are all
// integers that are exactly float64s too (2^53).
const maxExactInt = 1 << 53

func digestFloat(seed maphash.Seed, f float64) uint64 {
	switch {
	case math.IsNaN(f):
		return mix(tagNaN)
	case math.IsInf(f, 0):
		if f > 0 {
			return mix(tagInf)
		}
		return ^mix(tagInf)
	case f == math.Trunc(f) && math.Abs(f) <= maxExactInt:
		return digestInt(int64(f), 0)
	}
	// A float with few decimals (0.25, 1.5e-3): the smallest k for which
	// m/10^k, m an integer below 2^53, reads back as f gives f's shortest
	// decimal, m × 10^-k (an exact division, rounded once, is how a
	// correct reader reads that decimal).
	a := math.Abs(f)
	for k := 1; k < len(pow10); k++ {
		m := math.Round(a * pow10[k])
		if m > maxExactInt {
			break
		}
		if m/pow10[k] == a {
			return digestInt(int64(math.Copysign(m, f)), -int64(k))
		}
	}
	var buf [32]byte
	return digestNumber(seed, strconv.AppendFloat(buf[:0], f, 'e', -1, 64))
}

// pow10 are the powers of ten that float64 holds exactly.
var pow10 = [...]float64{1, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22}

// digestNumber is the digest of a JSON number's text by its exact decimal
// value. Text that is not a JSON number (a json.Number made by hand)
// digests as itself, apart from every number.
func digestNumber[T string | []byte](seed maphash.Seed, s T) uint64 {
	if m, ok := plainInt(s); ok {
		return digestInt(m, 0)
	}
	n, ok := jsonnum.Parse(s)
	if !ok {
		var h maphash.Hash
		h.SetSeed(seed)
		h.WriteByte(tagBadNumber)
		h.WriteString(string(s))
		return mix(h.Sum64())
	}
	if n.NSig == 0 {
		return mix(tagZero)
	}
	// The exponent of the last significant digit: exact, or (only with
	// a written exponent of 16 digits or more) beyond ±10^14 for sure.
	e, bigExp := n.Exp+n.Shift, n.ExpDigits > 15
	if n.NSig <= 19 && !bigExp && e > -1e14 && e < 1e14 {
		return digestDecimal(n.Neg, n.M, e)
	}
	// The rare long number: its significant digits and its exponent, in
	// decimal, go through maphash.
	var h maphash.Hash
	h.SetSeed(seed)
	h.WriteByte(tagBigNumber)
	if n.Neg {
		h.WriteByte('-')
	}
	seen := 0
	for i := n.First; i < len(s) && seen < n.NSig; i++ {
		if c := s[i]; c >= '0' && c <= '9' {
			h.WriteByte(c)
			seen++
		}
	}
	h.WriteByte('e')
	if !bigExp {
		var buf [24]byte
		h.Write(strconv.AppendInt(buf[:0], e, 10))
	} else {
		be, _ := new(big.Int).SetString(string(s[n.ExpAt:]), 10)
		be.Add(be, big.NewInt(n.Shift))
		h.WriteString(be.String())
	}
	return h.Sum64()
}

// plainInt reads the common number, an integer of at most 18 digits
// without fraction or exponent; ok is false for anything else.
func plainInt[T string | []byte](s T) (int64, bool) {
	i, neg := 0, false
	if len(s) > 0 && s[0] == '-' {
		i, neg = 1, true
	}
	if len(s) == i || len(s)-i > 18 || s[i] == '0' && len(s)-i > 1 {
		return 0, false
	}
	var m int64
	for ; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		m = m*10 + int64(c-'0')
	}
	if neg {
		m = -m
	}
	return m, true
}
