// Package headtext holds what toolgate's own HTTP/1.1 head readers (the
// caller's side in h1serve, the upstream's answer in upstream) both do to
// a head's bytes: names compared without case, names written in the form
// net/textproto gives them.
package headtext

import "strings"

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
