package adversarial_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/bucketing"
	"github.com/toolgate/toolgate/internal/proxytest"
	"github.com/toolgate/toolgate/policies/approval"
	"github.com/toolgate/toolgate/policies/approval/audit"
	"github.com/toolgate/toolgate/proxy"
)

// The approvals group: a person approves one call, and the attacker tries
// to get another call through on that grant. Each attack is judged by what
// a real upstream executed: the attack's request, as the upstream's own
// framework parsed it (scheme, port, method, decoded path, query as Go
// reads it, JSON body with numbers compared by exact value), must mean the
// same as the approved call sent to the upstream directly, or it must not
// have been executed at all. After a refused attack the approved call
// itself is sent, and must go upstream: the grant was live when the
// attack was refused.

// apUpstream records every request it executes, tagged by X-Attack.
type apUpstream struct {
	mu   sync.Mutex
	seen map[string][]apMeaning
}

// apMeaning is what an upstream's handler read of one request.
type apMeaning struct {
	Scheme, Port, Method, Path string
	Query                      url.Values
	Body                       any
}

func (u *apUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	m := apMeaning{Scheme: "http", Method: r.Method, Path: r.URL.Path, Query: r.URL.Query()}
	if r.TLS != nil {
		m.Scheme = "https"
	}
	if a, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
		_, m.Port, _ = net.SplitHostPort(a.String())
	}
	b, _ := io.ReadAll(r.Body)
	if len(b) > 0 {
		d := json.NewDecoder(bytes.NewReader(b))
		d.UseNumber()
		var v any
		if d.Decode(&v) == nil {
			m.Body = v
		} else {
			m.Body = "raw:" + string(b)
		}
	}
	u.mu.Lock()
	u.seen[r.Header.Get("X-Attack")] = append(u.seen[r.Header.Get("X-Attack")], m)
	u.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	io.WriteString(w, `{"done":true}`)
}

func (u *apUpstream) take(tag string) []apMeaning {
	u.mu.Lock()
	defer u.mu.Unlock()
	out := u.seen[tag]
	delete(u.seen, tag)
	return out
}

// sameMeaning compares two readings, numbers by exact value.
func sameMeaning(a, b apMeaning) bool {
	if a.Scheme != b.Scheme || a.Port != b.Port || a.Method != b.Method || a.Path != b.Path {
		return false
	}
	if len(a.Query) != 0 || len(b.Query) != 0 {
		if !reflect.DeepEqual(a.Query, b.Query) {
			return false
		}
	}
	return sameValue(a.Body, b.Body)
}

func sameValue(a, b any) bool {
	switch x := a.(type) {
	case json.Number:
		y, ok := b.(json.Number)
		if !ok {
			return false
		}
		rx, okx := new(big.Rat).SetString(string(x))
		ry, oky := new(big.Rat).SetString(string(y))
		return okx && oky && rx.Cmp(ry) == 0
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, v := range x {
			w, ok := y[k]
			if !ok || !sameValue(v, w) {
				return false
			}
		}
		return true
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !sameValue(x[i], y[i]) {
				return false
			}
		}
		return true
	}
	return reflect.DeepEqual(a, b)
}

// dualListener serves plain HTTP and HTTPS on one port: a connection whose
// first byte is a TLS handshake record is served over TLS.
type dualListener struct {
	net.Listener
	cfg *tls.Config
}

type peekedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c peekedConn) Read(p []byte) (int, error) { return c.r.Read(p) }

func (l dualListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	r := bufio.NewReader(c)
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	first, err := r.Peek(1)
	c.SetReadDeadline(time.Time{})
	pc := peekedConn{Conn: c, r: r}
	if err == nil && first[0] == 0x16 {
		return tls.Server(pc, l.cfg), nil
	}
	return pc, nil
}

// apCall is one call as the attacker's client makes it.
type apCall struct {
	via     string // forward (proxy URL), rev-http, rev-https (base URLs)
	method  string
	target  string // forward: the URL; reverse: path and query. {n} and {m} are the attack's record ids
	ctype   string
	body    string
	agent   string // "" is agent-1
	session string // "" is sess-1
}

type apAttack struct {
	name  string
	grant apCall // the call a person approves
	try   apCall // the call tried on the grant
}

