package detect

import "strings"

// CueKeywordsForTest is the set of cues whose keywords the automaton finds
// in p.
func CueKeywordsForTest(p string) uint64 { return cueKeywords.scan(p) }

// CueKeywordsNaiveForTest is the same set found with strings.Contains.
func CueKeywordsNaiveForTest(p string) uint64 {
	l := " " + strings.ToLower(p)
	var found uint64
	for i, c := range cues {
		for _, k := range c.kw {
			if strings.Contains(l, k) {
				found |= 1 << i
			}
		}
	}
	return found
}
