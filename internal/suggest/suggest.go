// Package suggest finds the known name a misspelt one was most likely
// meant to be, for the "did you mean" of an error message: an unknown
// field in a YAML file, an unknown keyword. It imports only the standard
// library, so every package that reports unknown names can use it.
package suggest

import "strings"

// maxNameLen bounds the names Nearest compares (in bytes): a longer name is
// never a typo of a known one, and the distance costs len(a)*len(b).
const maxNameLen = 64

// Nearest returns the name in known closest to name, and true, when one is
// close enough to be a likely typo: at most one edit (an insertion, a
// deletion, a substitution or two neighbours swapped) in a name of up to 4
// characters, two up to 8, three beyond. Case, '_' and '-' are ignored
// ("maxBodyBytes" finds max_body_bytes). Among equally close names the
// first in known wins. It returns "", false when none is close, and for
// name itself when known holds it.
func Nearest(name string, known []string) (string, bool) {
	if name == "" || len(name) > maxNameLen {
		return "", false
	}
	n := fold(name)
	best, bestD := "", -1
	for _, k := range known {
		if k == name || len(k) > maxNameLen {
			continue
		}
		d := distance(n, fold(k))
		if d <= limit(len(n)) && (bestD < 0 || d < bestD) {
			best, bestD = k, d
		}
	}
	return best, bestD >= 0
}

// limit is the largest distance that still reads as a typo of a name of n
// characters.
func limit(n int) int {
	switch {
	case n <= 4:
		return 1
	case n <= 8:
		return 2
	}
	return 3
}

// fold lower-cases s and drops '_' and '-', so that spellings of one name
// in another case convention compare equal.
func fold(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '_' || r == '-' {
			return -1
		}
		return toLower(r)
	}, s)
}

func toLower(r rune) rune {
	if 'A' <= r && r <= 'Z' {
		return r + ('a' - 'A')
	}
	return r
}

// distance is the optimal string alignment distance between a and b (in
// runes): the fewest insertions, deletions, substitutions and swaps of
// two neighbours that turn one into the other.
func distance(a, b string) int {
	s, t := []rune(a), []rune(b)
	// Three rows of the table: two back (for a swap), one back, current.
	prev2 := make([]int, len(t)+1)
	prev := make([]int, len(t)+1)
	cur := make([]int, len(t)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(s); i++ {
		cur[0] = i
		for j := 1; j <= len(t); j++ {
			cost := 1
			if s[i-1] == t[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && s[i-1] == t[j-2] && s[i-2] == t[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(t)]
}
