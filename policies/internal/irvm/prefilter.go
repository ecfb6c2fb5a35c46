package irvm

import (
	"regexp"
	"regexp/syntax"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"

	"github.com/open-policy-agent/opa/v1/ast"
)

// A regex.match whose pattern is a constant of the plan gets the literals
// every match of the pattern contains (a PII rule's "@", say): an input
// string that lacks one of them cannot match, and the call is false at
// once, without running the expression over the string (a backtracking
// search from every position). The result is the builtin's own: the
// pattern was compiled here exactly as the builtin compiles it (a pattern
// that does not compile gets no literals, and the builtin's error), and
// an operand that is not a string still goes to the builtin (its type
// error). FuzzRegexLiterals holds the literals to Go's regexp.
//
// A regex.match whose pattern is computed (taken from a list of patterns,
// say) gets its patterns' literals on first use, kept for the program's
// life in a cache of at most maxCachedPatterns patterns; past that, a new
// pattern goes to the builtin as it is.

// regexLiterals returns the strings every match of pattern contains, nil
// when there are none (or pattern does not compile).
func regexLiterals(pattern string) []string {
	if _, err := regexp.Compile(pattern); err != nil {
		return nil
	}
	re, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		return nil
	}
	var out []string
	requiredLiterals(re.Simplify(), &out)
	return out
}

// requiredLiterals appends to out the literals every match of re holds:
// those of a concatenation's parts, a group's and a repeat's that runs
// at least once. A literal matched regardless of case, or one holding
// U+FFFD (which the expression matches against a byte that is not UTF-8),
// is left out, as is anything under an alternation or an optional part.
func requiredLiterals(re *syntax.Regexp, out *[]string) {
	switch re.Op {
	case syntax.OpLiteral:
		s := string(re.Rune)
		if re.Flags&syntax.FoldCase == 0 && s != "" && !strings.ContainsRune(s, utf8.RuneError) {
			*out = append(*out, s)
		}
	case syntax.OpConcat:
		for _, sub := range re.Sub {
			requiredLiterals(sub, out)
		}
	case syntax.OpCapture, syntax.OpPlus:
		requiredLiterals(re.Sub[0], out)
	case syntax.OpRepeat:
		if re.Min >= 1 {
			requiredLiterals(re.Sub[0], out)
		}
	}
}

// lacksLiteral reports whether v is a string missing one of lits.
func lacksLiteral(v ast.Value, lits []string) bool {
	s, ok := v.(ast.String)
	return ok && lacks(string(s), lits)
}

// lacks reports whether s lacks one of lits.
func lacks(s string, lits []string) bool {
	for _, l := range lits {
		if !strings.Contains(s, l) {
			return true
		}
	}
	return false
}

// Regex is a constant pattern compiled as regex.match compiles it, with
// the literals every match contains, for a caller that runs regex.match
// itself (the rego package's first pass).
type Regex struct {
	re   *regexp.Regexp
	lits []string
}

// CompileRegex compiles pattern as regex.match does; its error is
// regexp.Compile's.
func CompileRegex(pattern string) (*Regex, error) {
	re, err := regexp.Compile(pattern)
	if err != nil {
		return nil, err
	}
	return &Regex{re: re, lits: regexLiterals(pattern)}, nil
}

// MatchString is regex.match(pattern, s): false at once for an s that
// lacks one of the pattern's literals.
func (r *Regex) MatchString(s string) bool {
	return !lacks(s, r.lits) && r.re.MatchString(s)
}

// maxCachedPatterns bounds the patterns one call of regex.match keeps the
// literals of (a policy may compute patterns from its input).
const maxCachedPatterns = 256

// literalCache holds the literals of the patterns a regex.match call was
// given at run time.
type literalCache struct {
	m sync.Map // pattern -> []string (nil: none)
	n atomic.Int32
}

// get returns pattern's literals: nil when it has none, or when the cache
// is full and pattern is not in it.
func (c *literalCache) get(pattern string) []string {
	if v, ok := c.m.Load(pattern); ok {
		return v.([]string)
	}
	// A full cache is read, not written: calls past the bound do not
	// contend on the count.
	if c.n.Load() >= maxCachedPatterns {
		return nil
	}
	if c.n.Add(1) > maxCachedPatterns {
		c.n.Add(-1)
		return nil
	}
	lits := regexLiterals(pattern)
	if _, loaded := c.m.LoadOrStore(pattern, lits); loaded {
		c.n.Add(-1)
	}
	return lits
}
