package conf

import (
	"strings"
	"testing"
)

func TestTemplateMatch(t *testing.T) {
	tests := []struct {
		tmpl     string
		path     string
		wantOK   bool
		wantVars map[string]string
	}{
		{"/esearch", "/esearch", true, nil},
		{"/esearch", "/esearch/", false, nil},
		{"/esearch", "/esearch2", false, nil},
		{"/v1/structure/{id}", "/v1/structure/P69905", true, map[string]string{"id": "P69905"}},
		{"/v1/structure/{id}", "/v1/structure/", false, nil},
		{"/v1/structure/{id}", "/v1/structure/a/b", false, nil},
		{"/v1/structure/{id}", "/v1/structure/a%2Fb", true, map[string]string{"id": "a/b"}},
		{"/v1/documents/{doc}:batchUpdate", "/v1/documents/d1:batchUpdate", true, map[string]string{"doc": "d1"}},
		{"/v1/documents/{doc}:batchUpdate", "/v1/documents/:batchUpdate", false, nil},
		{"/v1/documents/{doc}:batchUpdate", "/v1/documents/d1:get", false, nil},
		{"/a/{x}/b/{y}", "/a/1/b/2", true, map[string]string{"x": "1", "y": "2"}},
		{"/files/v{n}.json", "/files/v3.json", true, map[string]string{"n": "3"}},
	}
	for _, tc := range tests {
		t.Run(tc.tmpl+" "+tc.path, func(t *testing.T) {
			tm, err := parseTemplate(tc.tmpl)
			if err != nil {
				t.Fatal(err)
			}
			vars, _, ok := tm.Match(tc.path)
			if ok != tc.wantOK {
				t.Fatalf("match = %v, want %v", ok, tc.wantOK)
			}
			if len(vars) != len(tc.wantVars) {
				t.Fatalf("vars = %v, want %v", vars, tc.wantVars)
			}
			for k, v := range tc.wantVars {
				if vars[k] != v {
					t.Errorf("vars[%s] = %q, want %q", k, vars[k], v)
				}
			}
		})
	}
}

func TestTemplateErrors(t *testing.T) {
	tests := []struct{ tmpl, want string }{
		{"esearch", "must start with '/'"},
		{"/a/{id", "unbalanced"},
		{"/a/id}", "unbalanced"},
		{"/a/{}", "not a valid variable name"},
		{"/a/{1x}", "not a valid variable name"},
		{"/a/{x}{y}", "one variable only"},
		{"/a/{x}/b/{x}", "appears twice"},
	}
	for _, tc := range tests {
		t.Run(tc.tmpl, func(t *testing.T) {
			_, err := parseTemplate(tc.tmpl)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestRoutePrecedence(t *testing.T) {
	cfg := Config{Tools: []ToolConfig{
		{Name: "any_host_var", Match: MatchConfig{Path: "/v1/{kind}"}},
		{Name: "literal", Match: MatchConfig{Path: "/v1/search"}},
		{Name: "literal_get", Match: MatchConfig{Path: "/v1/search", Method: "get"}},
		{Name: "host_port", Match: MatchConfig{Host: "api.example:8443", Path: "/v1/search", Method: "GET"}},
		{Name: "other_host", Match: MatchConfig{Host: "other.example", Path: "/v2/{x}"}},
	}}
	if err := cfg.Validate(""); err != nil {
		t.Fatal(err)
	}
	tests := []struct{ method, host, port, path, want string }{
		{"POST", "api.example", "80", "/v1/search", "literal"},
		{"GET", "api.example", "80", "/v1/search", "literal_get"},
		{"GET", "api.example", "8443", "/v1/search", "host_port"},
		{"GET", "api.example", "80", "/v1/other", "any_host_var"},
		{"GET", "api.example", "80", "/v2/x", ""},
		{"GET", "other.example", "443", "/v2/x", "other_host"},
	}
	for _, tc := range tests {
		got, _ := Route(cfg.Compiled, tc.method, tc.host, tc.port, tc.path)
		name := ""
		if got != nil {
			name = got.Cfg.Name
		}
		if name != tc.want {
			t.Errorf("%s %s:%s%s -> %q, want %q", tc.method, tc.host, tc.port, tc.path, name, tc.want)
		}
	}
}

// FuzzTemplate parses arbitrary templates and matches arbitrary paths:
// nothing panics, and a template always matches its own literal rendering.
func FuzzTemplate(f *testing.F) {
	f.Add("/v1/structure/{id}", "/v1/structure/P1")
	f.Add("/v1/documents/{doc}:batchUpdate", "/v1/documents/x:batchUpdate")
	f.Add("/{a}/{b}", "//")
	f.Add("/a{", "/a{")
	f.Fuzz(func(t *testing.T, tmpl, path string) {
		tm, err := parseTemplate(tmpl)
		if err != nil {
			return
		}
		tm.Match(path)
		var b strings.Builder
		for _, s := range tm.Segs {
			b.WriteByte('/')
			if s.Name == "" {
				b.WriteString(s.Lit)
			} else {
				b.WriteString(s.Prefix + "v" + s.Suffix)
			}
		}
		if strings.ContainsAny(b.String(), "%") {
			return
		}
		if _, _, ok := tm.Match(b.String()); !ok {
			t.Fatalf("template %q does not match its own rendering %q", tmpl, b.String())
		}
	})
}
