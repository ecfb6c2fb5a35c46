// Package canonical holds the spelling rules of toolgate's canonical form
// of a call: the method upper-cased, the host (case, a trailing dot, IPv4
// in any spelling a resolver accepts, IPv6 in RFC 5952 form), the port
// without leading zeros, the path's escapes and dot segments, and the
// query's escapes that an approval binds; and the media type of a body.
// Each rule says when a spelling is ambiguous, and the call is then
// refused. How a call is put in canonical form, and which names are one
// host (loopback, a tool host's addresses), is proxy's (canonical.go). It
// must never import proxy; standard library only, and
// proxy/internal/hostform, whose IPv4 spellings it shares with the egress
// guard.
package canonical

import (
	"net/netip"
	"strconv"
	"strings"

	"github.com/toolgate/toolgate/proxy/internal/hostform"
)

// DefaultPort is a scheme's default port: 443 for https, else 80.
func DefaultPort(scheme string) string {
	if scheme == "https" {
		return "443"
	}
	return "80"
}

// Method upper-cases a method.
func Method(m string) string {
	for i := 0; i < len(m); i++ {
		if c := m[i]; c >= 'a' && c <= 'z' {
			return strings.ToUpper(m)
		}
	}
	return m
}

// Port returns a port without leading zeros, or the scheme's default
// for "". ok is false for anything but a number from 1 to 65535.
func Port(p, scheme string) (string, bool) {
	if p == "" {
		return DefaultPort(scheme), true
	}
	if len(p) > 5 {
		p = strings.TrimLeft(p, "0")
	}
	n, err := strconv.Atoi(p)
	if err != nil || n < 1 || n > 65535 || p[0] == '+' || p[0] == '-' {
		return "", false
	}
	if p[0] == '0' {
		return strconv.Itoa(n), true
	}
	return p, true
}

// Host returns a host in canonical form (docs/config.md, "Matching"),
// or ok false when it is ambiguous. h may carry brackets.
func Host(h string) (string, bool) {
	if len(h) > 2 && h[0] == '[' && h[len(h)-1] == ']' {
		return ipv6(h[1 : len(h)-1])
	}
	if strings.IndexByte(h, ':') >= 0 {
		return ipv6(h)
	}
	h = strings.TrimSuffix(h, ".")
	if h == "" || len(h) > 253 || h[len(h)-1] == '.' {
		return "", false // empty, too long, or an empty last label
	}
	lower := false
	for i := 0; i < len(h); i++ {
		c := h[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '-', c == '_':
		case c == '.':
			if i == 0 || h[i-1] == '.' {
				return "", false // an empty label
			}
		case c >= 'A' && c <= 'Z':
			lower = true
		default:
			return "", false
		}
	}
	if lower {
		h = strings.ToLower(h)
	}
	last := h[strings.LastIndexByte(h, '.')+1:]
	if !hostform.NumericLabel(last) {
		return h, true
	}
	if dottedQuad(h) {
		return h, true // already an address's canonical spelling
	}
	a, ok := hostform.ParseIPv4(h)
	if !ok {
		return "", false
	}
	// An address already in its canonical spelling is returned as is,
	// without a string of its own.
	var buf [len("255.255.255.255")]byte
	if b := a.AppendTo(buf[:0]); string(b) != h {
		return string(b), true
	}
	return h, true
}

// dottedQuad reports whether h is an IPv4 address in its canonical
// spelling: four decimal parts of 0 to 255, none with a leading zero. Host
// returns such a host as it is, without parsing it and spelling it again
// (most calls to an address name it so).
func dottedQuad(h string) bool {
	parts, n, v := 0, 0, 0
	for i := 0; i <= len(h); i++ {
		if i == len(h) || h[i] == '.' {
			if n == 0 || v > 255 || n > 1 && h[i-n] == '0' {
				return false
			}
			parts++
			n, v = 0, 0
			continue
		}
		c := h[i]
		if c < '0' || c > '9' || n == 3 {
			return false
		}
		n++
		v = v*10 + int(c-'0')
	}
	return parts == 4
}

// ipv6 canonicalises a bracket-less IPv6 literal; an IPv4-mapped one
// becomes IPv4. Zones are refused.
func ipv6(s string) (string, bool) {
	if strings.IndexByte(s, '%') >= 0 {
		return "", false
	}
	a, err := netip.ParseAddr(s)
	if err != nil || !a.Is6() {
		return "", false
	}
	return a.Unmap().String(), true
}

func isHexDigit(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c >= '0' && c <= '9':
		return c - '0'
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10
	}
	return c - 'A' + 10
}

// Unreserved reports whether c is an unreserved character of RFC 3986,
// which a percent-escape never needs to hide.
func Unreserved(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
		c == '-' || c == '.' || c == '_' || c == '~'
}

