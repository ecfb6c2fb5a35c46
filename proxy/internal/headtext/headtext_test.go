package headtext

import (
	"io/fs"
	"net/textproto"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// FuzzWriteCanonical holds WriteCanonical to net/textproto's canonical form
// of a valid header name, and EqualFold to strings.EqualFold in ASCII.
func FuzzWriteCanonical(f *testing.F) {
	for _, s := range []string{"content-length", "X-TRACE-ID", "x--y", "a", "-", "Www-authenticate", "accept-ENCODING"} {
		f.Add(s, strings.ToUpper(s))
	}
	f.Fuzz(func(t *testing.T, name, other string) {
		for i := 0; i < len(name); i++ {
			if c := name[i]; c >= 0x80 || !strings.ContainsRune("!#$%&'*+-.^_`|~", rune(c)) &&
				!('0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z') {
				t.Skip("not a token")
			}
		}
		if name == "" {
			t.Skip()
		}
		var sb strings.Builder
		WriteCanonical(&sb, []byte(name))
		if got, want := sb.String(), textproto.CanonicalMIMEHeaderKey(name); got != want {
			t.Errorf("WriteCanonical(%q) = %q, textproto gives %q", name, got, want)
		}
		ascii := true
		for i := 0; i < len(other); i++ {
			ascii = ascii && other[i] < 0x80
		}
		if ascii {
			if got, want := EqualFold(name, []byte(other)), strings.EqualFold(name, other); got != want {
				t.Errorf("EqualFold(%q, %q) = %v, strings.EqualFold %v", name, other, got, want)
			}
		}
	})
}

// TestGetKeysAreCanonical holds every literal key given to Get in the
// module to net/textproto's canonical form: Get does not canonicalize,
// and a key in another form would find nothing.
func TestGetKeysAreCanonical(t *testing.T) {
	root := "../../.."
	call := regexp.MustCompile(`headtext\.Get\([^,]+,\s*"([^"]*)"\)`)
	seen := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || d.Name() == "node_modules" || strings.HasPrefix(d.Name(), ".")) && path != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range call.FindAllStringSubmatch(string(src), -1) {
			seen++
			if k := m[1]; textproto.CanonicalMIMEHeaderKey(k) != k {
				t.Errorf("%s: headtext.Get with %q, whose canonical form is %q", path, k, textproto.CanonicalMIMEHeaderKey(k))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if seen == 0 {
		t.Fatal("found no call of headtext.Get with a literal key: the pattern is stale")
	}
}
