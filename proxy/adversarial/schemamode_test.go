package adversarial_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// recordingUpstream is a real Go upstream that keeps every body its
// handler received, by trace id: what reached it is what it executed.
type recordingUpstream struct {
	srv *httptest.Server
	mu  sync.Mutex
	got map[string][]string // trace id -> bodies received
	gq  map[string][]string // trace id -> query, a newline, the body
}

func newRecordingUpstream(t *testing.T) *recordingUpstream {
	t.Helper()
	u := &recordingUpstream{got: map[string][]string{}, gq: map[string][]string{}}
	u.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		u.mu.Lock()
		tr := traceOf(r.Header.Get("Traceparent"))
		u.got[tr] = append(u.got[tr], string(b))
		u.gq[tr] = append(u.gq[tr], r.URL.RawQuery+"\n"+string(b))
		u.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"ok":1}`)
	}))
	t.Cleanup(u.srv.Close)
	return u
}

func (u *recordingUpstream) authority() string { return strings.TrimPrefix(u.srv.URL, "http://") }

func (u *recordingUpstream) received(trace string) []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.got[trace]...)
}

// receivedWithQuery is what the calls of a trace brought: each one's query
// string, a newline, and its body.
func (u *recordingUpstream) receivedWithQuery(trace string) []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.gq[trace]...)
}

// modeSchema is the schema both tools of TestAdversarialSchemaMode carry.
const modeSchema = `{type: object, additionalProperties: false, required: [term], properties: {term: {type: string, maxLength: 16}, retmax: {type: integer, maximum: 10}}}`

// modeCall is one call of TestAdversarialSchemaMode and how many
// violations toolgate's schema finds in it.
type modeCall struct {
	name       string
	body       string
	violations int
}

var modeCalls = []modeCall{
	{name: "valid", body: `{"term":"brca1","retmax":5}`},
	{name: "unknown-field", body: `{"term":"brca1","retmxa":5}`, violations: 1},
	{name: "wrong-type", body: `{"term":"brca1","retmax":"5"}`, violations: 1},
	{name: "missing-required", body: `{"retmax":5}`, violations: 1},
	{name: "over-maximum", body: `{"term":"brca1","retmax":500}`, violations: 1},
	{name: "three-violations", body: `{"term":7,"retmax":"x","evil":true}`, violations: 3},
	{name: "case-folded-name", body: `{"Term":"brca1"}`, violations: 2},
}

// TestAdversarialSchemaMode checks schema_mode: a tool whose schema is in
// dry_run never refuses a call its schema would refuse (the real upstream
// receives the body unchanged) and records each violation in the event
// (dry_run_denied, one "schema: " line per violation); the same schema in
// enforce (the default) refuses every such call before the upstream.
// Both judged by what the upstream's handler received.
func TestAdversarialSchemaMode(t *testing.T) {
	up := newRecordingUpstream(t)
	cfg := fmt.Sprintf("listen:\n  forward: 127.0.0.1:0\ntools:\n"+
		"  - {name: dry, match: {host: %q, method: POST, path: /dry}, schema: %s, schema_mode: dry_run}\n"+
		"  - {name: enforced, match: {host: %q, method: POST, path: /enforced}, schema: %s}\n",
		up.authority(), modeSchema, up.authority(), modeSchema)
	g, err := startGate(t, cfg)
	if err != nil {
		t.Fatal(err)
	}
	fwd := g.srv.Addr("forward", 0)
	for _, c := range modeCalls {
		t.Run(c.name, func(t *testing.T) {
			for _, tool := range []string{"dry", "enforced"} {
				trace, tp := newTrace()
				status := goDo(t, fwd, nil, http.MethodPost, "http://"+up.authority()+"/"+tool, tp, c.body)
				got := up.received(trace)
				g.read(t)
				evs := g.byTrace(trace)
				if len(evs) != 1 {
					t.Fatalf("%s: %d events, want 1", tool, len(evs))
				}
				ev := evs[0]
				switch {
				case tool == "dry" || c.violations == 0:
					if len(got) != 1 || got[0] != c.body {
						t.Errorf("%s: upstream received %q (status %d), want the body unchanged once", tool, got, status)
					}
					if ev.Refused {
						t.Errorf("%s: event refused", tool)
					}
				default:
					if len(got) != 0 {
						t.Errorf("%s: upstream received %q; an enforced schema must refuse it first", tool, got)
					}
					if !ev.Refused || status != http.StatusUnprocessableEntity {
						t.Errorf("%s: status %d refused=%v, want a 422 refusal", tool, status, ev.Refused)
					}
				}
				wantDry := tool == "dry" && c.violations > 0
				if ev.DryRunDenied != wantDry {
					t.Errorf("%s: dry_run_denied %v, want %v", tool, ev.DryRunDenied, wantDry)
				}
				if !wantDry {
					if len(ev.DryRunViolations) != 0 {
						t.Errorf("%s: dry_run_violations %q, want none", tool, ev.DryRunViolations)
					}
					continue
				}
				if len(ev.DryRunViolations) != c.violations {
					t.Errorf("%s: dry_run_violations %q, want %d lines", tool, ev.DryRunViolations, c.violations)
				}
				for _, l := range ev.DryRunViolations {
					if !strings.HasPrefix(l, "schema: ") {
						t.Errorf("%s: dry-run line %q lacks the \"schema: \" prefix", tool, l)
					}
					if strings.Contains(l, "brca1") {
						t.Errorf("%s: dry-run line %q holds an argument value", tool, l)
					}
				}
			}
		})
	}
}

// TestAdversarialSchemaModeConfig checks that schema_mode takes only its
// two modes, naming the field, and is refused on an mcp route (whose
// schemas take mcp.dry_run).
func TestAdversarialSchemaModeConfig(t *testing.T) {
	for _, tc := range []struct{ name, tool, want string }{
		{"unknown-mode", `{name: a, match: {path: /a}, schema: {type: object}, schema_mode: off}`, `tools[0].schema_mode: unknown mode "off"; expected enforce or dry_run`},
		{"mcp-route", `{name: a, match: {path: /mcp}, protocol: mcp, schema_mode: dry_run}`, "tools[0].schema_mode: an mcp route's schemas are dry-run with mcp.dry_run"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := startGate(t, "tools:\n  - "+tc.tool+"\n")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want it to contain %q", err, tc.want)
			}
		})
	}
}
