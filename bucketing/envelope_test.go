package bucketing_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/bucketing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// forwarded is the envelope of a forwarded call, built the way the proxy
// builds it.
func forwarded(o bucketing.Outcome, rules bucketing.Rules, data json.RawMessage) bucketing.Envelope {
	r := bucketing.Classify(o, rules, now)
	return r.Envelope(bucketing.Excerpt(o.Status, o.Header, o.Body, true), data)
}

// envelopeCases are the golden envelopes, one file each in
// testdata/envelopes, named after the case.
var envelopeCases = map[string]bucketing.Envelope{
	"ok_json": forwarded(bucketing.Outcome{Status: 200}, nil,
		json.RawMessage(`{ "count": 2,
		  "ids": ["a<b>", "c&d"] }`)),
	"ok_text":      forwarded(bucketing.Outcome{Status: 200}, nil, bucketing.TextData([]byte("plain <b>text</b>\n"))),
	"ok_not_json":  forwarded(bucketing.Outcome{Status: 200}, nil, json.RawMessage(`{"half":`)),
	"ok_empty":     forwarded(bucketing.Outcome{Status: 204}, nil, nil),
	"ok_bad_utf8":  forwarded(bucketing.Outcome{Status: 200}, nil, json.RawMessage("\"caf\xe9\"")),
	"ok_with_rule": forwarded(bucketing.Outcome{Status: 404}, bucketing.Rules{{Status: 404, Code: bucketing.CodeOK}}, json.RawMessage(`[]`)),
	"refusal_unknown_field": bucketing.Refusal(bucketing.CodeValidation, bucketing.ReasonUnknownField,
		"Tool 'pubmed_search' got unknown argument 'edit_requests'; expected one of: term, retmax, pmid",
		[]bucketing.Violation{{Path: "/edit_requests", Message: "unknown argument", Expected: "absent"}}),
	"refusal_wrong_type": bucketing.Refusal(bucketing.CodeValidation, bucketing.ReasonWrongType,
		"Tool 'pubmed_search' got a string for /retmax; expected integer",
		[]bucketing.Violation{{Path: "/retmax", Message: "wrong type", Expected: "integer", Got: "string"}}),
	"refusal_policy": bucketing.Refusal(bucketing.CodePolicy, bucketing.ReasonPolicyDenied,
		"Tool 'doc_edit' may not edit documents outside the team's folder", nil),
	"rate_limit_429": forwarded(bucketing.Outcome{Status: 429, Header: http.Header{
		"Retry-After":           {"2"},
		"Content-Type":          {"application/json"},
		"X-Ratelimit-Remaining": {"0"},
		"Set-Cookie":            {"sid=secret"},
	}, Body: []byte(`{"message":"slow down <please>"}`)}, nil, nil),
	"rate_limit_quota_403": forwarded(bucketing.Outcome{Status: 403,
		Body: []byte(`{"error":{"errors":[{"reason":"rateLimitExceeded"}]}}`)},
		bucketing.Rules{quotaRule}, nil),
	"upstream_503": forwarded(bucketing.Outcome{Status: 503, Header: http.Header{
		"Retry-After":  {"Fri, 14 Mar 2025 12:00:30 GMT"},
		"Content-Type": {"text/html"},
	}, Body: []byte("<html>down for maintenance</html>")}, nil, nil),
	"upstream_error_in_body": forwarded(bucketing.Outcome{Status: 200,
		Body: []byte(`{"error":"backend unavailable","data":null}`)},
		bucketing.Rules{errorInBodyRule}, json.RawMessage(`{"error":"backend unavailable","data":null}`)),
	"upstream_timeout": forwarded(bucketing.Outcome{Err: os.ErrDeadlineExceeded}, nil, nil),
	"upstream_truncated": bucketing.Classify(bucketing.Outcome{Status: 200, Err: io.ErrUnexpectedEOF}, nil, now).Envelope(
		bucketing.Excerpt(200, http.Header{"Content-Type": {"text/plain"}}, []byte("the start of"), false), nil),
	"auth_401": forwarded(bucketing.Outcome{Status: 401, Header: http.Header{
		"Www-Authenticate": {`Bearer realm="api", error="invalid_token"`},
	}}, nil, nil),
	"unknown_status": forwarded(bucketing.Outcome{Status: 600}, nil, nil),
}

func TestEnvelopeGolden(t *testing.T) {
	dir := filepath.Join("testdata", "envelopes")
	if *update {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for name, env := range envelopeCases {
		t.Run(name, func(t *testing.T) {
			got := env.Marshal()
			if !json.Valid(got) {
				t.Errorf("Marshal() = %s, which is not valid JSON", got)
			}
			path := filepath.Join(dir, name+".json")
			if *update {
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test -update to write it)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("Marshal() =\n%s\nwant (%s)\n%s", got, path, want)
			}
		})
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if _, ok := envelopeCases[strings.TrimSuffix(filepath.Base(f), ".json")]; !ok {
			t.Errorf("%s has no case in envelopeCases; delete it or add one", f)
		}
	}
}

