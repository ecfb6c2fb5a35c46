package proxy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/bucketing"
	"github.com/toolgate/toolgate/policies"
	"github.com/toolgate/toolgate/policies/rego"
	"github.com/toolgate/toolgate/proxy"
	"github.com/toolgate/toolgate/sink"
	"github.com/toolgate/toolgate/wasm"
)

// answerBrokenSrc fails on an answer whose owner and name differ: its
// rule owner is complete and would have two values, an evaluation error
// on every engine.
const answerBrokenSrc = `package answers.broken

owner := input.answer.body.owner

owner := input.answer.body.name

withhold contains "never" if owner == "nobody"
`

// answerPolicyConfig has one tool per way the answer policies are bound.
const answerPolicyConfig = `
listen:
  reverse:
    - {listen: "127.0.0.1:0", upstream: "UPSTREAM"}
tools:
  - name: records
    match: {host: 127.0.0.1, method: GET, path: /records}
    answer: {policies: [guard]}
  - name: dryrun
    match: {host: 127.0.0.1, method: GET, path: /dryrun}
    policy_mode: dry_run
    answer: {policies: [guard]}
  - name: broken
    match: {host: 127.0.0.1, method: GET, path: /broken}
    answer: {policies: [broken]}
  - name: broken_open
    match: {host: 127.0.0.1, method: GET, path: /broken_open}
    fail_open: true
    answer: {policies: [broken]}
`

// Answers of the policy upstream, by ?a=.
const (
	answerSSN     = "078-05-1120"
	answerEmail   = "ada@example.org"
	answerCard    = "4111 1111 1111 1111"
	answerRecord  = `{"owner":"ada","name":"Ada","email":"` + answerEmail + `","items":[{"sku":"A1","card":"` + answerCard + `"},{"sku":"B2"}]}`
	answerWithSSN = `{"owner":"ada","name":"Ada","ssn":"` + answerSSN + `"}`
)

// policyUpstream answers ?a= on every path (cannedUpstream).
func policyUpstream(t *testing.T) *httptest.Server {
	j := "application/json"
	return cannedUpstream(t, map[string]cannedAnswer{
		"record":      {ctype: j, body: answerRecord},
		"ssn":         {ctype: j, body: answerWithSSN},
		"text":        {ctype: "text/plain", body: "Ada's record is fine"},
		"ssn-upper":   {ctype: j, body: `{"SSN":"` + answerSSN + `"}`},
		"email-upper": {ctype: j, body: `{"name":"Ada","EMAIL":"` + answerEmail + `"}`},
		"clean":       {ctype: j, body: `{"name":"Ada"}`},
	})
}