// apWorld is the gate of the approvals group and its upstreams.
type apWorld struct {
	srv              *proxy.Server
	person           *approval.Gate
	up               *apUpstream
	portA, portB     string
	forward, rh, rs  string // listener addresses
	viaProxy, direct *http.Client
	directTLS        *http.Client
	mcp              map[string]int // route path -> tools/call executed
	mcpMu            sync.Mutex
	mcpURL           string
	storePath        string // the approvals file
}

func startApprovalWorld(t *testing.T) *apWorld {
	t.Helper()
	return startApprovalWorldWith(t, nil)
}

// startApprovalWorldWith is startApprovalWorld with its approvals
// configuration changed by edit first (when not nil).
func startApprovalWorldWith(t *testing.T, edit func(*approval.Config)) *apWorld {
	t.Helper()
	w := &apWorld{up: &apUpstream{seen: map[string][]apMeaning{}}, mcp: map[string]int{}}
	borrowed := httptest.NewTLSServer(http.NotFoundHandler()) // for its certificate only
	cert := borrowed.TLS.Certificates[0]
	pool := borrowed.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: borrowed.Certificate().Raw})
	borrowed.Close()

	lnA, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srvA := &http.Server{Handler: w.up, ReadHeaderTimeout: 5 * time.Second}
	go srvA.Serve(dualListener{Listener: lnA, cfg: &tls.Config{Certificates: []tls.Certificate{cert}}})
	t.Cleanup(func() { srvA.Close() })
	upB := httptest.NewServer(w.up)
	t.Cleanup(upB.Close)
	_, w.portA, _ = net.SplitHostPort(lnA.Addr().String())
	_, w.portB, _ = net.SplitHostPort(upB.Listener.Addr().String())

	// An MCP server (official Go SDK, stateless) at two routes' paths.
	ms := mcp.NewServer(&mcp.Implementation{Name: "payments", Version: "1.0.0"}, nil)
	ms.AddTool(&mcp.Tool{Name: "charge", InputSchema: json.RawMessage(`{"type":"object","properties":{"amount":{"type":"integer"}}}`)},
		func(ctx context.Context, r *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "charged"}}}, nil
		})
	mh := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return ms }, &mcp.StreamableHTTPOptions{Stateless: true})
	mup := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var m struct {
			Method string `json:"method"`
		}
		if json.Unmarshal(b, &m) == nil && m.Method == "tools/call" {
			w.mcpMu.Lock()
			w.mcp[r.URL.Path]++
			w.mcpMu.Unlock()
		}
		r.Body = io.NopCloser(bytes.NewReader(b))
		mh.ServeHTTP(rw, r)
	}))
	t.Cleanup(mup.Close)
	w.mcpURL = mup.URL

	dir := t.TempDir()
	caFile := filepath.Join(dir, "upstream-ca.pem")
	if err := os.WriteFile(caFile, caPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	cfgYAML := fmt.Sprintf(`
listen:
  forward: 127.0.0.1:0
  reverse:
    - {listen: "127.0.0.1:0", upstream: "http://127.0.0.1:%[1]s"}
    - {listen: "127.0.0.1:0", upstream: "https://127.0.0.1:%[1]s"}
tls: {upstream_ca: [%[2]s]}
tools:
  - name: rec
    match: {host: 127.0.0.1, path: "/v1/rec/{id}"}
  - name: rec_edit
    match: {host: 127.0.0.1, method: POST, path: "/v1/rec/{id}/edit"}
    schema: {type: object, properties: {id: {type: string}, n: {type: number}, note: {type: string}, tags: {type: object}}}
  - name: rec_raw
    match: {host: 127.0.0.1, method: POST, path: "/v1/raw/{id}"}
  - name: pay_a
    protocol: mcp
    match: {host: 127.0.0.1, path: /mcp-a}
  - name: pay_b
    protocol: mcp
    match: {host: 127.0.0.1, path: /mcp-b}
`, w.portA, caFile)
	acfg := approval.Config{URL: "http://127.0.0.1:1/approvals", Tools: map[string]approval.ToolRule{
		"rec": {Require: approval.RequireAlways}, "rec_edit": {Require: approval.RequireAlways},
		"rec_raw": {Require: approval.RequireAlways}, "charge": {Require: approval.RequireAlways},
	}}
	if edit != nil {
		edit(&acfg)
	}
	if err := acfg.Validate(dir, false); err != nil {
		t.Fatal(err)
	}
	open := func(name string) *approval.Gate {
		s, err := approval.OpenFileStore(acfg.FilePath(), time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return approval.New(acfg, s, name)
	}
	w.storePath = acfg.FilePath()
	sidecarGate := open("adversarial")
	w.person = open("person")
	srv := proxytest.Start(t, cfgYAML, dir, proxy.Options{Sidecar: "adversarial", Approver: sidecarGate})
	w.srv = srv
	w.forward, w.rh, w.rs = srv.Addr("forward", 0), srv.Addr("reverse", 0), srv.Addr("reverse", 1)
	w.viaProxy = &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{Proxy: http.ProxyURL(&url.URL{Scheme: "http", Host: w.forward})}}
	w.direct = &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{}}
	w.directTLS = &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	return w
}

