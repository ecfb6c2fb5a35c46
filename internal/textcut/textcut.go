// Package textcut bounds text by bytes without splitting a character, for
// the places that keep a bounded piece of outside text (a listed tool's
// description, a span attribute). Standard library only.
package textcut

import "unicode/utf8"

// Cut cuts s to at most n bytes, at the end of a character.
func Cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
