package demo

import (
	"bytes"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/sink"
)

// TestWrap breaks details at spaces, keeps every word, and gives a word
// wider than the column a line of its own.
func TestWrap(t *testing.T) {
	tests := []struct {
		name  string
		in    string
		width int
		want  []string
	}{
		{"empty", "", 10, []string{""}},
		{"fits", "a b c", 5, []string{"a b c"}},
		{"breaks at a space", "aaa bbb ccc", 7, []string{"aaa bbb", "ccc"}},
		{"long word alone", "a " + strings.Repeat("x", 12) + " b", 5, []string{"a", strings.Repeat("x", 12), "b"}},
		{"runs of spaces", "a   b", 10, []string{"a b"}},
	}
	for _, tc := range tests {
		if got := wrap(tc.in, tc.width); strings.Join(got, "|") != strings.Join(tc.want, "|") {
			t.Errorf("%s: wrap(%q, %d) = %q, want %q", tc.name, tc.in, tc.width, got, tc.want)
		}
	}
}

// TestPrintTableWrapsDetail: a detail wider than DetailWidth is printed
// whole, on lines below its row that start at the DETAIL column with
// every other cell empty.
func TestPrintTableWrapsDetail(t *testing.T) {
	long := strings.TrimSpace(strings.Repeat("word ", 60)) + " (the hint at the end)"
	results := []Result{
		{Call: Call{Via: ViaProxy, Method: "GET", Path: "/a"}, Session: "s1", Status: 403, Enveloped: true},
		{Call: Call{Via: ViaProxy, Method: "GET", Path: "/b", Note: "short"}, Session: "s2", Status: 200},
	}
	events := []sink.Event{
		{Session: "s1", ErrorCode: "policy", Reason: "loop_detected", Detail: long},
		{Session: "s2"},
	}
	var b bytes.Buffer
	PrintTable(&b, results, events)
	lines := strings.Split(strings.TrimRight(b.String(), "\n"), "\n")
	at := strings.Index(lines[0], "DETAIL")
	var detail []string
	for _, l := range lines[1 : len(lines)-1] {
		if len(l) <= at {
			t.Fatalf("a line shorter than the DETAIL column:\n%s", b.String())
		}
		if l != lines[1] && strings.TrimSpace(l[:at]) != "" {
			t.Errorf("a continuation line with other cells filled: %q", l)
		}
		d := strings.TrimRight(l[at:], " ")
		if len(d) > DetailWidth {
			t.Errorf("a DETAIL line of %d bytes, wider than %d", len(d), DetailWidth)
		}
		detail = append(detail, d)
	}
	if len(detail) < 2 || strings.Join(detail, " ") != long {
		t.Errorf("DETAIL lines %q, want %q wrapped", detail, long)
	}
	if last := lines[len(lines)-1]; !strings.HasPrefix(last, "2 ") || !strings.HasSuffix(strings.TrimRight(last, " "), "short") {
		t.Errorf("the next row: %q", last)
	}
}