// expand fills a call's record ids ({n}, {m} the next), ports ({A},
// {B}), and {p}{e}: {n} with its last digit as an escape's hex ({p}%{e}).
func (w *apWorld) expand(s string, n int) string {
	return strings.NewReplacer("{n}", fmt.Sprint(n), "{m}", fmt.Sprint(n+1), "{A}", w.portA, "{B}", w.portB,
		"{p}", fmt.Sprint(n/10), "{e}", fmt.Sprintf("%X", n%10+'0')).Replace(s)
}

// send makes c through toolgate (or, direct, to the upstream it names),
// tagged; it returns the status and the envelope.
func (w *apWorld) send(t *testing.T, c apCall, n int, tag string, direct bool) (int, bucketing.Envelope) {
	t.Helper()
	target := w.expand(c.target, n)
	cl := w.viaProxy
	switch {
	case c.via == "forward" && direct:
		cl = w.direct
	case c.via == "rev-http" && direct:
		cl, target = w.direct, "http://127.0.0.1:"+w.portA+target
	case c.via == "rev-https" && direct:
		cl, target = w.directTLS, "https://127.0.0.1:"+w.portA+target
	case c.via == "rev-http":
		cl, target = w.direct, "http://"+w.rh+target
	case c.via == "rev-https":
		cl, target = w.direct, "http://"+w.rs+target
	}
	var body io.Reader
	if c.body != "" {
		body = strings.NewReader(w.expand(c.body, n))
	}
	req, err := http.NewRequest(c.method, target, body)
	if err != nil {
		t.Fatal(err)
	}
	if c.ctype != "" {
		req.Header.Set("Content-Type", c.ctype)
	}
	req.Header.Set("X-Attack", tag)
	req.Header.Set("X-Toolgate-Envelope", "1")
	req.Header.Set("X-Toolgate-Agent", cmp(c.agent, "agent-1"))
	req.Header.Set("X-Toolgate-Session", cmp(c.session, "sess-1"))
	resp, err := cl.Do(req)
	if err != nil {
		t.Fatalf("%s: %v", tag, err)
	}
	defer resp.Body.Close()
	var env bucketing.Envelope
	b, _ := io.ReadAll(resp.Body)
	_ = json.Unmarshal(b, &env)
	return resp.StatusCode, env
}

