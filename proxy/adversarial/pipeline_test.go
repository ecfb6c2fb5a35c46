package adversarial_test

import (
	"compress/gzip"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/toolgate/toolgate/bucketing"
)

// The pipeline group: the schema step is one step both protocols run, so
// what the MCP readers group shows of MCP arguments (a name in another
// case than a declared property is refused, even where the schema is
// open) holds for plain HTTP tools too. The upstream is a Go handler that
// decodes the body with encoding/json into tagged structs, which matches
// member names up to Unicode case folding ("TASK", "taſk" and "tas\u212a"
// all land in Task): it records what it executed, and the suite checks
// that every executed call's values pass toolgate's schema.

// foldSchema is toolgate's open schema (strict: false) for the tool: a
// short task and an options object whose mode is a or b. Other arguments
// pass, as an open schema allows.
const foldSchema = `{type: object, properties: {task: {type: string, maxLength: 5}, opts: {type: object, properties: {mode: {enum: [a, b]}}}}}`

// foldTask is what the Go upstream executes: tagged structs, as a Go
// service written the ordinary way decodes its arguments.
type foldTask struct {
	Task string `json:"task"`
	Opts struct {
		Mode string `json:"mode"`
	} `json:"opts"`
}

// passes reports whether toolgate's schema accepts what the upstream
// executed.
func (f foldTask) passes() bool {
	return utf8.RuneCountInString(f.Task) <= 5 && (f.Opts.Mode == "" || f.Opts.Mode == "a" || f.Opts.Mode == "b")
}

type foldUpstream struct {
	mu   sync.Mutex
	runs map[string][]foldTask // by the X-Row header
}

func (u *foldUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var f foldTask
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<16)).Decode(&f); err != nil {
		http.Error(w, "bad json", http.StatusBadRequest)
		return
	}
	u.mu.Lock()
	u.runs[r.Header.Get("X-Row")] = append(u.runs[r.Header.Get("X-Row")], f)
	u.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(`{"done":true}`))
}

func (u *foldUpstream) take(row string) []foldTask {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.runs[row]
}

// TestAdversarialCaseVariantsHTTP sends, through a real toolgate's reverse
// listener, JSON bodies whose argument names differ from the open schema's
// declared ones only by case (ASCII, the long s, the Kelvin sign, escaped,
// nested), each carrying a value the schema refuses. The Go upstream
// decodes every one of them into the declared field. None may execute;
// the controls must.
func TestAdversarialCaseVariantsHTTP(t *testing.T) {
	up := &foldUpstream{runs: map[string][]foldTask{}}
	srv := httptest.NewServer(up)
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://")
	g, err := startGate(t, "listen:\n  reverse:\n    - {listen: \"127.0.0.1:0\", upstream: \""+srv.URL+"\"}\n"+
		"tools:\n  - name: fold_task\n    match: {host: \""+strings.Split(host, ":")[0]+"\", method: POST, path: /task}\n    strict: false\n    schema: "+foldSchema+"\n")
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + g.srv.Addr("reverse", 0)
	rows := []struct {
		name    string
		body    string
		control bool
	}{
		{name: "control", body: `{"task":"ok"}`, control: true},
		{name: "control with another argument", body: `{"task":"ok","other":"anything goes"}`, control: true},
		{name: "control nested", body: `{"task":"ok","opts":{"mode":"a"}}`, control: true},
		{name: "Task", body: `{"Task":"far too long"}`},
		{name: "TASK", body: `{"TASK":"far too long"}`},
		{name: "taſk (long s)", body: `{"taſk":"far too long"}`},
		{name: "tasK (Kelvin sign)", body: "{\"tas\u212a\":\"far too long\"}"},
		{name: "escaped T", body: `{"\u0054ask":"far too long"}`},
		{name: "task and Task", body: `{"task":"ok","Task":"far too long"}`},
		{name: "nested Mode", body: `{"task":"ok","opts":{"Mode":"zzz"}}`},
		{name: "nested Opts", body: `{"task":"ok","Opts":{"mode":"zzz"}}`},
	}
	client := &http.Client{Timeout: 10 * time.Second}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodPost, base+"/task", strings.NewReader(row.body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("X-Row", row.name)
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			runs := up.take(row.name)
			for _, f := range runs {
				if !f.passes() {
					t.Errorf("the upstream executed %+v, which toolgate's schema refuses", f)
				}
			}
			if row.control {
				if len(runs) != 1 || resp.StatusCode != http.StatusOK {
					t.Errorf("control: status %d, %d executions; want 200 and one", resp.StatusCode, len(runs))
				}
				return
			}
			if len(runs) != 0 {
				t.Errorf("executed %d times; want the call refused before upstream", len(runs))
			}
			var env bucketing.Envelope
			if resp.StatusCode != http.StatusUnprocessableEntity || json.Unmarshal(body, &env) != nil || env.Error == nil {
				t.Fatalf("status %d, body %s; want a 422 envelope", resp.StatusCode, body)
			}
			if env.Error.Reason != "unknown_field" && env.Error.Reason != "duplicate_argument" {
				t.Errorf("reason %q; want unknown_field (or duplicate_argument for two names that fold together)", env.Error.Reason)
			}
			if strings.Contains(string(body), "far too long") || strings.Contains(string(body), "zzz") {
				t.Errorf("the refusal echoes the rejected value: %s", body)
			}
		})
	}
}