// TestMarshalOKAllocations: a success's envelope is one allocation, its
// own bytes, with upstream's JSON compacted into it (every enveloped
// answer makes one).
func TestMarshalOKAllocations(t *testing.T) {
	e := bucketing.Envelope{OK: true, Data: json.RawMessage(`{"results": [1, 2, 3], "query": "egfr"}`)}
	if n := testing.AllocsPerRun(100, func() { e.Marshal() }); n != 1 {
		t.Fatalf("Marshal of a success: %v allocations, want 1", n)
	}
}

func TestMarshalShape(t *testing.T) {
	tests := []struct {
		name string
		env  bucketing.Envelope
		want string
	}{
		{"zero envelope", bucketing.Envelope{}, `{"ok":false,"data":null,"error":null}`},
		{"data of a failure is dropped", bucketing.Envelope{Data: json.RawMessage(`1`),
			Error: &bucketing.Error{Code: bucketing.CodeUnknown}},
			`{"ok":false,"data":null,"error":{"code":"unknown","class":"","reason":"","detail":"","violations":[],"retryable":false,"retry_after_ms":null,"upstream":null}}`},
		{"error of a success is dropped", bucketing.Envelope{OK: true, Data: json.RawMessage(`1`),
			Error: &bucketing.Error{Code: bucketing.CodeUnknown}}, `{"ok":true,"data":1,"error":null}`},
		{"spaces only is null", bucketing.Envelope{OK: true, Data: json.RawMessage(" \n")}, `{"ok":true,"data":null,"error":null}`},
		{"no HTML escaping", bucketing.Envelope{OK: true, Data: json.RawMessage(`"<&>"`)}, `{"ok":true,"data":"<&>","error":null}`},
		{"text that is not JSON", bucketing.Envelope{OK: true, Data: json.RawMessage("a \"b\"\n")}, `{"ok":true,"data":"a \"b\"\n","error":null}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := string(tt.env.Marshal()); got != tt.want+"\n" {
				t.Errorf("Marshal() = %s, want %s", got, tt.want)
			}
		})
	}
}

func TestRefusal(t *testing.T) {
	tests := []struct {
		name  string
		code  bucketing.Code
		want  bucketing.Code
		class bucketing.Class
	}{
		{"validation", bucketing.CodeValidation, bucketing.CodeValidation, bucketing.ClassUser},
		{"policy", bucketing.CodePolicy, bucketing.CodePolicy, bucketing.ClassPolicy},
		{"rate limit is never retryable as a refusal", bucketing.CodeRateLimit, bucketing.CodeRateLimit, bucketing.ClassTransient},
		{"none becomes unknown", bucketing.CodeNone, bucketing.CodeUnknown, bucketing.ClassTerminal},
		{"ok becomes unknown", bucketing.CodeOK, bucketing.CodeUnknown, bucketing.ClassTerminal},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := bucketing.Refusal(tt.code, "r", "d", nil)
			if env.OK || env.Data != nil || env.Error == nil {
				t.Fatalf("Refusal = %+v, want a failure with an error and no data", env)
			}
			e := env.Error
			if e.Code != tt.want || e.Class != tt.class || e.Retryable || e.Upstream != nil || e.RetryAfterMS != nil {
				t.Errorf("Refusal error = %+v, want code %s, class %s, not retryable, no upstream", e, tt.want, tt.class)
			}
		})
	}
}

func TestResultEnvelopeCopiesRetryAfter(t *testing.T) {
	r := bucketing.Classify(bucketing.Outcome{Status: 429, Header: retryAfter("1")}, nil, now)
	env := r.Envelope(nil, nil)
	*env.Error.RetryAfterMS = 5
	if *r.RetryAfterMS != 1000 {
		t.Errorf("changing the envelope changed the result: RetryAfterMS = %d, want 1000", *r.RetryAfterMS)
	}
}

func TestEnvelopeRoundTrip(t *testing.T) {
	for _, name := range slices.Sorted(maps.Keys(envelopeCases)) {
		var back bucketing.Envelope
		if err := json.Unmarshal(envelopeCases[name].Marshal(), &back); err != nil {
			t.Errorf("%s: Unmarshal(Marshal()) = %v", name, err)
			continue
		}
		if back.OK != envelopeCases[name].OK || (back.Error == nil) != back.OK {
			t.Errorf("%s: decoded ok %v with error %v", name, back.OK, back.Error)
		}
	}
}
