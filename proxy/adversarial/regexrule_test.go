package adversarial_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"testing"
	"time"

	"github.com/toolgate/toolgate/policies"
	"github.com/toolgate/toolgate/policies/rego"
	"github.com/toolgate/toolgate/proxy"
)

// piiPatterns are the deny rules' patterns of regexPolicy: what platform
// teams write for e-mail addresses, card-like numbers and a tagged secret,
// each in a rule of its own. Each pattern is a constant, so the compiled
// engine answers a string that lacks one of its literals (the "@", the
// "-", "secret:") without running the expression.
var piiPatterns = []string{
	`[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}`,
	`\b[0-9]{4}-[0-9]{4}-[0-9]{4}-[0-9]{4}\b`,
	`secret:[A-Za-z0-9]{8,}`,
}

const regexPolicy = `package pii
import rego.v1
deny contains "e-mail" if regex.match(%q, input.arguments.query)
deny contains "card" if regex.match(%q, input.arguments.query)
deny contains "secret" if regex.match(%q, input.arguments.query)
`

// regexListPolicy denies with the same patterns taken from a list, as
// teams also write it: the compiled engine learns each pattern's literals
// at its first use.
const regexListPolicy = `package piilist
import rego.v1
patterns := [%q, %q, %q]
deny contains "the query holds personal data" if {
	some p in patterns
	regex.match(p, input.arguments.query)
}
`

// regexCalls are queries that hide, split or disguise what the patterns
// look for, or hold their literals without a match: JSON escapes of the
// literals, lone surrogates (which decode to U+FFFD) beside them, look-alike
// characters, case, a literal with nothing around it, long strings without
// a literal.
var regexCalls = []string{
	`"EGFR kinase inhibitors"`,
	`"dana@example.org"`,
	`"dana\u0040example.org"`,
	`"dana\ud800@example.org"`,
	`"dana@\ud800example.org"`,
	`"dana＠example.org"`,
	`"DANA@EXAMPLE.ORG"`,
	`"dana@example"`,
	`"@"`,
	`"a@b.c"`,
	`"a@b.cd"`,
	`"x\u0000dana@example.org"`,
	`"card 4111-1111-1111-1111 here"`,
	`"card 4111\u002d1111-1111-1111"`,
	`"card 4111–1111–1111–1111"`,
	`"card 41111-1111-1111-1111"`,
	`"Secret:abcdefgh1"`,
	`"secret:abcdefgh1"`,
	`"secret\u003aabcdefgh1"`,
	`"secret:abc"`,
	`"` + longQuery + `"`,
	`"` + longQuery + `dana@example.org"`,
	`"ａ@example.org"`,
	`"dana@example.orgé"`,
}

var longQuery = func() string {
	b := make([]byte, 4000)
	for i := range b {
		b[i] = "abcdefghij klmnopqrst.uvwxyz-0123456789"[i%39]
	}
	return string(b)
}()

// TestAdversarialRegexRule sends regexCalls through a real toolgate to two
// tools whose Rego policies (compiled engine) deny queries matching
// piiPatterns, each pattern in a rule of its own on one and taken from a
// list on the other, to a real upstream, and judges by what the upstream's handler received:
// a call reached it exactly when Go's regexp (what regex.match runs)
// finds none of the patterns in the query as JSON decodes it.
func TestAdversarialRegexRule(t *testing.T) {
	// checker is tool's policy set: source with piiPatterns in it, on the
	// compiled engine, enforced.
	checker := func(tool, source string) proxy.Checker {
		pol, err := rego.Compile(tool, map[string][]byte{tool + ".rego": []byte(fmt.Sprintf(source,
			piiPatterns[0], piiPatterns[1], piiPatterns[2]))})
		if err != nil {
			t.Fatal(err)
		}
		compiled, err := pol.Compiled(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return policies.NewSet(tool, []policies.Bound{{Policy: compiled, Mode: policies.ModeEnforce}}, 10*time.Second, false)
	}
	up := newRecordingUpstream(t)
	g, err := startGateSnap(t, fmt.Sprintf("listen:\n  forward: 127.0.0.1:0\ntools:\n  - {name: pii, match: {host: %[1]q, method: POST, path: /pii}}\n  - {name: pii_list, match: {host: %[1]q, method: POST, path: /pii_list}}\n", up.authority()),
		proxy.Snapshot{Checkers: map[string]proxy.Checker{
			"pii":      checker("pii", regexPolicy),
			"pii_list": checker("pii_list", regexListPolicy),
		}})
	if err != nil {
		t.Fatal(err)
	}
	res := make([]*regexp.Regexp, len(piiPatterns))
	for i, p := range piiPatterns {
		res[i] = regexp.MustCompile(p)
	}
	fwd := g.srv.Addr("forward", 0)
	var reached, refused int
	for i := range 2 * len(regexCalls) {
		q, path := regexCalls[i%len(regexCalls)], []string{"/pii", "/pii_list"}[i/len(regexCalls)]
		body := `{"query": ` + q + `}`
		var args struct{ Query string }
		if err := json.Unmarshal([]byte(body), &args); err != nil {
			t.Fatalf("%.80s: %v", body, err)
		}
		holds := false
		for _, re := range res {
			holds = holds || re.MatchString(args.Query)
		}
		trace, tp := newTrace()
		status := goDo(t, fwd, nil, http.MethodPost, "http://"+up.authority()+path, tp, body)
		got := up.received(trace)
		switch {
		case holds && len(got) != 0:
			t.Errorf("%s %.80s: a pattern matches it, the upstream received it (status %d)", path, body, status)
		case holds && status != http.StatusForbidden:
			t.Errorf("%s %.80s: status %d, want a 403 refusal", path, body, status)
		case !holds && (len(got) != 1 || got[0] != body):
			t.Errorf("%s %.80s: no pattern matches it, the upstream received %d calls (status %d)", path, body, len(got), status)
		case holds:
			refused++
		default:
			reached++
		}
	}
	t.Logf("%d calls: %d reached the upstream, %d refused", 2*len(regexCalls), reached, refused)
	if reached == 0 || refused == 0 {
		t.Errorf("the table must hold both calls the rule refuses and calls it lets through")
	}
}
