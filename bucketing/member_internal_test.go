package bucketing

import (
	"bytes"
	"encoding/json"
	"testing"
)

// memberByDecoder is member written with encoding/json, for valid JSON only:
// the reference FuzzMember holds member to.
func memberByDecoder(t *testing.T, body []byte, name string) []byte {
	dec := json.NewDecoder(bytes.NewReader(body))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			t.Fatalf("Token() on valid JSON %q: %v", body, err)
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			t.Fatalf("Decode() on valid JSON %q: %v", body, err)
		}
		if tok.(string) == name {
			return v
		}
	}
	return nil
}

func FuzzMember(f *testing.F) {
	for _, body := range []string{
		`{"error":{"code":1}}`, `{"error":null}`, `{"data":[{"error":1}],"error":""}`,
		`{"\u0065rror":true}`, `{"a":"\"error\":1","error":false}`, ` { "error" : 0 } `,
		`[{"error":1}]`, `"error"`, `{"error":"x"`, `{}`, `{"error":1,"error":2}`,
	} {
		f.Add([]byte(body), "error")
	}
	f.Fuzz(func(t *testing.T, body []byte, name string) {
		got := member(body, name) // never panics, on any input
		if !json.Valid(body) {
			return
		}
		want := memberByDecoder(t, body, name)
		if !bytes.Equal(got, want) && !(got == nil && len(want) == 0) {
			t.Errorf("member(%q, %q) = %q, want %q", body, name, got, want)
		}
	})
}
