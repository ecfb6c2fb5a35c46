// Package hostform reads IPv4 addresses in the spellings a URL host may
// take (WHATWG URLs and inet_aton agree on them): 127.1, 0x7f000001,
// 2130706433, 0177.0.0.1. The canonical form of a call (proxy) writes such
// a host dotted-decimal; the egress guard (proxy/egress) refuses one it
// is handed unresolved. Both read them through this one parser.
package hostform

import (
	"net/netip"
	"strconv"
	"strings"
)

// NumericLabel reports whether a label reads as a number (WHATWG URL's
// "ends in a number"): decimal digits, or 0x and hex digits. A host whose
// last label is one is an IPv4 address to a browser and to inet_aton.
func NumericLabel(s string) bool {
	if s == "" {
		return false
	}
	if len(s) >= 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X') {
		for i := 2; i < len(s); i++ {
			if !isHexDigit(s[i]) {
				return false
			}
		}
		return true
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// ParseIPv4 parses IPv4 the way inet_aton and WHATWG URLs do: one to
// four parts, each decimal, octal (leading 0) or hex (0x); the last part
// fills the bytes left.
func ParseIPv4(s string) (netip.Addr, bool) {
	// The parts one by one, as strings.Split(s, ".") has them, without
	// its slice.
	nparts := strings.Count(s, ".") + 1
	if nparts > 4 {
		return netip.Addr{}, false
	}
	var v uint64
	rest := s
	for i := range nparts {
		var p string
		p, rest, _ = strings.Cut(rest, ".")
		base := 10
		switch {
		case len(p) >= 2 && p[0] == '0' && (p[1] == 'x' || p[1] == 'X'):
			base, p = 16, p[2:]
			if p == "" {
				p = "0"
			}
		case len(p) > 1 && p[0] == '0':
			base, p = 8, p[1:]
		}
		if p == "" || len(p) > 32 {
			return netip.Addr{}, false
		}
		n, err := strconv.ParseUint(p, base, 64)
		if err != nil {
			return netip.Addr{}, false
		}
		if i < nparts-1 {
			if n > 255 {
				return netip.Addr{}, false
			}
			v = v<<8 | n
			continue
		}
		rest := uint(4 - i) // bytes the last part fills
		if n >= 1<<(8*rest) {
			return netip.Addr{}, false
		}
		v = v<<(8*rest) | n
	}
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), true
}

func isHexDigit(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}
