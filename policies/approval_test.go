package policies_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/toolgate/toolgate/policies"
)

// TestDecodeApproval checks the approval member of a decision document:
// what is shown is only what the policy put in summary, bounded.
func TestDecodeApproval(t *testing.T) {
	tests := []struct {
		name    string
		doc     string
		want    string // effect|k=v,k=v; "-" for no approval
		wantErr string
	}{
		{name: "absent", doc: `{}`, want: "-"},
		{name: "false", doc: `{"approval": false}`, want: "-"},
		{name: "true", doc: `{"approval": true}`, want: "|"},
		{name: "object", doc: `{"approval": {"effect": "edits doc 1", "summary": {"doc_id": "1", "edits": 2, "dry": true}}}`, want: "edits doc 1|doc_id=1,dry=true,edits=2"},
		{name: "rego undefined", doc: `{"approval": []}`, want: "-"},
		{name: "rego defined", doc: `{"approval": [{"effect": "x"}]}`, want: "x|"},
		{name: "control characters", doc: `{"approval": {"effect": "a\nb", "summary": {"k": "1\r\n2"}}}`, want: "a b|k=1  2"},
		{name: "unknown member", doc: `{"approval": {"effect": "x", "args": {}}}`, wantErr: `unknown member "args"`},
		{name: "bad effect", doc: `{"approval": {"effect": 3}}`, wantErr: "approval.effect must be a string"},
		{name: "bad summary", doc: `{"approval": {"summary": [1]}}`, wantErr: "approval.summary must be an object"},
		{name: "number", doc: `{"approval": 1}`, wantErr: "approval must be a boolean or an object"},
		{name: "too many fields", doc: `{"approval": {"summary": {` + manyFields(33) + `}}}`, wantErr: "at most 32 are shown"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, err := policies.DecodeResult([]byte(tc.doc))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := approvalText(res.Approval); got != tc.want {
				t.Errorf("approval = %q, want %q", got, tc.want)
			}
		})
	}
	long := strings.Repeat("é", 400)
	res, err := policies.DecodeResult([]byte(`{"approval": {"effect": "` + long + `", "summary": {"k": "` + long + `"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if a := res.Approval; len(a.Effect) > policies.MaxApprovalEffectBytes || len(a.Summary["k"]) > policies.MaxApprovalSummaryValueBytes ||
		!utf8.ValidString(a.Effect) || !utf8.ValidString(a.Summary["k"]) {
		t.Errorf("long values not bounded: %d, %d bytes", len(a.Effect), len(a.Summary["k"]))
	}
}

func manyFields(n int) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`"f` + strings.Repeat("x", i) + `": 1`)
	}
	return b.String()
}

func approvalText(a *policies.Approval) string {
	if a == nil {
		return "-"
	}
	var kv []string
	for _, k := range sortedKeys(a.Summary) {
		kv = append(kv, k+"="+a.Summary[k])
	}
	return a.Effect + "|" + strings.Join(kv, ",")
}

func sortedKeys(m map[string]string) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	for i := range ks {
		for j := i + 1; j < len(ks); j++ {
			if ks[j] < ks[i] {
				ks[i], ks[j] = ks[j], ks[i]
			}
		}
	}
	return ks
}

// FuzzDecodeApproval feeds decision documents with an approval member to
// the decoder: it never panics, and what it shows is bounded valid text.
func FuzzDecodeApproval(f *testing.F) {
	for _, s := range []string{`{"approval": true}`, `{"approval": {"effect": "e", "summary": {"a": 1, "b": [1, {"c": null}]}}}`,
		`{"approval": [{"effect": "x"}]}`, `{"approval": {"summary": {"": 1}}}`, `{"approval": "yes"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		res, err := policies.DecodeResult(data)
		if err != nil || res.Approval == nil {
			return
		}
		a := res.Approval
		if len(a.Effect) > policies.MaxApprovalEffectBytes || len(a.Summary) > policies.MaxApprovalSummaryFields {
			t.Fatalf("unbounded approval: %d-byte effect, %d fields", len(a.Effect), len(a.Summary))
		}
		for k, v := range a.Summary {
			if len(k) > policies.MaxApprovalSummaryKeyBytes || len(v) > policies.MaxApprovalSummaryValueBytes || strings.ContainsAny(k+v, "\r\n") {
				t.Fatalf("unbounded summary field %q: %q", k, v)
			}
		}
	})
}