func cmp(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// grantGET is the approved call of most attacks.
var grantGET = apCall{via: "forward", method: "GET", target: "http://127.0.0.1:{A}/v1/rec/{n}?force=0"}

// grantEdit is the approved call of the argument attacks.
var grantEdit = apCall{via: "forward", method: "POST", target: "http://127.0.0.1:{A}/v1/rec/{n}/edit", ctype: "application/json",
	body: `{"n":5,"note":"a/b","tags":{"x":1,"y":2}}`}

func withTarget(c apCall, target string) apCall { c.target = target; return c }
func withBody(c apCall, body string) apCall     { c.body = body; return c }

var approvalAttacks = []apAttack{
	{"method swap GET to DELETE", grantGET, apCall{via: "forward", method: "DELETE", target: grantGET.target}},
	{"method swap GET to POST", grantGET, apCall{via: "forward", method: "POST", target: grantGET.target, ctype: "application/json", body: `{}`}},
	{"method spelt lower case", grantGET, apCall{via: "forward", method: "get", target: grantGET.target}},
	{"port swap", grantGET, withTarget(grantGET, "http://127.0.0.1:{B}/v1/rec/{n}?force=0")},
	{"host alias localhost", grantGET, withTarget(grantGET, "http://localhost:{A}/v1/rec/{n}?force=0")},
	{"scheme swap http to https", apCall{via: "rev-http", method: "GET", target: "/v1/rec/{n}"}, apCall{via: "rev-https", method: "GET", target: "/v1/rec/{n}"}},
	{"scheme swap https to http", apCall{via: "rev-https", method: "GET", target: "/v1/rec/{n}"}, apCall{via: "rev-http", method: "GET", target: "/v1/rec/{n}"}},
	{"path: escaped digit", grantGET, withTarget(grantGET, "http://127.0.0.1:{A}/v1/rec/{p}%{e}?force=0")},
	{"path: dot segment", grantGET, withTarget(grantGET, "http://127.0.0.1:{A}/v1/./rec/{n}?force=0")},
	{"path: dot-dot to the granted record", grantGET, withTarget(grantGET, "http://127.0.0.1:{A}/v1/rec/{m}/../{n}?force=0")},
	{"path: dot-dot to another record", grantGET, withTarget(grantGET, "http://127.0.0.1:{A}/v1/rec/{n}/../{m}?force=0")},
	{"path: trailing slash", grantGET, withTarget(grantGET, "http://127.0.0.1:{A}/v1/rec/{n}/?force=0")},
	{"path: double slash", grantGET, withTarget(grantGET, "http://127.0.0.1:{A}/v1//rec/{n}?force=0")},
	{"path: escaped slash to another record", grantGET, withTarget(grantGET, "http://127.0.0.1:{A}/v1/rec/{n}%2F..%2F{m}?force=0")},
	{"path: double encoding", grantGET, withTarget(grantGET, "http://127.0.0.1:{A}/v1/rec/{p}%25{e}?force=0")},
	{"path: escape hex case", apCall{via: "forward", method: "GET", target: "http://127.0.0.1:{A}/v1/rec/{n}%c3%a9"},
		apCall{via: "forward", method: "GET", target: "http://127.0.0.1:{A}/v1/rec/{n}%C3%A9"}},
	{"path: other record", grantGET, withTarget(grantGET, "http://127.0.0.1:{A}/v1/rec/{m}?force=0")},
	{"query: other value", grantGET, withTarget(grantGET, "http://127.0.0.1:{A}/v1/rec/{n}?force=1")},
	{"query: repeated name", grantGET, withTarget(grantGET, "http://127.0.0.1:{A}/v1/rec/{n}?force=0&force=1")},
	{"query: added parameter", grantGET, withTarget(grantGET, "http://127.0.0.1:{A}/v1/rec/{n}?force=0&cascade=1")},
	{"query: dropped", grantGET, withTarget(grantGET, "http://127.0.0.1:{A}/v1/rec/{n}")},
	{"query: escaped value", grantGET, withTarget(grantGET, "http://127.0.0.1:{A}/v1/rec/{n}?force=%30")},
	{"query: escaped name", grantGET, withTarget(grantGET, "http://127.0.0.1:{A}/v1/rec/{n}?f%6Frce=0")},
	{"query: semicolon", grantGET, withTarget(grantGET, "http://127.0.0.1:{A}/v1/rec/{n}?force=0;force=1")},
	{"query: broken escape next to an escape", apCall{via: "forward", method: "GET", target: "http://127.0.0.1:{A}/v1/rec/{n}?q=%70"},
		apCall{via: "forward", method: "GET", target: "http://127.0.0.1:{A}/v1/rec/{n}?q=%7%30"}},
	{"query: plus and space", apCall{via: "forward", method: "GET", target: "http://127.0.0.1:{A}/v1/rec/{n}?q=a+b"},
		apCall{via: "forward", method: "GET", target: "http://127.0.0.1:{A}/v1/rec/{n}?q=a%2Bb"}},
	{"args: 5.0", grantEdit, withBody(grantEdit, `{"n":5.0,"note":"a/b","tags":{"x":1,"y":2}}`)},
	{"args: 5e0", grantEdit, withBody(grantEdit, `{"n":5e0,"note":"a/b","tags":{"x":1,"y":2}}`)},
	{"args: 50e-1", grantEdit, withBody(grantEdit, `{"n":50e-1,"note":"a/b","tags":{"x":1,"y":2}}`)},
	{"args: key order", grantEdit, withBody(grantEdit, `{"tags":{"y":2,"x":1},"note":"a/b","n":5}`)},
	{"args: string escapes", grantEdit, withBody(grantEdit, `{"n":5,"note":"\u0061\/b","tags":{"x":1,"y":2}}`)},
	{"args: white space", grantEdit, withBody(grantEdit, "{ \"n\" : 5 ,\n\"note\":\"a/b\", \"tags\":{\"x\":1,\"y\":2} }")},
	{"args: other number", grantEdit, withBody(grantEdit, `{"n":6,"note":"a/b","tags":{"x":1,"y":2}}`)},
	{"args: beyond float64 precision", grantEdit, withBody(grantEdit, `{"n":5.000000000000000000001,"note":"a/b","tags":{"x":1,"y":2}}`)},
	{"args: duplicate key", grantEdit, withBody(grantEdit, `{"n":5,"n":6,"note":"a/b","tags":{"x":1,"y":2}}`)},
	{"args: nested change", grantEdit, withBody(grantEdit, `{"n":5,"note":"a/b","tags":{"x":1,"y":3}}`)},
	{"args: added member", grantEdit, withBody(grantEdit, `{"n":5,"note":"a/b","tags":{"x":1,"y":2,"z":0}}`)},
	{"args: number as string", grantEdit, withBody(grantEdit, `{"n":5,"note":"a/b","tags":{"x":"1","y":2}}`)},
	{"body the tool does not read", apCall{via: "forward", method: "POST", target: "http://127.0.0.1:{A}/v1/raw/{n}", ctype: "text/plain", body: "keep"},
		apCall{via: "forward", method: "POST", target: "http://127.0.0.1:{A}/v1/raw/{n}", ctype: "text/plain", body: "drop all"}},
	{"other agent", grantGET, apCall{via: "forward", method: "GET", target: grantGET.target, agent: "agent-2"}},
	{"other session", grantGET, apCall{via: "forward", method: "GET", target: grantGET.target, session: "sess-2"}},
}

// TestAdversarialApprovals runs the approvals group: each attack gets its
// own grant, then tries its call on it; a real upstream's reading decides.
// It fails on any call that reached the upstream meaning something other
// than what was approved, on a grant that a refused attack used up, and
// reports tried / refused / reached-upstream-as-approved.
func TestAdversarialApprovals(t *testing.T) {
	w := startApprovalWorld(t)
	tried, refused, sameCall, leaked := 0, 0, 0, 0
	for i, a := range approvalAttacks {
		n := 1000 + 10*i
		grant, try := a.grant, a.try
		t.Run(a.name, func(t *testing.T) {
			tried++
			// What the approved call means to the upstream.
			w.send(t, grant, n, a.name+"/direct", true)
			want := w.up.take(a.name + "/direct")
			if len(want) != 1 {
				t.Fatalf("the approved call sent directly executed %d times", len(want))
			}
			status, env := w.send(t, grant, n, a.name+"/grant", false)
			if status != http.StatusForbidden || env.Error == nil || env.Error.Approval == nil {
				t.Fatalf("the call to approve: %d %+v; want approval_pending", status, env.Error)
			}
			if got := w.up.take(a.name + "/grant"); len(got) != 0 {
				t.Fatalf("the call went upstream before approval")
			}
			if _, err := w.person.Decide(context.Background(), env.Error.Approval.ID, audit.VerdictApproved, "test:dana", ""); err != nil {
				t.Fatal(err)
			}
			status, env = w.send(t, try, n, a.name+"/try", false)
			got := w.up.take(a.name + "/try")
			reason := ""
			if env.Error != nil {
				reason = env.Error.Reason
			}
			switch {
			case len(got) == 0:
				refused++
				// The grant is live and still unused: the approved call goes.
				w.send(t, grant, n, a.name+"/control", false)
				if c := w.up.take(a.name + "/control"); len(c) != 1 || !sameMeaning(c[0], want[0]) {
					t.Errorf("after the refused attack (%d %s), the approved call executed %d times (%+v); want once, as approved", status, reason, len(c), c)
				}
				t.Logf("refused: %d %s", status, reason)
			case len(got) == 1 && sameMeaning(got[0], want[0]):
				sameCall++
				t.Logf("reached the upstream as the approved call (a spelling of it)")
			default:
				leaked++
				t.Errorf("LEAK: the upstream executed %+v on a grant for %+v", got, want[0])
			}
		})
	}
	t.Logf("approvals group: %d attacks tried, %d refused, %d reached the upstream as the approved call itself, %d reached it as another call", tried, refused, sameCall, leaked)
}

// TestAdversarialApprovalSingleUseParallel: a uses: 1 grant retried by 16
// callers at once goes upstream once.
func TestAdversarialApprovalSingleUseParallel(t *testing.T) {
	w := startApprovalWorld(t)
	for round := range 20 {
		n := 5000 + round
		tag := fmt.Sprintf("parallel-%d", round)
		status, env := w.send(t, grantGET, n, tag+"/grant", false)
		if status != http.StatusForbidden || env.Error == nil || env.Error.Approval == nil {
			t.Fatalf("the call to approve: %d %+v", status, env.Error)
		}
		if _, err := w.person.Decide(context.Background(), env.Error.Approval.ID, audit.VerdictApproved, "test:dana", ""); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		for range 16 {
			wg.Add(1)
			go func() { defer wg.Done(); w.send(t, grantGET, n, tag+"/try", false) }()
		}
		wg.Wait()
		if got := w.up.take(tag + "/try"); len(got) != 1 {
			t.Fatalf("round %d: a uses: 1 grant retried 16 times at once executed %d times", round, len(got))
		}
	}
}

// TestAdversarialApprovalPendingFlood: an agent floods calls that need
// approval while a person works through them, denying each new one; the
// undecided requests in the store (read by a store of its own) never pass
// approvals.max_pending, however many decided ones come after the pending
// ones, the calls past the bound are refused as approval_unavailable, and
// the upstream executes none of them.
func TestAdversarialApprovalPendingFlood(t *testing.T) {
	const maxPending = 4
	w := startApprovalWorldWith(t, func(c *approval.Config) { c.MaxPending = maxPending })
	reader, err := approval.OpenFileStore(w.storePath, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { reader.Close() })
	ctx := context.Background()
	pendingNow := func() int {
		recs, err := reader.Recent(ctx, time.Now().Add(-time.Hour), 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for i := range recs {
			if recs[i].Verdict() == nil {
				n++
			}
		}
		return n
	}
	n := 7000
	ask := func(tag string) (int, bucketing.Envelope) {
		n++
		return w.send(t, grantGET, n, tag, false)
	}
	// Two requests left pending, then twenty that a person denies as
	// they come, then the flood.
	for i := range 2 {
		if status, env := ask(fmt.Sprintf("flood/pending-%d", i)); status != http.StatusForbidden || env.Error == nil || env.Error.Approval == nil {
			t.Fatalf("pending %d: %d %+v", i, status, env.Error)
		}
	}
	for i := range 20 {
		status, env := ask(fmt.Sprintf("flood/denied-%d", i))
		if status != http.StatusForbidden || env.Error == nil || env.Error.Approval == nil {
			t.Fatalf("denied %d: %d %+v", i, status, env.Error)
		}
		if _, err := w.person.Decide(ctx, env.Error.Approval.ID, audit.VerdictDenied, "test:dana", ""); err != nil {
			t.Fatal(err)
		}
	}
	refused := 0
	for i := range 20 {
		status, env := ask(fmt.Sprintf("flood/more-%d", i))
		if env.Error == nil {
			t.Fatalf("flood %d: %d with no error", i, status)
		}
		if env.Error.Reason == "approval_unavailable" {
			refused++
		}
		if p := pendingNow(); p > maxPending {
			t.Fatalf("after flood call %d: %d requests pending in the store; max_pending is %d", i, p, maxPending)
		}
	}
	if p := pendingNow(); p != maxPending || refused != 20-(maxPending-2) {
		t.Fatalf("%d requests pending, %d flood calls refused as approval_unavailable; want %d and %d", p, refused, maxPending, 20-(maxPending-2))
	}
	w.up.mu.Lock()
	executed := 0
	for tag, seen := range w.up.seen {
		if strings.HasPrefix(tag, "flood/") {
			executed += len(seen)
		}
	}
	w.up.mu.Unlock()
	if executed != 0 {
		t.Fatalf("the upstream executed %d of the flood's calls", executed)
	}
	t.Logf("pending flood: 2 pending behind 20 denied, then 20 more: %d pending (max_pending %d), %d refused as approval_unavailable, none executed", maxPending, maxPending, refused)
}

// TestAdversarialApprovalInBandOtherRoute: toolgate's in-band approval
// state (2026-07-28 requestState) for a call on one MCP route, approved,
// is replayed on another route's server with the same tool and
// arguments: that server never executes it; on its own route it goes
// upstream once.
func TestAdversarialApprovalInBandOtherRoute(t *testing.T) {
	w := startApprovalWorld(t)
	caps := map[string]any{"elicitation": map[string]any{"url": map[string]any{}}}
	call := func(route string, extra map[string]any) map[string]json.RawMessage {
		params := map[string]any{"name": "charge", "arguments": map[string]any{"amount": 250},
			"_meta": map[string]any{
				"io.modelcontextprotocol/protocolVersion":    "2026-07-28",
				"io.modelcontextprotocol/clientInfo":         map[string]any{"name": "raw", "version": "1"},
				"io.modelcontextprotocol/clientCapabilities": caps,
			}}
		for k, v := range extra {
			params[k] = v
		}
		body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": params})
		req, _ := http.NewRequest(http.MethodPost, w.mcpURL+route, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("MCP-Protocol-Version", "2026-07-28")
		req.Header.Set("Mcp-Method", "tools/call")
		req.Header.Set("Mcp-Name", "charge")
		req.Header.Set("X-Toolgate-Agent", "agent-1")
		req.Header.Set("X-Toolgate-Session", "sess-1")
		resp, err := w.viaProxy.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if i := bytes.Index(b, []byte("data: ")); i >= 0 {
			b = b[i+len("data: "):]
			b = b[:bytes.IndexByte(b, '\n')]
		}
		var m struct {
			Result map[string]json.RawMessage `json:"result"`
		}
		if err := json.Unmarshal(b, &m); err != nil || m.Result == nil {
			t.Fatalf("status %d, answer %s", resp.StatusCode, b)
		}
		return m.Result
	}
	executed := func(route string) int {
		w.mcpMu.Lock()
		defer w.mcpMu.Unlock()
		return w.mcp[route]
	}
	res := call("/mcp-a", nil)
	var state string
	var inputs map[string]struct {
		Params struct {
			URL string `json:"url"`
		} `json:"params"`
	}
	if json.Unmarshal(res["requestState"], &state) != nil || json.Unmarshal(res["inputRequests"], &inputs) != nil || !approval.IsToken(state) {
		t.Fatalf("no in-band ask: %s", res)
	}
	u, err := url.Parse(inputs["toolgate.approval"].Params.URL)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.person.Decide(context.Background(), u.Query().Get("id"), audit.VerdictApproved, "test:dana", ""); err != nil {
		t.Fatal(err)
	}
	accept := map[string]any{"toolgate.approval": map[string]any{"action": "accept"}}
	tried, refused := 0, 0
	for _, extra := range []map[string]any{
		{"requestState": state, "inputResponses": accept},
		{"requestState": state},
	} {
		tried++
		res := call("/mcp-b", extra)
		if n := executed("/mcp-b"); n != 0 {
			t.Fatalf("LEAK: route pay_b's server executed a call approved on pay_a (%d times): %s", n, res)
		}
		refused++
	}
	if res := call("/mcp-a", map[string]any{"requestState": state, "inputResponses": accept}); executed("/mcp-a") != 1 {
		t.Fatalf("on its own route the approved call executed %d times: %s", executed("/mcp-a"), res)
	}
	t.Logf("in-band state on another route: %d tried, %d refused, 0 reached the other server", tried, refused)
}
