package mcp

import (
	"fmt"
	"testing"

	"github.com/toolgate/toolgate/policies"
)

// TestKeywordFindings checks that unknown keywords are news once per
// server, tool and keywords, that a schema listed with other keywords is
// news again, and that the findings stay bounded.
func TestKeywordFindings(t *testing.T) {
	compile := func(doc string) []policies.UnknownKeyword {
		t.Helper()
		s, err := policies.CompileSchema([]byte(doc), policies.SchemaOptions{Tool: "t", Strict: true, UnknownKeywords: policies.KeywordsIgnore})
		if err != nil {
			t.Fatal(err)
		}
		return s.UnknownKeywords()
	}
	a := compile(`{"properties": {"n": {"maxium": 1}}}`)
	b := compile(`{"properties": {"n": {"maxium": 1}}, "requird": ["n"]}`)
	var f KeywordFindings
	for i, c := range []struct {
		server, tool string
		kw           []policies.UnknownKeyword
		news         bool
	}{
		{"s/mcp", "t", a, true}, {"s/mcp", "t", a, false}, {"s/mcp", "u", a, true}, {"s/mcp", "t", b, true}, {"s/mcp", "t", b, false},
	} {
		if got := f.Note(c.server, c.tool, c.kw); got != c.news {
			t.Errorf("note %d (%s %s %d keywords): news %v, want %v", i, c.server, c.tool, len(c.kw), got, c.news)
		}
	}
	l := f.List()
	if len(l) != 2 || l[0].Tool != "t" || len(l[0].Keywords) != 2 || l[0].Keywords[0] != `/properties/n/maxium: unknown keyword "maxium" (did you mean "maximum"?)` {
		t.Errorf("List: %+v", l)
	}
	for i := range 2 * maxListedKeywords {
		f.Note(fmt.Sprintf("s%d/mcp", i), "t", a)
	}
	if n := len(f.List()); n != maxListedKeywords {
		t.Errorf("%d findings kept, want %d", n, maxListedKeywords)
	}
	many := `{"properties": {`
	for i := range maxKeywordsShown + 5 {
		if i > 0 {
			many += ","
		}
		many += fmt.Sprintf(`"p%d": {"maxium": 1}`, i)
	}
	f.Note("big/mcp", "t", compile(many+"}}"))
	for _, e := range f.List() {
		if e.Server == "big/mcp" && (len(e.Keywords) != maxKeywordsShown || e.More != 5) {
			t.Errorf("big: %d keywords shown, %d more; want %d, 5", len(e.Keywords), e.More, maxKeywordsShown)
		}
	}
}
