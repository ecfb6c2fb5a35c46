package suggest

import "testing"

// TestNearest checks the suggestions a configuration author would expect,
// and that a name far from every known one gets none.
func TestNearest(t *testing.T) {
	known := []string{"host", "path", "method", "max_body_bytes", "forward", "reverse", "transparent", "allow_non_loopback"}
	for _, tc := range []struct {
		name, want string
	}{
		{"pth", "path"},
		{"hots", "host"},                     // two neighbours swapped
		{"forwrd", "forward"},                // a deletion
		{"methd", "method"},                  // a deletion
		{"maxBodyBytes", "max_body_bytes"},   // another case convention
		{"max-body-bytes", "max_body_bytes"}, // another separator
		{"max_body_byte", "max_body_bytes"},  // an insertion
		{"trnasprent", "transparent"},        // a swap and a deletion
		{"allow_non_loopbak", "allow_non_loopback"},
		{"revers", "reverse"},
		{"x", ""},        // one letter is not a typo of any
		{"upstream", ""}, // far from every name
		{"headers", ""},  // far from every name
		{"host", ""},     // known already
		{"", ""},         // nothing to suggest for nothing
		{"pathpathpathpathpathpathpathpathpathpathpathpathpathpathpathpathpath", ""}, // too long
	} {
		got, ok := Nearest(tc.name, known)
		if got != tc.want || ok != (tc.want != "") {
			t.Errorf("Nearest(%q) = %q, %v; want %q", tc.name, got, ok, tc.want)
		}
	}
	// Among equally close names the first listed wins.
	if got, _ := Nearest("cat", []string{"bat", "cot"}); got != "bat" {
		t.Errorf("Nearest(cat) = %q, want the first of two equally close names, bat", got)
	}
}

// TestDistance checks the edit distance on the four kinds of edit.
func TestDistance(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int
	}{
		{"", "", 0}, {"a", "", 1}, {"", "ab", 2}, {"path", "path", 0},
		{"pth", "path", 1}, {"paths", "path", 1}, {"pxth", "path", 1}, {"paht", "path", 1},
		{"kitten", "sitting", 3}, {"ca", "abc", 3}, {"héte", "hete", 1},
	} {
		if got := distance(tc.a, tc.b); got != tc.want {
			t.Errorf("distance(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
		if got := distance(tc.b, tc.a); got != tc.want {
			t.Errorf("distance(%q, %q) = %d, want %d", tc.b, tc.a, got, tc.want)
		}
	}
}

// FuzzNearest feeds Nearest arbitrary names: it never panics, a suggestion
// is always one of the known names and never the name itself, and the
// distance is symmetric.
func FuzzNearest(f *testing.F) {
	for _, s := range []string{"", "pth", "maxBodyBytes", "\xff\xfe", "ééé", "a_-_b"} {
		f.Add(s, "path")
	}
	f.Fuzz(func(t *testing.T, name, other string) {
		known := []string{"path", "host", other}
		got, ok := Nearest(name, known)
		if ok && got != "path" && got != "host" && got != other {
			t.Fatalf("Nearest(%q) = %q, not a known name", name, got)
		}
		if ok && got == name {
			t.Fatalf("Nearest(%q) suggested the name itself", name)
		}
		if len(name) <= maxNameLen && len(other) <= maxNameLen {
			if d1, d2 := distance(name, other), distance(other, name); d1 != d2 {
				t.Fatalf("distance not symmetric: %d, %d", d1, d2)
			}
		}
	})
}
