package argshape

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func decode(t testing.TB, body string) map[string]any {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(body))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestOf(t *testing.T) {
	for _, tc := range []struct {
		name string
		args string
		o    Options
		want string
	}{
		{"types", `{"a":"x","b":1,"c":1.5,"d":true,"e":null,"f":2e3}`, Options{},
			`{"t":{"object":1},"m":{"a":{"t":{"string":1}},"b":{"t":{"integer":1}},"c":{"t":{"number":1}},"d":{"t":{"boolean":1}},"e":{"t":{"null":1}},"f":{"t":{"integer":1}}}}`},
		{"formats", `{"at":"2026-12-01T10:00:00Z","day":"2026-12-01","id":"0b7e6f0a-6d3c-4c52-9a55-3d1d2b7a9f10","mail":"a@example.org","ip":"10.0.0.1","u":"https://example.org/x","plain":"hello world"}`, Options{},
			`{"t":{"object":1},"m":{"at":{"t":{"string":1},"f":{"date-time":1}},"day":{"t":{"string":1},"f":{"date":1}},"id":{"t":{"string":1},"f":{"uuid":1}},"ip":{"t":{"string":1},"f":{"ipv4":1}},"mail":{"t":{"string":1},"f":{"email":1}},"plain":{"t":{"string":1}},"u":{"t":{"string":1},"f":{"uri":1}}}}`},
		{"not-quite-formats", `{"a":"2026-13-45","b":"999.1.1.1","c":"mailto:x","d":"a@b"}`, Options{},
			`{"t":{"object":1},"m":{"a":{"t":{"string":1}},"b":{"t":{"string":1}},"c":{"t":{"string":1}},"d":{"t":{"string":1}}}}`},
		{"nesting", `{"r":[{"k":1},{"k":2,"o":"x"}],"f":{"g":{"h":[]}}}`, Options{},
			`{"t":{"object":1},"m":{"f":{"t":{"object":1},"m":{"g":{"t":{"object":1},"m":{"h":{"t":{"array":1}}}}}},"r":{"t":{"array":1},"i":{"t":{"object":2},"m":{"k":{"t":{"integer":2}},"o":{"t":{"string":1}}}}}}}`},
		{"string-sourced", `{"q":"5","n":"1.5","b":"true","s":"x","j":"5"}`, Options{StringSourced: func(k string) bool { return k != "j" }},
			`{"t":{"object":1},"m":{"b":{"t":{"string":1},"l":{"boolean":1},"s":1},"j":{"t":{"string":1}},"n":{"t":{"string":1},"l":{"number":1},"s":1},"q":{"t":{"string":1},"l":{"integer":1},"s":1},"s":{"t":{"string":1},"s":1}}}`},
		{"enum", `{"status":"open","other":"secret","f":{"m":"antibody"},"l":["a","b"]}`, Options{EnumFields: map[string]bool{"status": true, "f.m": true, "l[]": true}},
			`{"t":{"object":1},"m":{"f":{"t":{"object":1},"m":{"m":{"t":{"string":1},"e":{"\"antibody\"":1}}}},"l":{"t":{"array":1},"i":{"t":{"string":2},"e":{"\"a\"":1,"\"b\"":1}}},"other":{"t":{"string":1}},"status":{"t":{"string":1},"e":{"\"open\"":1}}}}`},
		{"enum-not-scalar", `{"status":{"a":1}}`, Options{EnumFields: map[string]bool{"status": true}},
			`{"t":{"object":1},"m":{"status":{"t":{"object":1},"m":{"a":{"t":{"integer":1}}},"eo":true}}}`},
		{"names-bounded", `{"` + strings.Repeat("k", 65) + `":1,"a\u0001":2,"ok":3}`, Options{},
			`{"t":{"object":1},"m":{"ok":{"t":{"integer":1}}},"u":2}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Of(decode(t, tc.args), tc.o); got != tc.want {
				t.Errorf("Of(%s)\n got %s\nwant %s", tc.args, got, tc.want)
			}
		})
	}
}

// TestOfBounds checks the bounds: depth, members, bytes; values never
// appear in the shape.
func TestOfBounds(t *testing.T) {
	deep := strings.Repeat(`{"a":`, 20) + "1" + strings.Repeat("}", 20)
	s, err := Parse(Of(decode(t, deep), Options{}))
	if err != nil {
		t.Fatal(err)
	}
	if d := s.depth(); d > MaxDepth+1 {
		t.Errorf("depth %d, want at most %d", d, MaxDepth+1)
	}
	var b bytes.Buffer
	b.WriteString("{")
	for i := 0; i < 2000; i++ {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(`"` + strings.Repeat("n", 60) + strings.Repeat("x", i%4) + string(rune('a'+i%26)) + string(rune('a'+i/26%26)) + string(rune('a'+i/676)) + `":{"v":"secret-value"}`)
	}
	b.WriteString("}")
	enc := Of(decode(t, b.String()), Options{})
	if len(enc) > MaxBytes {
		t.Errorf("shape of %d bytes, want at most %d", len(enc), MaxBytes)
	}
	if strings.Contains(enc, "secret") {
		t.Errorf("shape holds a value: %s", enc)
	}
	s, err = Parse(enc)
	if err != nil {
		t.Fatal(err)
	}
	if !s.Cut || len(s.Members) == 0 || len(s.Members) > MaxMembers {
		t.Errorf("cut %v, %d members; want cut with 1..%d members", s.Cut, len(s.Members), MaxMembers)
	}
}

func TestMerge(t *testing.T) {
	var all Shape
	for _, body := range []string{`{"a":1,"b":"x"}`, `{"a":"y"}`, `{"a":2}`} {
		s, err := Parse(Of(decode(t, body), Options{}))
		if err != nil {
			t.Fatal(err)
		}
		all.Merge(s)
	}
	if all.Count() != 3 || all.Members["a"].Count() != 3 || all.Members["b"].Count() != 1 ||
		all.Members["a"].Types["integer"] != 2 || all.Members["a"].Types["string"] != 1 {
		b, _ := json.Marshal(&all)
		t.Errorf("merged %s", b)
	}
}

// FuzzOf checks that any JSON arguments give a shape within MaxBytes that
// Parse reads back, holding no string value longer than a name.
func FuzzOf(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":[1,"x",{"b":null}]}`, `{"status":"open"}`, `{"a":{"a":{"a":{"a":{"a":{"a":{"a":{"a":{"a":{"a":1}}}}}}}}}}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		dec := json.NewDecoder(strings.NewReader(body))
		dec.UseNumber()
		var m map[string]any
		if dec.Decode(&m) != nil || m == nil {
			return
		}
		enc := Of(m, Options{EnumFields: map[string]bool{"status": true}})
		if len(enc) > MaxBytes {
			t.Fatalf("shape of %d bytes", len(enc))
		}
		if _, err := Parse(enc); err != nil {
			t.Fatalf("Parse(Of(...)): %v", err)
		}
	})
}

// FuzzParse checks that Parse never panics and refuses what is not a
// bounded shape.
func FuzzParse(f *testing.F) {
	for _, s := range []string{`{}`, `{"t":{"object":1},"m":{"a":{"t":{"string":1}}}}`, `{"t":{"x":-1}}`, `[]`, `{"i":{"i":{"i":{}}}}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		s, err := Parse(text)
		if err != nil {
			return
		}
		var m Shape
		m.Merge(s)
		m.Merge(s)
	})
}