// answerGuardSchema is the answer schema of TestAdversarialAnswerSchema's
// tool: a status that is ok or pending, a count of at most 10. It is open,
// as answer schemas are applied as written.
const answerGuardSchema = `{type: object, properties: {status: {enum: [ok, pending]}, count: {type: integer, maximum: 10}}}`

// answerRead is what the caller, a Go client decoding the answer into
// tagged structs, reads.
type answerRead struct {
	Status string `json:"status"`
	Count  int    `json:"count"`
}

func (a answerRead) passes() bool {
	return (a.Status == "" || a.Status == "ok" || a.Status == "pending") && a.Count <= 10
}

// TestAdversarialAnswerSchema has a real Go upstream answer a tool whose
// answers are checked (answer.schema) with bodies crafted so that a
// caller's JSON reader could find in them what the schema refuses:
// members in another case, names given twice, data after the object, a
// byte order mark, an encoding the caller did not ask for, JSON under
// another media type. The caller is Go's http.Client through the reverse
// listener, decoding with encoding/json into tagged structs. The
// differential: every answer the caller got whole decodes to values the
// schema accepts, or the caller got the 502 refusal; the controls pass.
func TestAdversarialAnswerSchema(t *testing.T) {
	gz := func(s string) string {
		var b strings.Builder
		w := gzip.NewWriter(&b)
		io.WriteString(w, s)
		w.Close()
		return b.String()
	}
	rows := []struct {
		name, ctype, encoding, body string
		status                      int
		control                     bool
	}{
		{name: "control", body: `{"status":"ok","count":1}`, control: true},
		{name: "control with another member", body: `{"status":"pending","note":"anything"}`, control: true},
		{name: "schema refuses", body: `{"status":"hacked"}`},
		{name: "STATUS", body: `{"STATUS":"hacked"}`},
		{name: "ſtatus (long s)", body: `{"ſtatus":"hacked"}`},
		{name: "status and Status", body: `{"status":"ok","Status":"hacked"}`},
		{name: "status twice", body: `{"status":"ok","status":"hacked"}`},
		{name: "escaped name", body: `{"st\u0061tus":"hacked"}`},
		{name: "Count", body: `{"status":"ok","Count":99}`},
		{name: "data after the object", body: `{"status":"ok"}{"status":"hacked"}`},
		{name: "byte order mark", body: "\ufeff{\"status\":\"hacked\"}"},
		{name: "text/plain holding JSON", ctype: "text/plain", body: `{"status":"hacked"}`},
		{name: "gzip not asked for", encoding: "gzip", body: gz(`{"status":"hacked"}`)},
		{name: "201 Created", status: 201, body: `{"status":"hacked"}`},
		{name: "larger than max_bytes", body: `{"status":"hacked","pad":"` + strings.Repeat("x", 5000) + `"}`},
	}
	byName := map[string]int{}
	for i, r := range rows {
		byName[r.name] = i
	}
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		row := rows[byName[r.Header.Get("X-Row")]]
		ct := row.ctype
		if ct == "" {
			ct = "application/json"
		}
		w.Header().Set("Content-Type", ct)
		if row.encoding != "" {
			w.Header().Set("Content-Encoding", row.encoding)
		}
		status := row.status
		if status == 0 {
			status = http.StatusOK
		}
		w.WriteHeader(status)
		io.WriteString(w, row.body)
	}))
	t.Cleanup(up.Close)
	g, err := startGate(t, "listen:\n  reverse:\n    - {listen: \"127.0.0.1:0\", upstream: \""+up.URL+"\"}\n"+
		"tools:\n  - name: guarded_answer\n    match: {host: 127.0.0.1, method: GET, path: /status}\n    answer:\n      max_bytes: 4096\n      schema: "+answerGuardSchema+"\n")
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Timeout: 10 * time.Second}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodGet, "http://"+g.srv.Addr("reverse", 0)+"/status", nil)
			req.Header.Set("X-Row", row.name)
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode/100 == 2 {
				var a answerRead
				if json.Unmarshal(body, &a) == nil && !a.passes() {
					t.Errorf("the caller read %+v from a %d answer, which the answer schema refuses", a, resp.StatusCode)
				}
				if !row.control && json.Unmarshal(body, &a) == nil {
					t.Errorf("status %d: the caller got an answer it can read; want the 502 refusal", resp.StatusCode)
				}
				return
			}
			if row.control {
				t.Fatalf("control: status %d, body %s; want 200", resp.StatusCode, body)
			}
			var env bucketing.Envelope
			if resp.StatusCode != http.StatusBadGateway || json.Unmarshal(body, &env) != nil || env.Error == nil ||
				(env.Error.Reason != "answer_schema" && env.Error.Reason != "answer_unreadable") {
				t.Fatalf("status %d, body %s; want a 502 answer_schema or answer_unreadable envelope", resp.StatusCode, body)
			}
			if strings.Contains(string(body), "hacked") {
				t.Errorf("the refusal echoes the answer: %s", body)
			}
		})
	}
}
