package adversarial_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolgate/toolgate/bucketing"
	"github.com/toolgate/toolgate/proxy"
	"github.com/toolgate/toolgate/proxy/tlsca"
)

// standIn is a real server standing for a metadata or private service: an
// attack succeeded when it accepted a connection.
type standIn struct {
	srv      *httptest.Server
	accepted atomic.Int64
	hits     atomic.Int64
	port     string
}

// countingListener counts the connections it accepted.
type countingListener struct {
	net.Listener
	n *atomic.Int64
}

func (l countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.n.Add(1)
	}
	return c, err
}

// newStandIn starts a stand-in on addr (127.0.0.1:0 unless given), whose
// handler is h (default: an answer holding a credential).
func newStandIn(t *testing.T, addr string, h http.HandlerFunc) *standIn {
	t.Helper()
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	s := &standIn{}
	if h == nil {
		h = func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, `{"AccessKeyId":"stolen"}`) }
	}
	s.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.hits.Add(1)
		h(w, r)
	}))
	s.srv.Listener.Close()
	s.srv.Listener = countingListener{ln, &s.accepted}
	s.srv.Start()
	t.Cleanup(s.srv.Close)
	_, s.port, _ = net.SplitHostPort(ln.Addr().String())
	return s
}

// egressResolver answers the attacker's names; each lookup of a name
// takes its next answer (the last repeats), so a name can rebind. It is
// the gate's egress resolver (proxy.Options.EgressResolver): toolgate
// resolves every destination through it, and nothing else does.
type egressResolver struct {
	mu      sync.Mutex
	answers map[string][][]string
	n       map[string]int
}

