package proxy_test

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/toolgate/toolgate/bucketing"
	"github.com/toolgate/toolgate/proxy"
	"github.com/toolgate/toolgate/sink"
)

// answerSchemaConfig has one tool whose answers are checked: a result
// with a list of hits, each an id and a score between 0 and 1, and
// nothing else at the top; and one tool on the same upstream without
// answer checks.
const answerSchemaConfig = `
listen:
  reverse:
    - {listen: "127.0.0.1:0", upstream: "UPSTREAM"}
tools:
  - name: search
    match: {host: 127.0.0.1, method: GET, path: /search}
    answer:
      max_bytes: 4096
      schema:
        type: object
        additionalProperties: false
        required: [hits]
        properties:
          hits:
            type: array
            items:
              type: object
              required: [id, score]
              properties:
                id: {type: string}
                score: {type: number, minimum: 0, maximum: 1}
  - name: plain
    match: {host: 127.0.0.1, method: GET, path: /plain}
`

// cannedAnswer is one answer a cannedUpstream gives.
type cannedAnswer struct {
	ctype, encoding, body string
	status                int // 200 when 0
}

// cannedUpstream answers what its query asks: ?a=NAME picks one of
// answers (418 for a name it lacks).
func cannedUpstream(t *testing.T, answers map[string]cannedAnswer) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a, ok := answers[r.URL.Query().Get("a")]
		if !ok {
			http.Error(w, "no such answer", http.StatusTeapot)
			return
		}
		w.Header().Set("Content-Type", a.ctype)
		if a.encoding != "" {
			w.Header().Set("Content-Encoding", a.encoding)
		}
		w.WriteHeader(cmp.Or(a.status, http.StatusOK))
		io.WriteString(w, a.body)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// getTraced GETs u with the trace context trace (and the envelope when
// asked) and returns the answer with its body read.
func getTraced(t *testing.T, client *http.Client, u string, envelope bool, trace string) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, u, nil)
	if envelope {
		req.Header.Set(proxy.HeaderEnvelope, "1")
	}
	req.Header.Set("Traceparent", trace)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, body
}

// answerUpstream gives the answer schema's cases (the secret value stands
// for content a refusal must never echo).
func answerUpstream(t *testing.T) *httptest.Server {
	return cannedUpstream(t, map[string]cannedAnswer{
		"good":      {ctype: "application/json", body: `{"hits":[{"id":"P1","score":0.5}]}`},
		"bad-score": {ctype: "application/json", body: `{"hits":[{"id":"P1","score":"secret-value-7"}]}`},
		"extra":     {ctype: "application/json", body: `{"hits":[],"secret-value-7":true}`},
		"duplicate": {ctype: "application/json", body: `{"hits":[],"hits":[{"id":"secret-value-7"}]}`},
		"text":      {ctype: "text/plain", body: `secret-value-7`},
		"array":     {ctype: "application/json", body: `[{"id":"secret-value-7"}]`},
		"huge":      {ctype: "application/json", body: `{"hits":[{"id":"` + strings.Repeat("x", 8192) + `","score":0}]}`},
		"not-found": {ctype: "application/json", body: `{"error":"secret-value-7 not found"}`, status: 404},
	})
}

