package mcp

import (
	"encoding/json"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestBodyless checks which requests that are not POSTs carry no message.
func TestBodyless(t *testing.T) {
	for _, tc := range []struct {
		name string
		body string
		size int64
		ok   bool
	}{
		{"no body", "", 0, true},
		{"declared body", "{}", 2, false},
		{"body of unknown length", "{}", -1, false},
		{"empty body of unknown length", "", -1, true},
	} {
		r, _ := http.NewRequest(http.MethodGet, "http://a/mcp", strings.NewReader(tc.body))
		r.ContentLength = tc.size
		if tc.body == "" && tc.size == 0 {
			r.Body = http.NoBody
		}
		body, ok, err := Bodyless(r)
		if err != nil || ok != tc.ok || (ok && body != http.NoBody) {
			t.Errorf("%s: ok %v err %v, want ok %v", tc.name, ok, err, tc.ok)
		}
	}
}

// FuzzRPCMembers checks rpcMembers, the scanner checkRPCReading reads
// member names with, against encoding/json: for any object json.Unmarshal
// accepts, the scanner yields the same names (escapes decoded) with the
// same value text, the last of a repeated name as the map keeps it.
func FuzzRPCMembers(f *testing.F) {
	// Its other seeds, in testdata/fuzz/FuzzRPCMembers, are the bodies of
	// package proxy's readerVariants and readerControls.
	f.Add([]byte(` { "a" : [1, {"b":"}"}] , "\u0063":"x\"y" ,"d":-1.5e3,"e":true,"f":null,"a":{}} `))
	f.Add([]byte(`{"":"","\\":"\\\\","\ud83d\ude00":[[]]}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		var want map[string]json.RawMessage
		if !utf8.Valid(raw) || json.Unmarshal(raw, &want) != nil || want == nil {
			return // checkRPCText refuses invalid UTF-8 before
		}
		got := map[string]json.RawMessage{}
		rpcMembers(raw, func(name, value []byte) bool {
			got[string(name)] = append(json.RawMessage(nil), value...)
			return true
		})
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("scanned %q, encoding/json read %q", got, want)
		}
	})
}