func (r *egressResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	seq, ok := r.answers[host]
	if !ok {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	i := min(r.n[host], len(seq)-1)
	r.n[host]++
	var out []netip.Addr
	for _, a := range seq[i] {
		out = append(out, netip.MustParseAddr(a))
	}
	return out, nil
}

// TestAdversarialEgress attacks the egress guard: calls and tunnels no
// tool matches, sent to a stand-in for a metadata or private service (a
// real server on loopback, on a port no tool names), through names that
// resolve to it, other spellings of its address, CONNECT tunnels (plain
// and sniffed), intercepted HTTPS, redirects that real clients follow
// (Go, Python requests, curl -L), a name that rebinds and a name that
// answers an allowed and a forbidden address. Each attack is judged by
// what the stand-ins accepted (nothing), and each refusal must also be
// policy/egress_denied with its event. Controls show that the judge can
// see a success: the tool's own loopback host, an allowed address and
// mode: record reach their servers.
func TestAdversarialEgress(t *testing.T) {
	target := newStandIn(t, "", nil)
	allowed := newStandIn(t, "", nil)
	tool := newStandIn(t, "", nil)
	redirector := newStandIn(t, "", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://metadata.attacker.test:"+target.port+"/latest/meta-data/iam/security-credentials/", http.StatusFound)
	})
	// A second stand-in on 127.0.0.2, on the allowed server's port: the
	// address a rebinding name turns to after being checked as 127.0.0.1.
	rebound := newStandIn(t, "127.0.0.2:"+allowed.port, nil)
	sp, ap := target.port, allowed.port
	res := &egressResolver{n: map[string]int{}, answers: map[string][][]string{
		"localhost":                {{"127.0.0.1"}}, // as /etc/hosts says: loopback calls are routed as localhost
		"metadata.attacker.test":   {{"127.0.0.1"}},
		"mapped.attacker.test":     {{"::ffff:127.0.0.1"}},
		"nat64.attacker.test":      {{"64:ff9b::7f00:1"}},
		"redirector.attacker.test": {{"127.0.0.1"}},
		// First the allowed 127.0.0.1, then 127.0.0.2 (the rebound
		// stand-in): a dial that resolved again would reach it.
		"rebind.attacker.test": {{"127.0.0.1"}, {"127.0.0.2"}},
		// An allowed address and a forbidden one at once.
		"mixed.attacker.test": {{"127.0.0.1", "127.0.0.2"}},
	}}
	dir := t.TempDir()
	caCert, caKey := filepath.Join(dir, "ca.crt"), filepath.Join(dir, "ca.key")
	if err := tlsca.Create(caCert, caKey, "", 0); err != nil {
		t.Fatal(err)
	}
	config := func(tools, mode string, ca bool) string {
		s := "listen:\n  forward: 127.0.0.1:0\n" + tools +
			fmt.Sprintf("egress:\n  mode: %s\n  allow: [\"redirector.attacker.test:%s\", \"127.0.0.1:%s\"]\n", mode, redirector.port, ap)
		if ca {
			s += fmt.Sprintf("tls:\n  ca_cert: %s\n  ca_key: %s\n", caCert, caKey)
		}
		return s
	}
	namedTool := "tools:\n  - name: tool\n    match: {host: \"localhost:" + tool.port + "\", method: POST, path: /v1/tools}\n"
	hostlessTool := "tools:\n  - name: tool\n    match: {method: POST, path: /v1/tools}\n"
	withResolver := func(o *proxy.Options) { o.EgressResolver = res }
	start := func(cfg string) *gate {
		g, err := startGate(t, cfg, withResolver)
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	// named: a tool names a loopback host, so CONNECTs are sniffed
	// (sniffConnect); hostless: a tool matches every host, so a CONNECT
	// is refused as not_intercepted without a CA; mitm: the same with a
	// CA, so CONNECTs are intercepted and their calls pass through the
	// pipeline; notools: CONNECTs are tunnelled by goproxy.
	named := start(config(namedTool, "enforce", false))
	hostless := start(config(hostlessTool, "enforce", false))
	mitm := start(config(hostlessTool, "enforce", true))
	notools := start(config("tools: []\n", "enforce", false))
	recording := start(config(namedTool, "record", false))
	pem, err := os.ReadFile(caCert)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pem)

	type row struct {
		name string
		gate *gate
		// send makes the call through the gate's forward listener, with
		// the traceparent tp, and returns the status of the answer to the
		// attack's last step.
		send func(t *testing.T, proxyAddr, tp string) int
	}
	get := func(u string) func(*testing.T, string, string) int {
		return func(t *testing.T, proxyAddr, tp string) int {
			return goDo(t, proxyAddr, nil, http.MethodGet, u, tp, "")
		}
	}
	getTLS := func(u string) func(*testing.T, string, string) int {
		return func(t *testing.T, proxyAddr, tp string) int {
			return goDo(t, proxyAddr, roots, http.MethodGet, u, tp, "")
		}
	}
	connect := func(authority string) func(*testing.T, string, string) int {
		return func(t *testing.T, proxyAddr, tp string) int { return rawConnectStatus(t, proxyAddr, authority, tp) }
	}
	var rows []row
	for _, g := range []struct {
		name string
		g    *gate
	}{{"named", named}, {"hostless", hostless}, {"notools", notools}} {
		if g.g != hostless {
			rows = append(rows,
				row{g.name + "/connect-name", g.g, connect("metadata.attacker.test:" + sp)},
				row{g.name + "/connect-literal", g.g, connect("127.0.0.1:" + sp)},
				row{g.name + "/connect-spelled-hex", g.g, connect("0x7f.1:" + sp)},
				row{g.name + "/connect-mapped", g.g, connect("[::ffff:127.0.0.1]:" + sp)},
			)
		}
		rows = append(rows,
			row{g.name + "/name-absolute-form", g.g, get("http://metadata.attacker.test:" + sp + "/latest/meta-data/")},
			row{g.name + "/name-mapped", g.g, get("http://mapped.attacker.test:" + sp + "/")},
			row{g.name + "/name-nat64", g.g, get("http://nat64.attacker.test:" + sp + "/")},
			row{g.name + "/literal-loopback", g.g, get("http://127.0.0.1:" + sp + "/")},
			row{g.name + "/literal-mapped", g.g, get("http://[::ffff:127.0.0.1]:" + sp + "/")},
			row{g.name + "/literal-hex", g.g, get("http://0x7f.1:" + sp + "/")},
			row{g.name + "/literal-decimal", g.g, get("http://2130706433:" + sp + "/")},
			row{g.name + "/localhost", g.g, get("http://localhost:" + sp + "/")},
			row{g.name + "/redirect-go", g.g, get("http://redirector.attacker.test:" + redirector.port + "/")},
			row{g.name + "/mixed-answer", g.g, get("http://mixed.attacker.test:" + ap + "/")},
		)
	}
	rows = append(rows,
		row{"mitm/name", mitm, getTLS("https://metadata.attacker.test:" + sp + "/latest/meta-data/")},
		row{"mitm/name-nat64", mitm, getTLS("https://nat64.attacker.test:" + sp + "/")},
		row{"mitm/literal-loopback", mitm, getTLS("https://127.0.0.1:" + sp + "/")},
		row{"mitm/mixed-answer", mitm, getTLS("https://mixed.attacker.test:" + ap + "/")},
	)
	// tried counts the attacks, refused those answered 403 with a
	// policy/egress_denied event (or, for the real clients and rebinding,
	// 403 policy); the stand-ins' counts say whether any reached them.
	var tried, refused int
	for _, r := range rows {
		tried++
		t.Run(r.name, func(t *testing.T) {
			trace, tp := newTrace()
			status := r.send(t, r.gate.srv.Addr("forward", 0), tp)
			if status != http.StatusForbidden {
				t.Errorf("status %d, want 403", status)
			}
			if msg := egressRefusalRecorded(t, r.gate, trace); msg != "" {
				t.Error(msg)
			} else if status == http.StatusForbidden {
				refused++
			}
		})
	}

	// Real clients that follow redirects, configured only by a proxy
	// variable; the first hop is allowed, the Location is not.
	tried += 3
	t.Run("redirect-python-requests", func(t *testing.T) {
		cmd := exec.Command("python3", "-c", `
import os, requests
r = requests.get(os.environ["URL"], proxies={"http": os.environ["PROXY"]}, timeout=20)
print(r.status_code, r.headers.get("X-Toolgate-Error-Code"), len(r.history))`)
		cmd.Env = append(cmd.Environ(), "URL=http://redirector.attacker.test:"+redirector.port+"/", "PROXY=http://"+named.srv.Addr("forward", 0))
		out, err := cmd.CombinedOutput()
		if err != nil || strings.TrimSpace(string(out)) != "403 policy 1" {
			t.Errorf("python requests: %s (%v), want 403 policy after one redirect", out, err)
		} else {
			refused++
		}
	})
	t.Run("redirect-curl", func(t *testing.T) {
		out, err := exec.Command("curl", "-s", "-L", "-o", "/dev/null", "-w", "%{http_code} %{num_redirects}", "-x", "http://"+named.srv.Addr("forward", 0),
			"http://redirector.attacker.test:"+redirector.port+"/").CombinedOutput()
		if err != nil || string(out) != "403 1" {
			t.Errorf("curl -L: %q (%v), want the redirect followed and refused (403 1)", out, err)
		} else {
			refused++
		}
	})

	// DNS rebinding: the name is checked as the allowed 127.0.0.1 and
	// then answers 127.0.0.2. The first call reaches the allowed server
	// (the address checked); every later one is refused.
	t.Run("rebind", func(t *testing.T) {
		before := allowed.hits.Load()
		ok := true
		for i := range 4 {
			_, tp := newTrace()
			status := goDo(t, named.srv.Addr("forward", 0), nil, http.MethodGet, "http://rebind.attacker.test:"+ap+"/", tp, "")
			if want := map[bool]int{true: 200, false: 403}[i == 0]; status != want {
				t.Errorf("call %d: %d, want %d", i, status, want)
				ok = false
			}
		}
		if ok {
			refused++
		}
		if n := allowed.hits.Load() - before; n != 1 {
			t.Errorf("the allowed server ran %d requests, want 1 (the first call, at the checked address)", n)
		}
	})

	reached := 0
	for _, s := range []struct {
		name string
		s    *standIn
	}{{"127.0.0.1:" + sp, target}, {"127.0.0.2:" + ap, rebound}} {
		if n, h := s.s.accepted.Load(), s.s.hits.Load(); n != 0 || h != 0 {
			reached++
			t.Errorf("the stand-in on %s accepted %d connections and ran %d requests: egress reached it", s.name, n, h)
		}
	}
	t.Logf("egress: %d attacks tried, %d refused, stand-ins reached: %d", tried, refused, reached)
	doc, err := os.ReadFile("../../docs/security.md")
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("`TestAdversarialEgress`: %d attacks tried, %d refused, %d reached a stand-in.", tried, refused, reached); !strings.Contains(string(doc), want) {
		t.Errorf("docs/security.md should say %q", want)
	}
	if h := redirector.hits.Load(); h < 5 {
		t.Errorf("the redirector ran %d requests; the redirect rows did not reach it", h)
	}

	// Controls: the tool's loopback host, an allowed destination, and
	// record mode reach their servers, so the judge above can see a
	// success.
	_, tp := newTrace()
	if s := goDo(t, named.srv.Addr("forward", 0), nil, http.MethodPost, "http://localhost:"+tool.port+"/v1/tools", tp, `{}`); s != 200 || tool.hits.Load() != 1 {
		t.Errorf("control-tool: %d, tool ran %d, want 200 and 1", s, tool.hits.Load())
	}
	before := allowed.hits.Load()
	_, tp = newTrace()
	if s := goDo(t, named.srv.Addr("forward", 0), nil, http.MethodGet, "http://127.0.0.1:"+ap+"/", tp, ""); s != 200 || allowed.hits.Load() != before+1 {
		t.Errorf("control-allowed: %d, allowed ran %d, want 200 and 1", s, allowed.hits.Load()-before)
	}
	trace, tp := newTrace()
	if s := goDo(t, recording.srv.Addr("forward", 0), nil, http.MethodGet, "http://metadata.attacker.test:"+sp+"/", tp, ""); s != 200 || target.hits.Load() != 1 {
		t.Errorf("control-record-mode: %d, stand-in ran %d, want 200 and 1", s, target.hits.Load())
	}
	recording.read(t)
	var noted bool
	for _, e := range recording.byTrace(trace) {
		noted = noted || e.OK && e.DryRunDenied && len(e.DryRunViolations) == 1 && strings.HasPrefix(e.DryRunViolations[0], "egress: ")
	}
	if !noted {
		t.Errorf("record mode: the event does not note what enforce would have refused: %+v", recording.byTrace(trace))
	}
}

