package detect

// keywordSet finds which of many lower-case keywords occur in a text in
// one pass (an Aho-Corasick automaton over bytes, ASCII letters folded to
// lower case). Each keyword carries the index of the cue it belongs to;
// a scan returns the set of cues with at least one keyword present.
type keywordSet struct {
	// next[s][c] is the state after reading byte c in state s.
	next [][256]int32
	// out[s] is the set of cues (bits) whose keywords end at state s,
	// through suffix links too.
	out []uint64
}

// newKeywordSet builds the automaton; cue i's keywords are kws[i]. At
// most 64 cues.
func newKeywordSet(kws [][]string) *keywordSet {
	if len(kws) > 64 {
		panic("detect: more than 64 cues")
	}
	k := &keywordSet{next: make([][256]int32, 1), out: make([]uint64, 1)}
	for i := range k.next[0] {
		k.next[0][i] = -1
	}
	for cue, words := range kws {
		for _, w := range words {
			s := int32(0)
			for j := 0; j < len(w); j++ {
				c := lower(w[j])
				if k.next[s][c] < 0 {
					var row [256]int32
					for i := range row {
						row[i] = -1
					}
					k.next = append(k.next, row)
					k.out = append(k.out, 0)
					k.next[s][c] = int32(len(k.next) - 1)
				}
				s = k.next[s][c]
			}
			k.out[s] |= 1 << cue
		}
	}
	// Breadth-first: fill the missing transitions through suffix links.
	fail := make([]int32, len(k.next))
	queue := make([]int32, 0, len(k.next))
	for c := 0; c < 256; c++ {
		if t := k.next[0][c]; t < 0 {
			k.next[0][c] = 0
		} else {
			fail[t] = 0
			queue = append(queue, t)
		}
	}
	for len(queue) > 0 {
		s := queue[0]
		queue = queue[1:]
		k.out[s] |= k.out[fail[s]]
		for c := 0; c < 256; c++ {
			if t := k.next[s][c]; t < 0 {
				k.next[s][c] = k.next[fail[s]][c]
			} else {
				fail[t] = k.next[fail[s]][c]
				queue = append(queue, t)
			}
		}
	}
	return k
}

// lower folds an ASCII upper-case letter to lower case.
func lower(c byte) byte {
	if c >= 'A' && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// scan returns the set of cues with a keyword in p, reading p as if a
// space preceded it (so a keyword may start with " " at p's start).
func (k *keywordSet) scan(p string) uint64 {
	s := k.next[0][' ']
	found := k.out[s]
	for i := 0; i < len(p); i++ {
		s = k.next[s][lower(p[i])]
		found |= k.out[s]
	}
	return found
}