// Path returns an escaped path in canonical form without its trailing
// slash, and whether the path ended in one. ok is false when the path is
// ambiguous (docs/config.md, "Matching").
func Path(p string) (path string, trailing, ok bool) {
	if p == "" || p == "/" {
		return "/", false, true
	}
	if p[0] != '/' {
		return "", false, false
	}
	if fastPath(p) {
		if p[len(p)-1] == '/' {
			return p[:len(p)-1], true, true
		}
		return p, false, true
	}
	// out grows by whole segments; a ".." segment truncates it to where
	// the last kept segment started, so the work stays linear in len(p).
	out := make([]byte, 0, len(p)+8)
	var segStart []int // where each kept segment starts in out
	seg := make([]byte, 0, 32)
	flush := func() {
		switch string(seg) {
		case "", ".":
		case "..":
			if n := len(segStart); n > 0 {
				out = out[:segStart[n-1]]
				segStart = segStart[:n-1]
			}
		default:
			segStart = append(segStart, len(out))
			out = append(out, '/')
			out = append(out, seg...)
		}
		seg = seg[:0]
	}
	for i := 1; i < len(p); i++ {
		c := p[i]
		switch {
		case c == '/':
			flush()
			continue
		case c == '%':
			if i+2 >= len(p) || !isHexDigit(p[i+1]) || !isHexDigit(p[i+2]) {
				return "", false, false
			}
			c = unhex(p[i+1])<<4 | unhex(p[i+2])
			i += 2
			if c == '/' || c == '\\' || c == '%' || c < 0x20 || c == 0x7f {
				return "", false, false
			}
		case c == '\\' || c == ';' || c < 0x20 || c == 0x7f:
			return "", false, false
		}
		if plainInPath(c) {
			seg = append(seg, c)
		} else {
			seg = append(seg, '%', upperHex[c>>4], upperHex[c&15])
		}
	}
	trailing = len(seg) == 0 || string(seg) == "." || string(seg) == ".."
	flush()
	if len(out) == 0 {
		return "/", false, true
	}
	return string(out), trailing, true
}

// plainInPath reports whether a byte is written as itself in a canonical
// path: unreserved characters and the sub-delimiters servers decode alike
// (';' excepted: some servers strip what follows it). Everything else is
// percent-encoded.
func plainInPath(c byte) bool {
	if Unreserved(c) {
		return true
	}
	switch c {
	case '!', '$', '&', '\'', '(', ')', '*', '+', ',', '=', ':', '@':
		return true
	}
	return false
}

const upperHex = "0123456789ABCDEF"

// fastPath reports whether p (starting with '/') is already canonical
// apart from a possible trailing slash: only unreserved characters and the
// sub-delimiters a path may carry plainly, no empty or dot segments.
func fastPath(p string) bool {
	segLen, dots := 0, 0
	for i := 1; i < len(p); i++ {
		c := p[i]
		if c == '/' {
			if segLen == 0 || segLen == dots && dots <= 2 {
				return false
			}
			segLen, dots = 0, 0
			continue
		}
		switch {
		case c == '.':
			dots++
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9',
			c == '-', c == '_', c == '~', c == ':', c == '@', c == '!', c == '$',
			c == '&', c == '\'', c == '(', c == ')', c == '*', c == '+', c == ',', c == '=':
		default:
			return false
		}
		segLen++
	}
	if segLen > 0 && segLen == dots && dots <= 2 {
		return false // a final dot segment
	}
	return true
}

// Query writes a query's escapes in canonical form: a
// percent-escape of an unreserved character is decoded (%61 is a), others
// are written in upper-case hex. Nothing else changes: the order of
// parameters, '+', ';', empty parameters, repeated names and broken
// escapes stay as written, because upstreams read them differently (Go
// splits on '&' only and takes the first of a repeated name, Flask the
// first, PHP the last; '+' is a space to a form reader and a plus to
// others). A query with a broken escape is bound exactly as written. Two
// queries with one canonical form read alike to every upstream; two that
// some upstream could read differently keep two forms, so a grant for one
// is never a grant for the other.
func Query(raw string) string {
	if !strings.Contains(raw, "%") {
		return raw
	}
	for i := 0; i < len(raw); i++ {
		if raw[i] == '%' && (i+2 >= len(raw) || !isHexDigit(raw[i+1]) || !isHexDigit(raw[i+2])) {
			// A broken escape: decoding its neighbours could make one
			// ("%7%30" would read "%70"), so the query is bound as written.
			return raw
		}
	}
	var b strings.Builder
	b.Grow(len(raw))
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		if c != '%' {
			b.WriteByte(c)
			continue
		}
		d := unhex(raw[i+1])<<4 | unhex(raw[i+2])
		if Unreserved(d) {
			b.WriteByte(d)
		} else {
			b.WriteByte('%')
			b.WriteByte(upperHex[d>>4])
			b.WriteByte(upperHex[d&15])
		}
		i += 2
	}
	return b.String()
}
