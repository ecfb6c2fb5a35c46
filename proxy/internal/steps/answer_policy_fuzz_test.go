package steps

import (
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/proxy/internal/pipe"
)

// FuzzPolicyAnswer: reading an upstream answer for the answer policies
// never panics; what it reads as JSON, folded, has every member name in
// its folded form, and every pointer to a value of the folded body names a
// value of the body as upstream sent it, which replaceAt replaces.
func FuzzPolicyAnswer(f *testing.F) {
	for _, s := range []struct{ ct, body string }{
		{"application/json", `{"ssn":"1","Email":"x","items":[{"Card":"4"}]}`},
		{"application/json", `{"ſsn":"1","K":{"K":[1,{"A~/b":2}]}}`},
		{"application/json", `{"a":1,"A":2}`},
		{"text/plain", `  {"SSN":"1"}`},
		{"text/plain", `{"ssn":NaN}`},
		{"text/plain; charset=utf-16", "{\x00}\x00"},
		{"application/json", "\ufeff{}"},
		{"text/html", "<p>hi</p>"},
	} {
		f.Add(s.ct, []byte(s.body))
	}
	f.Fuzz(func(t *testing.T, ct string, body []byte) {
		a := &pipe.Answer{Status: 200, Header: http.Header{"Content-Type": {ct}}, Body: body}
		v, _, why := readAnswer(a, 64)
		if why != "" {
			return
		}
		folded := foldNames(v)
		var walk func(fv any, ptr string, depth int)
		walk = func(fv any, ptr string, depth int) {
			if depth > 64 {
				return
			}
			switch x := fv.(type) {
			case map[string]any:
				for k, e := range x {
					if policyName(k) != k {
						t.Fatalf("folded name %q folds again to %q", k, policyName(k))
					}
					p := ptr + "/" + strings.ReplaceAll(strings.ReplaceAll(k, "~", "~0"), "/", "~1")
					if _, _, ok := lookupFolded(v, p); !ok {
						t.Fatalf("pointer %q of the folded body names nothing in %s", p, body)
					}
					walk(e, p, depth+1)
				}
			case []any:
				for i, e := range x {
					walk(e, ptr+"/"+strconv.Itoa(i), depth+1)
				}
			}
		}
		walk(folded, "", 0)
	})
}

// TestPolicyName: names read alike exactly when they are equal under case
// folding, and in lower case where the letter has one.
func TestPolicyName(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"ssn", "ssn"}, {"SSN", "ssn"}, {"Ssn", "ssn"}, {"ſsn", "ssn"}, {"\u212Aey", "key"},
		{"ΣΑΣ", "σασ"}, {"ς", "σ"}, {"İd", "İd"}, {"i̇d", "i̇d"}, {"apiKey", "apikey"}, {"a~/b", "a~/b"},
	} {
		if got := policyName(tc.in); got != tc.want {
			t.Errorf("policyName(%q) = %q; want %q", tc.in, got, tc.want)
		}
	}
	names := []string{"İ", "i̇", "I", "i", "ı", "ß", "ẞ", "SS", "ǅ", "ǆ", "Ǆ", "Ω", "ω", "Ω"}
	for _, a := range names {
		for _, b := range names {
			if (policyName(a) == policyName(b)) != strings.EqualFold(a, b) {
				t.Errorf("%q and %q: read alike %v, equal under folding %v", a, b, policyName(a) == policyName(b), strings.EqualFold(a, b))
			}
		}
	}
}
