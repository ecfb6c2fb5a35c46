package adversarial_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/testutil"
	"github.com/toolgate/toolgate/policies"
	"github.com/toolgate/toolgate/policies/rego"
	"github.com/toolgate/toolgate/proxy"
)

// shapesGatePolicy is made of the rule shapes the compiled engine decides
// in its first pass, without the plan (policies/rego/shapes.go): a bound,
// an allow-list, a PII pattern, a count, an equality, a prefix, a tool-gated rule
// whose message is built with sprintf, and a header set from an argument.
const shapesGatePolicy = `package ruleshapes
import rego.v1
organisms := {"human", "mouse", "rat"}
deny contains {"msg": "limit must be at most 50", "path": "/limit"} if input.arguments.limit > 50
deny contains {"msg": "organism not allowed", "path": "/organism"} if not input.arguments.organism in organisms
deny contains "e-mail" if regex.match(` + "`[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\\.[A-Za-z]{2,}`" + `, input.arguments.query)
deny contains "too many ids" if count(input.arguments.ids) > 20
deny contains "drop" if input.arguments.mode == "drop"
deny contains "etc" if startswith(input.arguments.path, "/etc/")
deny contains sprintf("%s may not edit %v", [input.tool, input.arguments.doc]) if {
	input.tool == "docs_edit"
	input.arguments.doc > "m"
}
inject["X-Mode"] := input.arguments.mode
`

// shapesGateCalls give the rules' operands the values a type-confused or
// hostile agent sends: numbers past the bound in other spellings, numeric
// strings (which Rego orders after every number), arrays and objects
// where a scalar is compared or looked up, strings counted in runes, an
// e-mail address behind JSON escapes, values a builtin refuses (its error
// is the evaluation's), a header value with a line break.
var shapesGateCalls = []string{
	`{"query": "EGFR", "organism": "human", "limit": 20, "ids": ["a", "b"], "mode": "fast"}`,
	`{"organism": "human", "limit": 51}`,
	`{"organism": "human", "limit": 5.1e1}`,
	`{"organism": "human", "limit": 50.00000000000000000001}`,
	`{"organism": "human", "limit": 50.0}`,
	`{"organism": "human", "limit": 1e400}`,
	`{"organism": "human", "limit": "9"}`,
	`{"organism": "human", "limit": [99]}`,
	`{"organism": "human", "limit": {"n": 99}}`,
	`{"organism": "human", "limit": null}`,
	`{"organism": "human", "limit": true}`,
	`{"organism": "Human"}`,
	`{"organism": ["human"]}`,
	`{"organism": {"o": "human"}}`,
	`{"organism": null}`,
	`{"limit": 1}`,
	`{"organism": "hum\u0061n"}`,
	`{"organism": "human", "query": "dana\u0040example.org"}`,
	`{"organism": "human", "query": ["dana@example.org"]}`,
	`{"organism": "human", "query": 7}`,
	`{"organism": "human", "ids": "abcdefghijklmnopqrstu"}`,
	`{"organism": "human", "ids": "ééééééééééééééééééééé"}`,
	`{"organism": "human", "ids": "éééééééééééééééééééé"}`,
	`{"organism": "human", "ids": {"1":1,"2":2,"3":3,"4":4,"5":5,"6":6,"7":7,"8":8,"9":9,"10":10,"11":11,"12":12,"13":13,"14":14,"15":15,"16":16,"17":17,"18":18,"19":19,"20":20,"21":21}}`,
	`{"organism": "human", "ids": 21}`,
	`{"organism": "human", "mode": "drop"}`,
	`{"organism": "human", "mode": "dro\u0070"}`,
	`{"organism": "human", "mode": ["drop"]}`,
	`{"organism": "human", "mode": 5}`,
	`{"organism": "human", "mode": "fast\r\nX-Evil: 1"}`,
	`{"organism": "human", "doc": "zeta"}`,
	`{"organism": "human", "doc": "alpha"}`,
	`{"organism": "human", "doc": 9}`,
	`{"organism": "human", "doc": ["zeta"]}`,
	`{"organism": "human", "path": "/etc/passwd"}`,
	`{"organism": "human", "path": "/et\u0063/passwd"}`,
	`{"organism": "human", "path": "/home/../etc/passwd"}`,
	`{"organism": "human", "path": "/etc"}`,
}

// headerUpstream records, by trace, each body it received and the X-Mode
// header that came with it.
type headerUpstream struct {
	srv *httptest.Server
	mu  sync.Mutex
	got map[string][]string // trace id -> "X-Mode value\nbody"
}

