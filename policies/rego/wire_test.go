package rego

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/open-policy-agent/opa/v1/rego"

	"github.com/toolgate/toolgate/policies"
)

func TestAppendJSONMatchesInputDocument(t *testing.T) {
	tests := []struct {
		name string
		in   policies.Input
	}{
		{"empty", policies.Input{}},
		{"full", policies.Input{
			Tool:      "pubmed_search",
			Arguments: map[string]any{"term": "brca1", "retmax": json.Number("5"), "ok": true, "none": nil, "ids": []any{"a", json.Number("-1.5e3")}, "f": 2.5, "n": 3},
			Request: policies.Request{Method: "GET", Host: "h:443", Path: "/a%20b", PathVars: map[string]string{"id": "7"},
				Query: map[string][]string{"b": {"1", "2"}, "a": {}}, Headers: map[string]string{"x-a": "v"}},
			Caller:  policies.Caller{Agent: "agent", Session: "s"},
			TraceID: "0af7651916cd43dd8448eb211c80319c",
		}},
		{"unicode and escapes", policies.Input{
			Tool:      "t\"\\\n\r\t\x01</>&",
			Arguments: map[string]any{"ünï": "日本語 \u2028 🙂", "nested": map[string]any{"deep": []any{map[string]any{"x": "\x7f"}}}},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.in.AppendJSON(nil)
			if err != nil {
				t.Fatal(err)
			}
			var gotDoc, wantDoc any
			if err := json.Unmarshal(got, &gotDoc); err != nil {
				t.Fatalf("not JSON: %v\n%s", err, got)
			}
			want, _ := json.Marshal(inputValue(&tt.in))
			json.Unmarshal(want, &wantDoc)
			if !reflect.DeepEqual(gotDoc, wantDoc) {
				t.Fatalf("got %s\nwant %s", got, want)
			}
		})
	}
}

func TestDecisionRego(t *testing.T) {
	tests := []struct {
		name, src, input string
		want             string
	}{
		{"partial deny and inject", "package p\ndeny contains \"no\" if input.x > 1\ninject[\"X-A\"] := \"b\"", `{"x":2}`, `{"deny":["no"],"inject":{"X-A":"b"}}`},
		{"partial deny empty", "package p\ndeny contains \"no\" if input.x > 1", `{"x":0}`, `{"deny":[]}`},
		{"allow without default, undefined", "package p\nallow if input.x == 1", `{"x":0}`, `{}`},
		{"allow without default, true", "package p\nallow if input.x == 1", `{"x":1}`, `{"allow":true}`},
		{"allow with default", "package p\ndefault allow := false\nallow if input.x == 1", `{"x":0}`, `{"allow":false}`},
		{"complete deny", "package a.b\ndeny := {\"x\"} if input.x", `{"x":true}`, `{"deny":["x"]}`},
		{"complete inject undefined", "package p\ninject := {\"X-A\": \"1\"} if input.x", `{}`, `{"inject":{}}`},
		{"nothing", "package p\nhelper := 1", `{}`, `{}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src, err := DecisionRego(map[string][]byte{"p.rego": []byte(tt.src), "p_test.rego": []byte("package other\n")})
			if err != nil {
				t.Fatal(err)
			}
			var input any
			json.Unmarshal([]byte(tt.input), &input)
			rs, err := rego.New(rego.Query("data."+DecisionPackage+".decision"),
				rego.Module("p.rego", tt.src), rego.Module("wrap.rego", src), rego.Input(input)).Eval(context.Background())
			if err != nil {
				t.Fatalf("%v\n%s", err, src)
			}
			got, _ := json.Marshal(rs[0].Expressions[0].Value)
			if string(got) != tt.want {
				t.Fatalf("got %s, want %s\n%s", got, tt.want, src)
			}
		})
	}
	if _, err := DecisionRego(map[string][]byte{"a.rego": []byte("package a"), "b.rego": []byte("package b")}); err == nil {
		t.Fatal("two packages accepted")
	}
	if _, err := DecisionRego(map[string][]byte{"a_test.rego": []byte("package a")}); err == nil {
		t.Fatal("tests only accepted")
	}
}

func BenchmarkAppendJSON(b *testing.B) {
	in := benchInput()
	var buf []byte
	b.ReportAllocs()
	for b.Loop() {
		buf, _ = in.AppendJSON(buf[:0])
	}
}