// answerEngines compiles a Rego answer policy (files: name to source) for
// each engine toolgate runs Rego on: OPA's interpreter, the compiled
// engine, and WASM (OPA's compiler, run in wazero).
func answerEngines(t *testing.T, name string, files map[string][]byte) map[string]policies.Evaluator {
	t.Helper()
	interp, err := rego.Compile(name, files)
	if err != nil {
		t.Fatal(err)
	}
	compiled, err := interp.Compiled(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	engine, err := wasm.NewEngine(context.Background(), wasm.EngineOptions{CacheDir: "off"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { engine.Close(context.Background()) })
	w, err := wasm.Host{Engine: engine}.CompileRego(context.Background(), name, files, policies.WasmOptions{Deadline: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return map[string]policies.Evaluator{policies.EngineInterpreter: interp, policies.EngineCompiled: compiled, policies.EngineWasm: w}
}

// startAnswerGate starts toolgate from cfgYAML with answer checkers.
func startAnswerGate(t *testing.T, cfgYAML, upstream string, answers map[string]proxy.AnswerChecker) *gate {
	t.Helper()
	cfgYAML = strings.ReplaceAll(cfgYAML, "UPSTREAM", upstream)
	srv, q, events := serveConfig(t, cfgYAML, t.TempDir(), proxy.Snapshot{Version: "v", PolicyVersion: "p", AnswerCheckers: answers}, nil, 10*time.Millisecond)
	return &gate{srv: srv, queue: q, events: events, reverse: "http://" + srv.Addr("reverse", 0)}
}

// answerSet binds policies to a tool's answers, as cmd's AnswerSetFor does.
func answerSet(tool, mode string, failOpen bool, pols ...policies.Evaluator) *policies.Set {
	var b []policies.Bound
	for _, p := range pols {
		b = append(b, policies.Bound{Policy: p, Mode: mode})
	}
	return policies.NewSet(tool, b, 10*time.Second, failOpen)
}

// answerGot is what a caller received, and the call's event.
type answerGot struct {
	status int
	header http.Header
	body   []byte
	env    *bucketing.Envelope
	ev     sink.Event
}

// callAnswer makes one call through the gate as a legacy caller does, and
// finds its event.
func callAnswer(t *testing.T, g *gate, path string, n int) answerGot {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, g.reverse+path, nil)
	trace := fmt.Sprintf("00-%032x-0000000000000001-01", n)
	req.Header.Set("Traceparent", trace)
	resp, err := (&http.Client{Timeout: 20 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	got := answerGot{status: resp.StatusCode, header: resp.Header, body: body}
	var env bucketing.Envelope
	if json.Unmarshal(body, &env) == nil && env.Error != nil {
		got.env = &env
	}
	for _, e := range g.eventsWhere(t, func(e sink.Event) bool { return e.TraceID == trace[3:35] }) {
		if e.TraceID == trace[3:35] {
			got.ev = e
		}
	}
	return got
}

// TestAnswerPolicy sends calls through a real toolgate to a real Go
// upstream and checks, on the caller's side, what Rego answer policies on
// each engine did: an answer holding a social security number withheld
// (the number never reaches the caller, the envelope names the policy and
// its message), e-mail and card numbers redacted by pointer (the values
// gone, the rest intact), a policy reading the call's arguments with the
// answer, dry run (the answer unchanged, the event saying what enforcing
// would do), and a policy that fails closed, or open where the tool says.
func TestAnswerPolicy(t *testing.T) {
	up := policyUpstream(t)
	n := 0x4200
	// The guard is docs/answers.md's example policy.
	files, err := rego.Read(filepath.Join("..", "examples", "policies", "record_guard"))
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(filepath.Join("..", "docs", "answers.md"))
	if err != nil {
		t.Fatal(err)
	}
	guardFile := filepath.Join("..", "examples", "policies", "record_guard", "record_guard.rego")
	src := string(files[guardFile])
	if !strings.Contains(src, "package ") {
		t.Fatalf("%s not read: %v", guardFile, slices.Collect(maps.Keys(files)))
	}
	if !strings.Contains(string(doc), "```rego\n"+src[strings.Index(src, "package "):]+"```") {
		t.Error("docs/answers.md's Rego example is not examples/policies/record_guard/record_guard.rego (from its package line)")
	}
	for engine, guard := range answerEngines(t, "guard", files) {
		t.Run(engine, func(t *testing.T) {
			broken := answerEngines(t, "broken", map[string][]byte{"broken.rego": []byte(answerBrokenSrc)})[engine]
			g := startAnswerGate(t, answerPolicyConfig, up.URL, map[string]proxy.AnswerChecker{
				"records":     answerSet("records", policies.ModeEnforce, false, guard),
				"dryrun":      answerSet("dryrun", policies.ModeDryRun, false, guard),
				"broken":      answerSet("broken", policies.ModeEnforce, false, broken),
				"broken_open": answerSet("broken_open", policies.ModeEnforce, true, broken),
			})
			tests := []struct {
				name, path   string
				wantStatus   int
				wantReason   string   // the refusal's reason; "" when the answer goes on
				wantDetail   string   // in the refusal's detail
				wantGone     []string // what the caller must not receive
				wantKept     []string // what the caller must still receive
				wantVerdict  string
				wantFindings []string
				wantRedacted int64
				wantPolErr   string
			}{
				{name: "an answer with a social security number withheld", path: "/records?a=ssn", wantStatus: 502,
					wantReason: "answer_withheld", wantDetail: "policy 'guard' withholds: the answer holds a social security number",
					wantGone: []string{answerSSN, "Ada"}, wantVerdict: sink.AnswerWithheld, wantFindings: []string{"policy:guard"}},
				{name: "e-mail and card redacted by pointer", path: "/records?a=record", wantStatus: 200,
					wantGone: []string{answerEmail, answerCard}, wantKept: []string{`"name":"Ada"`, `"sku":"A1"`, `{"sku":"B2"}`},
					wantVerdict: sink.AnswerRedacted, wantFindings: []string{"policy:guard"}, wantRedacted: 2},
				{name: "a text answer the policy finds nothing in passes", path: "/records?a=text", wantStatus: 200,
					wantKept: []string{"Ada's record is fine"}, wantVerdict: sink.AnswerPassed},
				{name: "docs/answers.md's example: the owner asked for gets the record, redacted", path: "/records?a=record&owner=ada", wantStatus: 200,
					wantGone:    []string{answerEmail, answerCard},
					wantKept:    []string{`{"email":"[redacted:policy:guard]","items":[{"card":"[redacted:policy:guard]","sku":"A1"},{"sku":"B2"}],"name":"Ada","owner":"ada"}`},
					wantVerdict: sink.AnswerRedacted, wantFindings: []string{"policy:guard"}, wantRedacted: 2},
				{name: "a record of another owner than the one asked for withheld", path: "/records?a=record&owner=bob", wantStatus: 502,
					wantReason: "answer_withheld", wantDetail: "policy 'guard' withholds: the answer is about another owner", wantGone: []string{answerEmail, "Ada"},
					wantVerdict: sink.AnswerWithheld, wantFindings: []string{"policy:guard"}},
				{name: "dry run passes what it would withhold", path: "/dryrun?a=ssn", wantStatus: 200,
					wantKept: []string{answerSSN}, wantVerdict: sink.AnswerWouldWithhold, wantFindings: []string{"policy:guard"}},
				{name: "dry run passes what it would redact", path: "/dryrun?a=record", wantStatus: 200,
					wantKept: []string{answerEmail, answerCard}, wantVerdict: sink.AnswerWouldRedact, wantFindings: []string{"policy:guard"}},
				{name: "a failing policy withholds", path: "/broken?a=record", wantStatus: 502, wantReason: "policy_error",
					wantDetail: "policy 'broken' failed", wantGone: []string{answerEmail, answerCard},
					wantVerdict: sink.AnswerWithheld, wantFindings: []string{"policy:broken"}},
				{name: "a failing policy of a fail_open tool passes", path: "/broken_open?a=record", wantStatus: 200,
					wantKept: []string{answerEmail}, wantVerdict: sink.AnswerPassed, wantPolErr: "broken: policy_error"},
			}
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					n++
					got := callAnswer(t, g, tt.path, n)
					if got.status != tt.wantStatus {
						t.Fatalf("status %d, body %.300s; want %d", got.status, got.body, tt.wantStatus)
					}
					for _, s := range tt.wantGone {
						if strings.Contains(string(got.body), s) {
							t.Errorf("the caller received %q: %s", s, got.body)
						}
					}
					for _, s := range tt.wantKept {
						if !strings.Contains(string(got.body), s) {
							t.Errorf("the caller did not receive %q: %s", s, got.body)
						}
					}
					if tt.wantReason != "" {
						if got.env == nil {
							t.Fatalf("body %s; want a refusal envelope", got.body)
						}
						if got.env.Error.Code != bucketing.CodePolicy || got.env.Error.Reason != tt.wantReason || got.header.Get(proxy.HeaderErrorCode) != "policy" {
							t.Errorf("code %s reason %s header %q; want policy, %s", got.env.Error.Code, got.env.Error.Reason, got.header.Get(proxy.HeaderErrorCode), tt.wantReason)
						}
						if !strings.Contains(got.env.Error.Detail, tt.wantDetail) {
							t.Errorf("detail %q; want it to hold %q", got.env.Error.Detail, tt.wantDetail)
						}
					}
					if tt.wantVerdict == sink.AnswerRedacted {
						var rec struct {
							Owner, Name, Email string
							Items              []map[string]string
						}
						if err := json.Unmarshal(got.body, &rec); err != nil {
							t.Fatalf("the redacted answer is not JSON (%v): %s", err, got.body)
						}
						if rec.Email != "[redacted:policy:guard]" || len(rec.Items) != 2 || rec.Items[0]["card"] != "[redacted:policy:guard]" ||
							rec.Owner != "ada" || rec.Name != "Ada" || rec.Items[0]["sku"] != "A1" || len(rec.Items[1]) != 1 {
							t.Errorf("redacted answer %s; want email and items[0].card replaced, the rest intact", got.body)
						}
						if cl := got.header.Get("Content-Length"); cl != "" && cl != fmt.Sprint(len(got.body)) {
							t.Errorf("Content-Length %s for a %d-byte body", cl, len(got.body))
						}
					}
					ev := got.ev
					if ev.Answer != tt.wantVerdict {
						t.Errorf("event answer %q; want %q", ev.Answer, tt.wantVerdict)
					}
					if tt.wantFindings != nil && !slices.Equal(ev.AnswerFindings, tt.wantFindings) {
						t.Errorf("event answer_findings %v; want %v", ev.AnswerFindings, tt.wantFindings)
					}
					if ev.Redactions != tt.wantRedacted {
						t.Errorf("event redactions %d; want %d", ev.Redactions, tt.wantRedacted)
					}
					if !strings.Contains(ev.PolicyError, tt.wantPolErr) || (tt.wantPolErr == "" && ev.PolicyError != "") {
						t.Errorf("event policy_error %q; want %q", ev.PolicyError, tt.wantPolErr)
					}
					line, _ := json.Marshal(ev)
					for _, s := range []string{answerSSN, answerEmail, answerCard} {
						if strings.Contains(string(line), s) {
							t.Errorf("the event holds %q: %s", s, line)
						}
					}
				})
			}
		})
	}
}

// TestAnswerPolicyWasmModule runs a toolgate-ABI module (WAT, built by
// make wasm-fixtures) as an answer policy: its decision's withhold and
// redact take effect as a Rego policy's do, and it sees the body's member
// names folded to lower case.
func TestAnswerPolicyWasmModule(t *testing.T) {
	up := policyUpstream(t)
	engine, err := wasm.NewEngine(context.Background(), wasm.EngineOptions{CacheDir: "off"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { engine.Close(context.Background()) })
	mod, err := wasm.Host{Engine: engine}.LoadWasm(context.Background(), "abi", filepath.Join("..", "wasm", "testdata", "answer_guard.wasm"), policies.WasmOptions{Deadline: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	g := startAnswerGate(t, answerPolicyConfig, up.URL, map[string]proxy.AnswerChecker{"records": answerSet("records", policies.ModeEnforce, false, mod)})
	for i, tt := range []struct {
		name, path string
		wantStatus int
		wantBody   string
	}{
		{"ssn withheld", "/records?a=ssn", 502, ""},
		{"SSN withheld", "/records?a=ssn-upper", 502, ""},
		{"EMAIL redacted", "/records?a=email-upper", 200, `{"EMAIL":"[redacted:policy:abi]","name":"Ada"}`},
		{"clean passes", "/records?a=clean", 200, `{"name":"Ada"}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := callAnswer(t, g, tt.path, 0x4300+i)
			if got.status != tt.wantStatus {
				t.Fatalf("status %d, body %s; want %d", got.status, got.body, tt.wantStatus)
			}
			if strings.Contains(string(got.body), answerSSN) || strings.Contains(string(got.body), answerEmail) {
				t.Errorf("the caller received the value: %s", got.body)
			}
			if tt.wantStatus == 502 && (got.env == nil || got.env.Error.Reason != "answer_withheld" || !strings.Contains(got.env.Error.Detail, "policy 'abi' withholds")) {
				t.Errorf("body %s; want an answer_withheld envelope naming policy 'abi'", got.body)
			}
			if tt.wantBody != "" && string(got.body) != tt.wantBody {
				t.Errorf("body %s; want %s", got.body, tt.wantBody)
			}
		})
	}
}
