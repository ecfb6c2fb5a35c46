package headtext

import (
	"net/textproto"
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
