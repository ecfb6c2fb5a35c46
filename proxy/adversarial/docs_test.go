package adversarial_test

import (
	"fmt"
	"os"
	"path"
	"regexp"
	"strings"
	"testing"
)

// TestSecurityDocNamesRealTests checks that every test and attack
// docs/security.md names as showing a guarantee exists: a test function of
// this package, or (with * as a wildcard) at least one row of an attack
// table.
func TestSecurityDocNamesRealTests(t *testing.T) {
	doc, err := os.ReadFile("../../docs/security.md")
	if err != nil {
		t.Fatal(err)
	}
	src := ""
	for _, f := range []string{"adversarial_test.go", "origins_test.go", "fuzz_test.go", "bounds_test.go", "requests_test.go", "headers_test.go"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		src += string(b)
	}
	var names []string
	for _, a := range attacks {
		names = append(names, a.name)
	}
	for _, a := range connectAttacks {
		names = append(names, a.name)
	}
	for _, a := range clientAttacks {
		names = append(names, a.name)
	}
	for _, a := range requestsAttacks {
		names = append(names, a.name)
	}
	for _, a := range slowAttacks {
		names = append(names, a.name)
	}
	for _, s := range secretConfigs {
		names = append(names, s.name)
	}
	names = append(names, "secret-reaches-own-origin")
	matches := func(pattern string) bool {
		for _, n := range names {
			if ok, _ := path.Match(pattern, n); ok {
				return true
			}
		}
		return false
	}
	// The guarantees table: its "shown by" column.
	inTable := false
	checked := 0
	for _, line := range strings.Split(string(doc), "\n") {
		if strings.HasPrefix(line, "| # | guarantee") {
			inTable = true
			continue
		}
		if inTable && !strings.HasPrefix(line, "|") {
			break
		}
		if !inTable || strings.HasPrefix(line, "|---") {
			continue
		}
		cols := strings.Split(line, "|")
		shown := cols[len(cols)-2]
		for _, m := range regexp.MustCompile("`([^`]+)`").FindAllStringSubmatch(shown, -1) {
			for _, name := range strings.Split(m[1], "/") {
				checked++
				switch {
				case strings.HasPrefix(name, "Test") || strings.HasPrefix(name, "Fuzz"):
					if !strings.Contains(src, "func "+name+"(") {
						t.Errorf("docs/security.md names %s, which is not a test of proxy/adversarial", name)
					}
				case !matches(name):
					t.Errorf("docs/security.md names the attack %q, which matches no row of the attack tables", name)
				}
			}
		}
	}
	if want := fmt.Sprintf("(%d attacks,", len(attacks)); !strings.Contains(string(doc), want) {
		t.Errorf("docs/security.md should say TestAdversarial runs %s", want)
	}
	if checked < 20 {
		t.Fatalf("found only %d names in docs/security.md's guarantees table; has its header changed?", checked)
	}
}
