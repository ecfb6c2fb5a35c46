package irvm

import (
	"regexp"
	"slices"
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