func newHeaderUpstream(t *testing.T) *headerUpstream {
	u := &headerUpstream{got: map[string][]string{}}
	u.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		u.mu.Lock()
		tr := traceOf(r.Header.Get("Traceparent"))
		u.got[tr] = append(u.got[tr], strings.Join(r.Header.Values("X-Mode"), ",")+"\n"+string(b))
		u.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"ok":1}`)
	}))
	t.Cleanup(u.srv.Close)
	return u
}

func (u *headerUpstream) received(trace string) []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.got[trace]...)
}

// TestAdversarialRuleShapes sends shapesGateCalls to two tools (one the
// tool-gated rule names) through a real toolgate whose policy,
// shapesGatePolicy, runs on the compiled engine, first pass and plan, to a
// real upstream, and judges by what the upstream's handler received: a
// call reached it, once and unchanged, exactly when OPA's interpreter
// allows it (no deny, no error), and then with the X-Mode header the
// interpreter's decision sets. Bodies that give a name twice (or in
// another case) never reach it.
func TestAdversarialRuleShapes(t *testing.T) {
	files := map[string][]byte{"ruleshapes.rego": []byte(shapesGatePolicy)}
	interp, err := rego.Compile("ruleshapes", files)
	if err != nil {
		t.Fatal(err)
	}
	compiled, err := interp.Compiled(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if compiled.Engine() != policies.EngineCompiled {
		t.Fatalf("engine %s, want %s", compiled.Engine(), policies.EngineCompiled)
	}
	set := policies.NewSet("ruleshapes", []policies.Bound{{Policy: compiled, Mode: policies.ModeEnforce}}, 10*time.Second, false)
	up := newHeaderUpstream(t)
	host := strings.TrimPrefix(up.srv.URL, "http://")
	var cfg strings.Builder
	cfg.WriteString("listen:\n  forward: 127.0.0.1:0\ntools:\n")
	tools := []string{"search", "docs_edit"}
	for _, tool := range tools {
		fmt.Fprintf(&cfg, "  - {name: %s, match: {host: %q, method: POST, path: /%s}, inject_over_http: true}\n", tool, host, tool)
	}
	g, err := startGateSnap(t, cfg.String(), proxy.Snapshot{Checkers: map[string]proxy.Checker{"search": set, "docs_edit": set}})
	if err != nil {
		t.Fatal(err)
	}
	fwd := g.srv.Addr("forward", 0)
	var reached, refused int
	for _, tool := range tools {
		for _, body := range shapesGateCalls {
			args, ok := testutil.DecodeArgs([]byte(body))
			if !ok {
				t.Fatalf("bad test body %s", body)
			}
			trace, tp := newTrace()
			want, werr := interp.Eval(context.Background(), &policies.Input{Tool: tool, Arguments: args, TraceID: trace, Protocol: "http"})
			allowed := werr == nil && want.Allowed && len(want.Denies) == 0
			status := goDo(t, fwd, nil, http.MethodPost, "http://"+host+"/"+tool, tp, body)
			got := up.received(trace)
			switch {
			case !allowed && len(got) != 0:
				t.Errorf("%s %s: OPA refuses it (%v %v), the upstream received it (status %d)", tool, body, want.Denies, werr, status)
			case !allowed && status < 400:
				t.Errorf("%s %s: OPA refuses it, status %d", tool, body, status)
			case allowed && (len(got) != 1 || got[0] != want.Inject["X-Mode"]+"\n"+body):
				t.Errorf("%s %s: OPA allows it with X-Mode %q; the upstream received %q (status %d)", tool, body, want.Inject["X-Mode"], got, status)
			case allowed:
				reached++
			default:
				refused++
			}
		}
	}
	// A name given twice, or in another case, decodes to one value for
	// the policy (the last, or one of the two) and another for a parser
	// that reads the first: toolgate refuses such a body before any
	// policy, so no spelling lets a bound the pass checks reach the
	// upstream with the other value.
	for _, tool := range tools {
		for _, body := range []string{
			`{"organism": "human", "limit": 99, "limit": 1}`,
			`{"organism": "human", "limit": 1, "limit": 99}`,
			`{"organism": "human", "LIMIT": 99, "limit": 1}`,
			`{"organism": "cat", "Organism": "human"}`,
			`{"organism": "human", "query": "a@b.cd", "q\u0075ery": "x"}`,
		} {
			trace, tp := newTrace()
			status := goDo(t, fwd, nil, http.MethodPost, "http://"+host+"/"+tool, tp, body)
			if got := up.received(trace); len(got) != 0 || status < 400 {
				t.Errorf("%s %s: a name given twice; status %d, the upstream received %q", tool, body, status, got)
			}
		}
	}
	t.Logf("%d calls: %d reached the upstream, %d refused", 2*len(shapesGateCalls), reached, refused)
	if reached < 4 || refused < 4 {
		t.Errorf("the table must hold both calls the rules refuse and calls they let through")
	}
}
