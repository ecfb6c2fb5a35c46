package irvm

import (
	"fmt"
	"regexp"
	"slices"
	"sync"
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"
)

func TestRegexLiterals(t *testing.T) {
	for _, c := range []struct {
		pattern string
		want    []string
	}{
		{`[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}`, []string{"@", "."}},
		{`^foo(bar)+baz?$`, []string{"foo", "bar", "ba"}},
		{`x{2,}y`, []string{"x", "x", "y"}},
		{`(?i)secret`, nil}, // any case: left out
		{`a|b`, nil},        // either: neither required
		{`(ab)*c`, []string{"c"}},
		{`\x{FFFD}z`, nil}, // one literal with U+FFFD, which matches a byte that is not UTF-8
		{`é+`, []string{"é"}},
		{`(`, nil},       // does not compile: the builtin's error
		{`a{1001}`, nil}, // past the repeat bound: does not compile
		{``, nil},
	} {
		if got := regexLiterals(c.pattern); !slices.Equal(got, c.want) {
			t.Errorf("regexLiterals(%q) = %q, want %q", c.pattern, got, c.want)
		}
	}
	if lacksLiteral(ast.Number("1"), []string{"@"}) {
		t.Error("a number lacks a literal: it must go to the builtin, for its type error")
	}
}

// FuzzRegexLiterals: a string that lacks one of a pattern's literals never
// matches it, by Go's regexp (which regex.match runs).
//
// It also holds Regex.MatchString to Go's regexp.
func FuzzRegexLiterals(f *testing.F) {
	for _, s := range [][2]string{
		{`[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}`, "dana@example.org"},
		{`[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}`, "EGFR kinase inhibitors"},
		{`(ab)+c?d`, "ababd"}, {`x{2,}y`, "xxy"}, {`\x{FFFD}z`, "\xffz"}, {`é+`, "e\u0301"},
		{`(?s).a.`, "\na\n"}, {`(?m)^ab$`, "x\nab\n"}, {`[@]`, "@"}, {`\Aa\z`, "a"},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, pattern, s string) {
		// Regex (the first pass's regex.match) answers as Go's regexp.
		if r, err := CompileRegex(pattern); err == nil && r.MatchString(s) != regexp.MustCompile(pattern).MatchString(s) {
			t.Fatalf("CompileRegex(%q).MatchString(%q) = %v, Go's regexp says otherwise", pattern, s, r.MatchString(s))
		}
		lits := regexLiterals(pattern)
		if lits == nil {
			return
		}
		re := regexp.MustCompile(pattern) // regexLiterals gives none for a pattern that does not compile
		if lacksLiteral(ast.String(s), lits) && re.MatchString(s) {
			t.Fatalf("%q matches %q, which lacks one of %q", s, pattern, lits)
		}
	})
}

// TestLiteralCacheBounded: a regex.match given patterns at run time keeps
// the literals of at most maxCachedPatterns of them, however many it is
// given and from however many evaluations at once; a pattern kept gives
// its literals, one not kept none (the builtin runs).
func TestLiteralCacheBounded(t *testing.T) {
	var c literalCache
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 2 * maxCachedPatterns {
				c.get(fmt.Sprintf("lit%d-%d@", i, g%2)) // two goroutines share each pattern
			}
		}()
	}
	wg.Wait()
	kept := 0
	c.m.Range(func(k, v any) bool {
		kept++
		if want := []string{k.(string)}; !slices.Equal(v.([]string), want) {
			t.Errorf("kept %q with %q, want %q", k, v, want)
		}
		return true
	})
	if kept != maxCachedPatterns || int(c.n.Load()) != kept {
		t.Fatalf("kept %d patterns (count %d), want %d", kept, c.n.Load(), maxCachedPatterns)
	}
	var in, out string
	c.m.Range(func(k, _ any) bool { in = k.(string); return false })
	for i := range 2 * maxCachedPatterns {
		p := fmt.Sprintf("lit%d-0@", i)
		if _, ok := c.m.Load(p); !ok {
			out = p
			break
		}
	}
	if got := c.get(in); !slices.Equal(got, []string{in}) {
		t.Errorf("get(%q) kept = %q", in, got)
	}
	if got := c.get(out); got != nil {
		t.Errorf("get(%q) past the bound = %q, want none", out, got)
	}
}
