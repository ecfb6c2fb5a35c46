// Package headtext holds what toolgate's own HTTP/1.1 head readers (the
// caller's side in h1serve, the upstream's answer in upstream) both do to
// a head's bytes: names compared without case, names written in the form
// net/textproto gives them.
package headtext

import (
	"net/http"
	"strings"
)

// EqualFold reports whether s and t are equal in ASCII, ignoring case.
func EqualFold[S, T string | []byte](s S, t T) bool {
	if len(s) != len(t) {
		return false
	}
	for i := 0; i < len(s); i++ {
		a, b := s[i], t[i]
		if 'A' <= a && a <= 'Z' {
			a += 'a' - 'A'
		}
		if 'A' <= b && b <= 'Z' {
			b += 'a' - 'A'
		}
		if a != b {
			return false
		}
	}
	return true
}

// WriteCanonical writes name, a header name of token bytes, to sb in
// textproto.CanonicalMIMEHeaderKey's form: upper case at the start and
// after each '-', lower case elsewhere.
func WriteCanonical[S string | []byte](sb *strings.Builder, name S) {
	upper := true
	for i := 0; i < len(name); i++ {
		c := name[i]
		if upper && 'a' <= c && c <= 'z' {
			c -= 'a' - 'A'
		} else if !upper && 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		sb.WriteByte(c)
		upper = c == '-'
	}
}

// Get is h.Get(key) for a key already in canonical form (net/textproto's),
// without canonicalizing it again on every call: the first value, or "".
// TestGetKeysAreCanonical holds every literal key passed to it in the
// module to that form.
func Get(h http.Header, key string) string {
	if v := h[key]; len(v) > 0 {
		return v[0]
	}
	return ""
}