// egressRefusalRecorded waits for the trace's refused event and checks it
// says policy/egress_denied, and that its detail names no resolved
// address of the stand-ins.
func egressRefusalRecorded(t *testing.T, g *gate, trace string) string {
	deadline := time.Now().Add(10 * time.Second)
	for {
		g.read(t)
		for _, e := range g.byTrace(trace) {
			if e.ErrorCode == string(bucketing.CodePolicy) && e.Reason == bucketing.ReasonEgressDenied && e.Refused {
				if strings.Contains(e.Detail, "127.0.0.2") {
					return "the refusal names the resolved address: " + e.Detail
				}
				return ""
			}
		}
		if time.Now().After(deadline) {
			return fmt.Sprintf("no policy/egress_denied event for the trace; events: %+v", g.byTrace(trace))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// goDo sends a request through the forward proxy with Go's client, which
// follows redirects as a legacy Go service would; roots, when set, are
// the only roots it trusts (toolgate's CA, for intercepted HTTPS).
func goDo(t *testing.T, proxyAddr string, roots *x509.CertPool, method, u, tp, body string) int {
	t.Helper()
	pu, _ := url.Parse("http://" + proxyAddr)
	tr := &http.Transport{Proxy: http.ProxyURL(pu), DisableKeepAlives: true}
	if roots != nil {
		tr.TLSClientConfig = &tls.Config{RootCAs: roots}
	}
	c := &http.Client{Transport: tr, Timeout: 20 * time.Second}
	req, err := http.NewRequest(method, u, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Traceparent", tp)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, u, err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// rawConnectStatus sends a CONNECT and returns the status of its answer;
// on a 200 it sends a request through the tunnel, as a client would.
func rawConnectStatus(t *testing.T, proxyAddr, authority, tp string) int {
	t.Helper()
	c, err := net.DialTimeout("tcp", proxyAddr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\nTraceparent: %s\r\n\r\n", authority, authority, tp)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil {
		t.Fatalf("CONNECT %s: %v", authority, err)
	}
	if resp.StatusCode == http.StatusOK {
		fmt.Fprintf(c, "GET /latest/meta-data/ HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", authority)
		io.Copy(io.Discard, br)
	}
	return resp.StatusCode
}

// TestSecurityDocEgressRows checks that every test docs/security.md's
// egress section names is a test of this package or of proxy/egress, and
// that every row pattern it names matches a row of TestAdversarialEgress.
func TestSecurityDocEgressRows(t *testing.T) {
	doc, err := os.ReadFile("../../docs/security.md")
	if err != nil {
		t.Fatal(err)
	}
	_, sec, ok := strings.Cut(string(doc), "## Egress: where toolgate connects\n")
	if !ok {
		t.Fatal("docs/security.md has no section \"Egress: where toolgate connects\"")
	}
	sec, _, _ = strings.Cut(sec, "\n## ")
	var src strings.Builder
	for _, glob := range []string{"*_test.go", "../egress/*_test.go"} {
		files, _ := filepath.Glob(glob)
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			src.Write(b)
		}
	}
	own, err := os.ReadFile("egress_test.go")
	if err != nil {
		t.Fatal(err)
	}
	tests, rows := 0, 0
	for _, line := range strings.Split(sec, "\n") {
		if !strings.HasPrefix(line, "| E") {
			continue
		}
		cols := strings.Split(line, "|")
		for _, m := range regexp.MustCompile("`([^`]+)`").FindAllStringSubmatch(cols[len(cols)-2], -1) {
			name := m[1]
			switch {
			case strings.HasPrefix(name, "Test") || strings.HasPrefix(name, "Fuzz"):
				tests++
				if !strings.Contains(src.String(), "func "+name+"(") {
					t.Errorf("docs/security.md names %s, which is no test of proxy/adversarial or proxy/egress", name)
				}
			default:
				rows++
				// A row is named by a string literal of egress_test.go: the
				// part after the gate ("*/") and before a trailing "*".
				frag := name[strings.LastIndexByte(name, '/')+1:]
				frag = strings.TrimSuffix(frag, "*")
				if !strings.Contains(string(own), "\"/"+frag) && !strings.Contains(string(own), "\""+frag) {
					t.Errorf("docs/security.md names the row %q, which matches no row of TestAdversarialEgress", name)
				}
			}
		}
	}
	if tests < 5 || rows < 8 {
		t.Errorf("found %d tests and %d rows in the egress table; has it changed?", tests, rows)
	}
}
