package policies

import (
	"bytes"
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/open-policy-agent/opa/v1/rego"
)

func TestAppendJSONMatchesInputDocument(t *testing.T) {
	tests := []struct {
		name string
		in   Input
	}{
		{"empty", Input{}},
		{"full", Input{
			Tool:      "pubmed_search",
			Arguments: map[string]any{"term": "brca1", "retmax": json.Number("5"), "ok": true, "none": nil, "ids": []any{"a", json.Number("-1.5e3")}, "f": 2.5, "n": 3},
			Request: Request{Method: "GET", Host: "h:443", Path: "/a%20b", PathVars: map[string]string{"id": "7"},
				Query: map[string][]string{"b": {"1", "2"}, "a": {}}, Headers: map[string]string{"x-a": "v"}},
			Caller:  Caller{Agent: "agent", Session: "s"},
			TraceID: "0af7651916cd43dd8448eb211c80319c",
		}},
		{"unicode and escapes", Input{
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
			want, _ := json.Marshal(tt.in.toValue())
			json.Unmarshal(want, &wantDoc)
			if !reflect.DeepEqual(gotDoc, wantDoc) {
				t.Fatalf("got %s\nwant %s", got, want)
			}
		})
	}
}

func TestAppendJSONInvalid(t *testing.T) {
	for name, v := range map[string]any{
		"bad number": json.Number("1x"),
		"channel":    make(chan int),
		"too deep":   deep(maxInputDepth + 5),
	} {
		if _, err := (&Input{Arguments: map[string]any{"v": v}}).AppendJSON(nil); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	b, err := (&Input{Tool: "a\xffb"}).AppendJSON(nil)
	if err != nil || !bytes.Contains(b, []byte(`"a\ufffdb"`)) {
		t.Fatalf("invalid UTF-8 not replaced: %s %v", b, err)
	}
}

func deep(n int) any {
	var v any = "x"
	for range n {
		v = []any{v}
	}
	return v
}

func TestDecodeResult(t *testing.T) {
	tests := []struct {
		name, doc string
		want      Result
		err       string
	}{
		{"empty", `{}`, Result{Allowed: true}, ""},
		{"deny strings and objects", `{"deny":["b",{"msg":"a","path":"/q","code":"validation","expected":"x"}],"allow":true}`,
			Result{Allowed: true, Denies: []Violation{{Reason: ReasonPolicyDenied, Message: "b", Code: CodePolicy}, {Reason: ReasonPolicyDenied, Message: "a", Path: "/q", Code: CodeValidation, Expected: "x"}}}, ""},
		{"allow false", `{"allow":false}`, Result{}, ""},
		{"inject", `{"inject":{"x-trace-id":"1"}}`, Result{Allowed: true, Inject: map[string]string{"X-Trace-Id": "1"}}, ""},
		{"not JSON", `{"deny":`, Result{}, "not JSON"},
		{"trailing", `{} {}`, Result{}, "after top-level value"},
		{"array", `[]`, Result{}, "must be an object"},
		{"allow string", `{"allow":"yes"}`, Result{}, "allow must be a boolean"},
		{"bad header", `{"inject":{"a b":"1"}}`, Result{}, "valid header name"},
		{"too large", `{"deny":["` + strings.Repeat("x", MaxDecisionBytes) + `"]}`, Result{}, "larger than"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := DecodeResult([]byte(tt.doc))
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

// FuzzDecodeResult: DecodeResult never panics, accepts only JSON, and
// what it accepts has valid codes and one-line header injections.
func FuzzDecodeResult(f *testing.F) {
	for _, s := range []string{`{}`, `{"deny":["x",{"msg":"m","path":"/a"}],"allow":false,"inject":{"X-A":"b"}}`,
		`{"deny":{}}`, `null`, `{"inject":{"a":"b\r\n"}}`, `{"allow":true} x`, "\x00\xff"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		res, err := DecodeResult(data)
		if err != nil {
			return
		}
		if !json.Valid(bytes.TrimSpace(data)) {
			t.Fatalf("accepted invalid JSON %q", data)
		}
		for _, v := range res.Denies {
			if v.Reason != ReasonPolicyDenied || (v.Code != CodePolicy && v.Code != CodeValidation) {
				t.Fatalf("bad violation %+v from %q", v, data)
			}
		}
		for k, v := range res.Inject {
			if !validHeaderName(k) || strings.ContainsAny(v, "\r\n") {
				t.Fatalf("bad inject %q: %q", k, v)
			}
		}
	})
}

// TestDecisionRego: the wrapper rule evaluates to the document the
// interpreter's decision query reads, for each shape of decision rules.
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
