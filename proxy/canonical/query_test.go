package canonical

import (
	"net/url"
	"reflect"
	"testing"
)

func TestCanonQuery(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", ""},
		{"force=0", "force=0"},
		{"force=%30", "force=0"},
		{"f%6Frce=0", "force=0"},
		{"q=%c3%a9", "q=%C3%A9"},
		{"q=a%2bb", "q=a%2Bb"},
		{"q=a+b", "q=a+b"},
		{"q=a%20b", "q=a%20b"},
		{"a=1;b=2", "a=1;b=2"},
		{"a=1&&b=2", "a=1&&b=2"},
		{"a=%", "a=%"},
		{"a=%4", "a=%4"},
		{"a=%zz", "a=%zz"},
		{"a=%2526", "a=%2526"},
		{"a=%7%30", "a=%7%30"}, // a broken escape: bound as written, never as "%70"
		{"a=%7E%2D%2E%5F", "a=~-._"},
	} {
		if got := Query(tc.in); got != tc.want {
			t.Errorf("canonQuery(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	// Spellings that upstreams read differently keep different forms.
	for _, p := range [][2]string{{"q=a+b", "q=a%2Bb"}, {"q=a+b", "q=a%20b"}, {"a=1&a=2", "a=2&a=1"}, {"a=1;b=2", "a=1&b=2"}, {"a=1", "a=1&"}} {
		if Query(p[0]) == Query(p[1]) {
			t.Errorf("%q and %q have one canonical form", p[0], p[1])
		}
	}
}

// FuzzCanonQuery: the canonical form is a fixed point and means what the
// query meant to Go's reader (whenever Go reads it).
func FuzzCanonQuery(f *testing.F) {
	for _, s := range []string{"force=%30", "q=%c3%a9&x=1", "a=%", "a=+%2B", "a=1;b=2", "%7e=%7E"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		c := Query(raw)
		if Query(c) != c {
			t.Fatalf("not a fixed point: %q -> %q -> %q", raw, c, Query(c))
		}
		want, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		got, err := url.ParseQuery(c)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("%q reads %v; its canonical form %q reads %v (%v)", raw, want, c, got, err)
		}
	})
}
