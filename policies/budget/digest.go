package budget

import (
	"encoding/json"
	"hash/maphash"
	"math"
)

// Digest is a 64-bit digest of a call's arguments, for loop breaking: the
// same arguments give the same digest whatever the order of their object
// members, and a changed value, name or type gives another (but for
// collisions, one in 2^64). It allocates nothing. Values nest at most as
// deep as the proxy's extraction allows; deeper levels are folded in by
// type only.
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

func digestValue(seed maphash.Seed, v any, depth int) uint64 {
	if depth > maxDigestDepth {
		return mix(0xdead)
	}
	switch x := v.(type) {
	case nil:
		return mix(1)
	case bool:
		if x {
			return mix(2)
		}
		return mix(3)
	case string:
		return mix(4 ^ maphash.String(seed, x))
	case json.Number:
		return mix(5 ^ maphash.String(seed, string(x)))
	case float64:
		return mix(6 ^ math.Float64bits(x))
	case int:
		return mix(7 ^ uint64(x))
	case int64:
		return mix(7 ^ uint64(x))
	case []any:
		h := mix(8 + uint64(len(x)))
		for _, e := range x {
			h = mix(h ^ digestValue(seed, e, depth+1))
		}
		return h
	case map[string]any:
		// Members are summed, so their order does not matter; each is
		// its name and value mixed.
		var sum uint64
		for k, e := range x {
			sum += mix(maphash.String(seed, k) ^ mix(digestValue(seed, e, depth+1)+0x9e3779b97f4a7c15))
		}
		return mix(9 ^ sum ^ uint64(len(x)))
	case []string:
		h := mix(10 + uint64(len(x)))
		for _, e := range x {
			h = mix(h ^ maphash.String(seed, e))
		}
		return h
	default:
		return mix(11)
	}
}
