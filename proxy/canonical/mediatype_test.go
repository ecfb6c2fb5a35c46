package canonical

import (
	"maps"
	"mime"
	"testing"
)

// TestParseMediaTypeAgreesWithMime checks the fast path answers what
// mime.ParseMediaType answers, for the values it short-cuts and their near
// misses.
func TestParseMediaTypeAgreesWithMime(t *testing.T) {
	for _, v := range []string{
		"application/json", "text/plain", "application/x-www-form-urlencoded",
		"Application/JSON", "application/json; charset=utf-8", " application/json", "application/json ",
		"text/plain;charset=latin1", "application/json;", "", "nonsense", "application/problem+json",
	} {
		mt, params, err := ParseMediaType(v)
		wmt, wparams, werr := mime.ParseMediaType(v)
		if mt != wmt || (err == nil) != (werr == nil) || !maps.Equal(params, wparams) {
			t.Errorf("parseMediaType(%q) = %q, %v, %v; mime says %q, %v, %v", v, mt, params, err, wmt, wparams, werr)
		}
	}
}
