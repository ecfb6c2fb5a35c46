package adversarial_test

import (
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
