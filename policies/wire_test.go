package policies

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/bucketing"
)

func TestAppendJSONInvalid(t *testing.T) {
	for name, v := range map[string]any{
		"bad number": json.Number("1x"),
		"channel":    make(chan int),
		"too deep":   deep(MaxInputDepth + 5),
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
			Result{Allowed: true, Denies: []Violation{{Reason: bucketing.ReasonPolicyDenied, Message: "b", Code: bucketing.CodePolicy}, {Reason: bucketing.ReasonPolicyDenied, Message: "a", Path: "/q", Code: bucketing.CodeValidation, Expected: "x"}}}, ""},
		{"allow false", `{"allow":false}`, Result{}, ""},
		{"inject", `{"inject":{"x-trace-id":"1"}}`, Result{Allowed: true, Inject: map[string]string{"X-Trace-Id": "1"}}, ""},
		{"not JSON", `{"deny":`, Result{}, "not JSON"},
		{"trailing", `{} {}`, Result{}, "after top-level value"},
		{"array", `[]`, Result{}, "must be an object"},
		{"allow string", `{"allow":"yes"}`, Result{}, "allow must be a boolean"},
		{"bad header", `{"inject":{"a b":"1"}}`, Result{}, "valid header name"},
		{"too large", `{"deny":["` + strings.Repeat("x", MaxDecisionBytes) + `"]}`, Result{}, "larger than"},
		{"withhold and redact", `{"withhold":["b",{"msg":"a","path":"/x"}],"redact":["/z","/a~1b"]}`,
			Result{Allowed: true, Withholds: []Violation{{Reason: bucketing.ReasonPolicyDenied, Message: "a", Code: bucketing.CodePolicy}, {Reason: bucketing.ReasonPolicyDenied, Message: "b", Code: bucketing.CodePolicy}},
				Redacts: []string{"/a~1b", "/z"}}, ""},
		{"withhold not a set", `{"withhold":"x"}`, Result{}, "withhold must be a set"},
		{"withhold object without msg", `{"withhold":[{"path":"/x"}]}`, Result{}, "a withhold object needs"},
		{"redact not a pointer", `{"redact":["email"]}`, Result{}, "JSON pointers"},
		{"redact of the whole body", `{"redact":[""]}`, Result{}, "JSON pointers"},
		{"redact with a bad escape", `{"redact":["/a~2"]}`, Result{}, "JSON pointers"},
		{"redact not a set", `{"redact":{"/a":true}}`, Result{}, "redact must be a set"},
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
		`{"deny":{}}`, `null`, `{"inject":{"a":"b\r\n"}}`, `{"allow":true} x`, "\x00\xff",
		`{"withhold":["x",{"msg":"m"}],"redact":["/a/0","/b~0"]}`, `{"redact":["/a~"]}`} {
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
			if v.Reason != bucketing.ReasonPolicyDenied || (v.Code != bucketing.CodePolicy && v.Code != bucketing.CodeValidation) {
				t.Fatalf("bad violation %+v from %q", v, data)
			}
		}
		for k, v := range res.Inject {
			if !validHeaderName(k) || strings.ContainsAny(v, "\r\n") {
				t.Fatalf("bad inject %q: %q", k, v)
			}
		}
		for _, v := range res.Withholds {
			if v.Path != "" || v.Message == "" {
				t.Fatalf("bad withhold %+v from %q", v, data)
			}
		}
		for _, p := range res.Redacts {
			if !strings.HasPrefix(p, "/") || !validPointer(p) {
				t.Fatalf("bad redact pointer %q from %q", p, data)
			}
		}
	})
}

// TestDecisionRego: the wrapper rule evaluates to the document the
// interpreter's decision query reads, for each shape of decision rules.