// TestAnswerSchema sends calls through a real toolgate to a real Go
// upstream whose answers the tool's answer schema accepts or refuses, and
// checks what the caller gets (the answer byte for byte, or a 502 envelope
// that never holds the answer's content) and what the event says.
func TestAnswerSchema(t *testing.T) {
	up := answerUpstream(t)
	g := startGate(t, answerSchemaConfig, up.URL, nil)
	client := &http.Client{Timeout: 10 * time.Second}
	tests := []struct {
		name, path string
		envelope   bool
		wantStatus int
		wantReason string // "" when the answer passes
		wantPath   string // a violation path the refusal names
	}{
		{name: "valid answer passes raw", path: "/search?a=good", wantStatus: 200},
		{name: "valid answer enveloped", path: "/search?a=good", envelope: true, wantStatus: 200},
		{name: "wrong type", path: "/search?a=bad-score", wantStatus: 502, wantReason: "answer_schema", wantPath: "/hits/0/score"},
		{name: "undeclared member", path: "/search?a=extra", wantStatus: 502, wantReason: "answer_schema", wantPath: "/*"},
		{name: "duplicate names", path: "/search?a=duplicate", wantStatus: 502, wantReason: "answer_unreadable"},
		{name: "not JSON", path: "/search?a=text", wantStatus: 502, wantReason: "answer_unreadable"},
		{name: "not an object", path: "/search?a=array", wantStatus: 502, wantReason: "answer_unreadable"},
		{name: "larger than max_bytes", path: "/search?a=huge", wantStatus: 502, wantReason: "answer_unreadable"},
		{name: "error answer passes unchecked", path: "/search?a=not-found", wantStatus: 404},
		{name: "tool without answer checks", path: "/plain?a=bad-score", wantStatus: 200},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			trace := fmt.Sprintf("00-%032x-0000000000000001-01", 0xa0+i)
			resp, body := getTraced(t, client, g.reverse+tt.path, tt.envelope, trace)
			if resp.StatusCode != tt.wantStatus {
				t.Fatalf("status %d, body %s; want %d", resp.StatusCode, body, tt.wantStatus)
			}
			if tt.wantReason == "" {
				if strings.Contains(tt.path, "a=good") && !tt.envelope && string(body) != `{"hits":[{"id":"P1","score":0.5}]}` {
					t.Errorf("body %s; want upstream's answer byte for byte", body)
				}
				if tt.envelope {
					var env bucketing.Envelope
					if json.Unmarshal(body, &env) != nil || !env.OK {
						t.Errorf("body %s; want an ok envelope", body)
					}
				}
				return
			}
			var env bucketing.Envelope
			if err := json.Unmarshal(body, &env); err != nil || env.Error == nil {
				t.Fatalf("body %s; want an envelope", body)
			}
			if env.Error.Code != bucketing.CodeUpstream || env.Error.Reason != tt.wantReason || resp.Header.Get(proxy.HeaderErrorCode) != "upstream" {
				t.Errorf("code %s, reason %s, header %q; want upstream/%s", env.Error.Code, env.Error.Reason, resp.Header.Get(proxy.HeaderErrorCode), tt.wantReason)
			}
			if strings.Contains(string(body), "secret-value-7") || strings.Contains(string(body), "xxxx") {
				t.Errorf("the refusal echoes the answer: %s", body)
			}
			if tt.wantPath != "" {
				found := false
				for _, v := range env.Error.Violations {
					found = found || v.Path == tt.wantPath
				}
				if !found {
					t.Errorf("violations %+v; want one at %s", env.Error.Violations, tt.wantPath)
				}
			}
			evs := g.eventsWhere(t, func(e sink.Event) bool { return e.Reason == tt.wantReason && e.TraceID == trace[3:35] })
			for _, e := range evs {
				if e.TraceID != trace[3:35] {
					continue
				}
				if e.Refused || e.OK || e.Tool != "search" || e.UpstreamStatus != 200 || e.ErrorCode != "upstream" {
					t.Errorf("event %+v; want tool search, not refused (upstream was called), upstream status 200, error upstream", e)
				}
				if strings.Contains(e.Detail, "secret-value-7") {
					t.Errorf("the event's detail echoes the answer: %s", e.Detail)
				}
			}
		})
	}
}

// TestAnswerConfigErrors checks that a broken answer section fails the
// load with the field named.
func TestAnswerConfigErrors(t *testing.T) {
	tests := []struct{ name, tool, want string }{
		{"max_bytes alone", "match: {path: /x}\n    answer: {max_bytes: 10}", "tools[0].answer.max_bytes"},
		{"negative max_bytes", "match: {path: /x}\n    answer: {max_bytes: -1, schema: {type: object}}", "tools[0].answer.max_bytes"},
		{"bad schema", "match: {path: /x}\n    answer: {schema: {type: objekt}}", "tools[0].answer.schema"},
		{"both schema and file", "match: {path: /x}\n    answer: {schema: {type: object}, schema_file: a.json}", "tools[0].answer.schema_file"},
		{"on an mcp route", "protocol: mcp\n    match: {path: /mcp}\n    answer: {schema: {type: object}}", "tools[0].answer"},
		{"unknown detector", "match: {path: /x}\n    answer: {detect: [secretz]}", "tools[0].answer"},
		{"unknown on_finding", "match: {path: /x}\n    answer: {detect: [secrets], on_finding: drop}", "tools[0].answer.on_finding"},
		{"unknown mode", "match: {path: /x}\n    answer: {detect: [secrets], mode: audit}", "tools[0].answer.mode"},
		{"unknown unreadable", "match: {path: /x}\n    answer: {detect: [secrets], unreadable: skip}", "tools[0].answer.unreadable"},
		{"on_finding without detect", "match: {path: /x}\n    answer: {on_finding: redact}", "tools[0].answer.on_finding"},
		{"threshold out of range", "match: {path: /x}\n    answer: {detect: [instructions], instruction_threshold: 1000}", "instruction_threshold"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var cfg proxy.Config
			dec := yaml.NewDecoder(strings.NewReader("tools:\n  - name: x\n    " + tt.tool + "\n"))
			dec.KnownFields(true)
			err := dec.Decode(&cfg)
			if err == nil {
				err = cfg.Validate(t.TempDir())
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v; want one naming %s", err, tt.want)
			}
		})
	}
}
