package proxy_test

import (
	"bufio"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolgate/toolgate/bucketing"
	"github.com/toolgate/toolgate/proxy"
)

// seenCall is what an upstream handler received.
type seenCall struct {
	Method, URI, Host, Key, Body string
}

// recUpstream is a real Go HTTP server that answers every request 200 and
// records what its handler saw: the method, the request target exactly as
// it came on the wire, the Host header, and the injected X-Key header.
type recUpstream struct {
	ts   *httptest.Server
	mu   sync.Mutex
	seen []seenCall
}

func newRecUpstream(t testing.TB) *recUpstream {
	u := &recUpstream{}
	u.ts = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		u.mu.Lock()
		u.seen = append(u.seen, seenCall{Method: r.Method, URI: r.RequestURI, Host: r.Host, Key: r.Header.Get("X-Key"), Body: string(b)})
		u.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"ok":1}`)
	}))
	t.Cleanup(u.ts.Close)
	return u
}

func (u *recUpstream) port() string {
	_, p, _ := net.SplitHostPort(u.ts.Listener.Addr().String())
	return p
}

// take returns and forgets what the upstream saw.
func (u *recUpstream) take() []seenCall {
	u.mu.Lock()
	defer u.mu.Unlock()
	s := u.seen
	u.seen = nil
	return s
}

// rawCall sends one request, byte for byte as given (method and request
// target are not cleaned by any client library), and returns the status
// and the envelope's reason, if any.
func rawCall(t *testing.T, addr, method, target, host, body string) (int, string) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(20 * time.Second))
	fmt.Fprintf(c, "%s %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
		method, target, host, len(body), body)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("%s %s: %v", method, target, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var env bucketing.Envelope
	if json.Unmarshal(b, &env) == nil && env.Error != nil {
		return resp.StatusCode, env.Error.Reason
	}
	return resp.StatusCode, ""
}

// routeConfig has two tools on host localhost (any port): a POST taking a
// JSON body, and a GET with a path variable. UPPORT is the recording
// upstream's port.
const routeConfig = `
listen:
  forward: 127.0.0.1:0
  reverse:
    - listen: 127.0.0.1:0
      upstream: http://localhost:UPPORT
tools:
  - name: search
    match: {host: localhost, method: POST, path: /v1/tools}
    args: [json]
    schema: {type: object, properties: {q: {type: string, maxLength: 5}}, required: [q]}
  - name: item
    match: {host: localhost, method: GET, path: "/v1/items/{id}"}
    schema: {type: object, properties: {id: {type: string, pattern: "^[a-z]+$"}}, required: [id]}
  - name: dir
    match: {host: localhost, method: GET, path: /v1/dir/}
    schema: {type: object, properties: {n: {type: integer}}}
`

// TestCanonicalRouting sends every spelling of a tool's call (other
// encodings of its path, its method in lower case, other names of its
// host) through the forward and the reverse listener. Each one is either
// routed to the tool, where an invalid argument is refused and a valid call
// reaches the upstream's handler as exactly the canonical call that was
// checked, or refused without reaching upstream.
func TestCanonicalRouting(t *testing.T) {
	up := newRecUpstream(t)
	e := newEnv(t, strings.ReplaceAll(routeConfig, "UPPORT", up.port()))
	fwd, rev := e.srv.Addr("forward", 0), e.srv.Addr("reverse", 0)
	p := up.port()
	canonHost := "localhost:" + p

	// refusedByServer: Go's own server answers 400 before toolgate sees it.
	const routed, refusedByServer = "routed", "400"
	cases := []struct {
		name         string
		method, host string // host: how the caller names the upstream
		path         string
		want         string // routed, or the refusal reason
		wantURI      string // what upstream sees when routed
		wantMethod   string
	}{
		{"canonical", "POST", "localhost", "/v1/tools", routed, "/v1/tools", "POST"},
		{"encoded t", "POST", "localhost", "/v1/%74ools", routed, "/v1/tools", "POST"},
		{"encoded s", "POST", "localhost", "/v1/tool%73", routed, "/v1/tools", "POST"},
		{"leading //", "POST", "localhost", "//v1/tools", routed, "/v1/tools", "POST"},
		{"inner //", "POST", "localhost", "/v1//tools", routed, "/v1/tools", "POST"},
		{"dot segment", "POST", "localhost", "/v1/./tools", routed, "/v1/tools", "POST"},
		{"dot-dot segment", "POST", "localhost", "/v1/x/../tools", routed, "/v1/tools", "POST"},
		{"encoded dot", "POST", "localhost", "/v1/%2e/tools", routed, "/v1/tools", "POST"},
		{"encoded dot-dot", "POST", "localhost", "/v1/x/%2E%2e/tools", routed, "/v1/tools", "POST"},
		{"trailing slash", "POST", "localhost", "/v1/tools/", routed, "/v1/tools", "POST"},
		{"lower-case method", "post", "localhost", "/v1/tools", routed, "/v1/tools", "POST"},
		{"mixed-case method", "pOsT", "localhost", "/v1/%74ools/", routed, "/v1/tools", "POST"},
		{"query kept", "GET", "localhost", "/v1/dir/?n=1", routed, "/v1/dir/?n=1", "GET"},
		{"host 127.0.0.1", "POST", "127.0.0.1", "/v1/tools", routed, "/v1/tools", "POST"},
		{"host 127.1", "POST", "127.1", "/v1/tools", routed, "/v1/tools", "POST"},
		{"host hex", "POST", "0x7f000001", "/v1/tools", routed, "/v1/tools", "POST"},
		{"host decimal", "POST", "2130706433", "/v1/tools", routed, "/v1/tools", "POST"},
		{"host octal", "POST", "0177.0.0.1", "/v1/tools", routed, "/v1/tools", "POST"},
		{"host mapped ipv6", "POST", "[::ffff:127.0.0.1]", "/v1/tools", routed, "/v1/tools", "POST"},
		{"host upper, trailing dot", "POST", "LOCALHOST.", "/v1/tools", routed, "/v1/tools", "POST"},
		{"host other loopback", "POST", "127.0.0.2", "/v1/tools", routed, "/v1/tools", "POST"},
		{"path variable encoded", "GET", "localhost", "/v1/items/%61bc", routed, "/v1/items/abc", "GET"},
		{"path variable dot-dot", "get", "127.1", "/v1/items/zz/../abc/", routed, "/v1/items/abc", "GET"},
		{"template with trailing slash", "GET", "localhost", "/v1/dir", routed, "/v1/dir/", "GET"},
		{"template with trailing slash, spelt oddly", "GET", "127.1", "//v1/./d%69r//", routed, "/v1/dir/", "GET"},
		{"encoded slash", "POST", "localhost", "/v1%2Ftools", bucketing.ReasonAmbiguousRequest, "", ""},
		{"encoded slash in variable", "GET", "localhost", "/v1/items/a%2fb", bucketing.ReasonAmbiguousRequest, "", ""},
		{"encoded backslash", "POST", "localhost", "/v1%5Ctools", bucketing.ReasonAmbiguousRequest, "", ""},
		{"double encoding", "POST", "localhost", "/v1/%252e/tools", bucketing.ReasonAmbiguousRequest, "", ""},
		{"path parameter", "POST", "localhost", "/v1/tools;x=1", bucketing.ReasonAmbiguousRequest, "", ""},
		{"encoded NUL", "POST", "localhost", "/v1/tools%00", bucketing.ReasonAmbiguousRequest, "", ""},
		{"broken escape", "POST", "localhost", "/v1/tools%zz", refusedByServer, "", ""},
		{"numeric host, no address", "POST", "127.0.0.256", "/v1/tools", bucketing.ReasonAmbiguousRequest, "", ""},
		{"other path, closed host", "POST", "localhost", "/v1/toolz", bucketing.ReasonNotAllowlist, "", ""},
		{"other method, closed host", "PUT", "localhost", "/v1/tools", bucketing.ReasonNotAllowlist, "", ""},
		{"extra segment, closed host", "POST", "127.1", "/v1/tools/x", bucketing.ReasonNotAllowlist, "", ""},
	}
	valid, invalid := `{"q":"abc"}`, `{"q":"toolong"}`
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			vias := []struct{ name, addr, target, host string }{
				{"forward", fwd, "http://" + tc.host + ":" + p + tc.path, tc.host + ":" + p},
			}
			// The reverse listener's upstream is fixed: only the path
			// and method vary there.
			if strings.HasPrefix(tc.host, "localhost") {
				vias = append(vias, struct{ name, addr, target, host string }{"reverse", rev, tc.path, rev})
			}
			for _, via := range vias {
				up.take()
				body := valid
				if strings.EqualFold(tc.method, "GET") {
					body = ""
				}
				status, reason := rawCall(t, via.addr, tc.method, via.target, via.host, body)
				seen := up.take()
				if tc.want == refusedByServer {
					if status != 400 || len(seen) != 0 {
						t.Errorf("%s: %d, upstream saw %+v; want 400 and nothing upstream", via.name, status, seen)
					}
					continue
				}
				if tc.want != routed {
					if status < 400 || reason != tc.want {
						t.Errorf("%s: %d %q, want refused as %s", via.name, status, reason, tc.want)
					}
					if len(seen) != 0 {
						t.Errorf("%s: a refused call reached upstream: %+v", via.name, seen)
					}
					continue
				}
				if status != 200 || len(seen) != 1 {
					t.Fatalf("%s: %d %q, upstream saw %+v; want it routed and forwarded", via.name, status, reason, seen)
				}
				got := seen[0]
				if got.Method != tc.wantMethod || got.URI != tc.wantURI || got.Host != canonHost {
					t.Errorf("%s: upstream saw %s %s (Host %s), want %s %s (Host %s)", via.name, got.Method, got.URI, got.Host, tc.wantMethod, tc.wantURI, canonHost)
				}
				// The same spelling with an invalid argument is checked: a
				// body the schema refuses, or an unknown query argument.
				bad := invalid
				badPath := tc.path
				if body == "" {
					sep := "?"
					if strings.Contains(badPath, "?") {
						sep = "&"
					}
					badPath, bad = badPath+sep+"bogus=1", ""
				}
				target := via.target[:len(via.target)-len(tc.path)] + badPath
				status, reason = rawCall(t, via.addr, tc.method, target, via.host, bad)
				if status != 422 || len(up.take()) != 0 {
					t.Errorf("%s: invalid argument: %d %q, want 422 and nothing upstream", via.name, status, reason)
				}
			}
		})
	}
	evs := e.waitEvents(t, 1)
	for _, ev := range evs {
		if ev.Tool != "" && ev.Host != canonHost {
			t.Errorf("event for %s records host %q, want the canonical %q", ev.Tool, ev.Host, canonHost)
		}
		if ev.Method != strings.ToUpper(ev.Method) {
			t.Errorf("event records method %q, want it canonical", ev.Method)
		}
	}
}

// TestClosedHost checks that a host tools name refuses its other calls by
// default, and that hosts[].unmatched opens it (pass) or records what it
// would refuse while forwarding (dry_run). A host no tool names follows
// unmatched.
func TestClosedHost(t *testing.T) {
	up := newRecUpstream(t)
	base := strings.ReplaceAll(routeConfig, "UPPORT", up.port())
	for _, tc := range []struct {
		name       string
		extra      string
		wantStatus int
		wantDryRun bool
	}{
		{"closed by default", "", 403, false},
		{"closed under unmatched: pass", "unmatched: pass\n", 403, false},
		{"hosts deny", "hosts: [{host: localhost, unmatched: deny}]\n", 403, false},
		{"hosts pass", "hosts: [{host: localhost, unmatched: pass}]\n", 200, false},
		{"hosts dry_run", "hosts: [{host: localhost, unmatched: dry_run}]\n", 200, true},
		{"hosts with the port", "hosts: [{host: \"localhost:" + up.port() + "\", unmatched: pass}]\n", 200, false},
		{"hosts on another port", "hosts: [{host: \"localhost:1\", unmatched: pass}]\n", 403, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, base+tc.extra)
			up.take()
			// 127.1 is another name of the tools' host localhost.
			status, reason := rawCall(t, e.srv.Addr("forward", 0), "GET", "http://127.1:"+up.port()+"/admin", "127.1", "")
			seen := up.take()
			if status != tc.wantStatus {
				t.Fatalf("status %d (%s), want %d", status, reason, tc.wantStatus)
			}
			if tc.wantStatus == 403 && (reason != bucketing.ReasonNotAllowlist || len(seen) != 0) {
				t.Errorf("refusal %q, upstream saw %+v; want not_allowlisted and nothing upstream", reason, seen)
			}
			if tc.wantStatus == 200 && (len(seen) != 1 || seen[0].URI != "/admin") {
				t.Errorf("upstream saw %+v, want GET /admin", seen)
			}
			evs := e.waitEvents(t, 1)
			if ev := evs[0]; ev.DryRunDenied != tc.wantDryRun || (tc.wantDryRun && len(ev.DryRunViolations) != 1) {
				t.Errorf("event dry_run_denied %v %q, want %v", ev.DryRunDenied, ev.DryRunViolations, tc.wantDryRun)
			}
		})
	}
	// A host no tool names: unmatched decides (an IPv6 loopback would be
	// the tools' host too, so the tools move to another host here).
	// The upstream is on loopback, which no tool names now: the egress
	// guard lets it through only when egress.allow lists it.
	other := strings.ReplaceAll(base, "host: localhost,", "host: tools.invalid,") + "egress: {allow: [127.0.0.1]}\n"
	e := newEnv(t, other)
	if status, _ := rawCall(t, e.srv.Addr("forward", 0), "GET", "http://127.0.0.1:"+up.port()+"/admin", "x", ""); status != 200 {
		t.Errorf("unmatched call to a host no tool names: %d, want 200 (unmatched: pass)", status)
	}
	e = newEnv(t, other+"unmatched: deny\n")
	if status, _ := rawCall(t, e.srv.Addr("forward", 0), "GET", "http://127.0.0.1:"+up.port()+"/admin", "x", ""); status != 403 {
		t.Errorf("unmatched call under deny: %d, want 403", status)
	}
}

// TestInjectOnlyToOrigin checks that injected headers reach the tool's own
// origin and nothing else: not another port, not plain HTTP without the
// tool's consent, not a tool without a host.
func TestInjectOnlyToOrigin(t *testing.T) {
	a, b := newRecUpstream(t), newRecUpstream(t)
	tool := func(host string, overHTTP bool) string {
		s := "listen: {forward: 127.0.0.1:0}\negress: {allow: [127.0.0.1]}\ntools:\n  - name: keyed\n    match: {host: \"" + host + "\", method: GET, path: /k}\n    inject_headers: {X-Key: sekrit}\n"
		if overHTTP {
			s += "    inject_over_http: true\n"
		}
		return s
	}
	for _, tc := range []struct {
		name       string
		cfg        string
		up         *recUpstream
		wantStatus int
		wantReason string
		wantKey    string
	}{
		{"own origin", tool("localhost:"+a.port(), true), a, 200, "", "sekrit"},
		{"same host, other port: no tool, no key", tool("localhost:"+a.port(), true), b, 200, "", ""},
		{"host without port: only the default port", tool("localhost", true), a, 403, bucketing.ReasonOriginMismatch, ""},
		{"plain HTTP without consent", tool("localhost:"+a.port(), false), a, 403, bucketing.ReasonOriginMismatch, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, tc.cfg)
			a.take()
			b.take()
			status, reason := rawCall(t, e.srv.Addr("forward", 0), "GET", "http://127.0.0.1:"+tc.up.port()+"/k", "x", "")
			seen := tc.up.take()
			if status != tc.wantStatus || reason != tc.wantReason {
				t.Fatalf("%d %q, want %d %q", status, reason, tc.wantStatus, tc.wantReason)
			}
			if tc.wantStatus != 200 {
				if len(seen) != 0 {
					t.Errorf("a refused call reached upstream: %+v", seen)
				}
				return
			}
			if len(seen) != 1 || seen[0].Key != tc.wantKey {
				t.Errorf("upstream saw %+v, want X-Key %q", seen, tc.wantKey)
			}
		})
	}
	// inject_headers without a host is refused at start.
	var cfg proxy.Config
	cfg.Listen.Forward = "127.0.0.1:0"
	cfg.Tools = []proxy.ToolConfig{{Name: "k", Match: proxy.MatchConfig{Path: "/k"}, InjectHeaders: map[string]string{"X-Key": "v"}}}
	err := cfg.Validate(t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "tools[0].inject_headers: needs match.host") {
		t.Errorf("inject_headers without match.host: %v, want a config error", err)
	}
}

// TestConnectToToolHostAlias checks CONNECT under other names of a tool's
// host: each is the tool's host, so without a CA it is refused (a tunnel
// would skip the checks), and with one it is intercepted and its calls are
// checked. TLS whose server name is a tool's host, inside a tunnel to
// another address, is intercepted too.
func TestConnectToToolHostAlias(t *testing.T) {
	up := newRecUpstream(t)
	noCA := newEnv(t, strings.ReplaceAll(routeConfig, "UPPORT", up.port()))
	for _, host := range []string{"127.0.0.1", "127.1", "0x7f000001", "2130706433", "[::ffff:127.0.0.1]", "LocalHost."} {
		_, resp := rawConnect(t, noCA.srv.Addr("forward", 0), host+":"+up.port())
		var env bucketing.Envelope
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 403 || json.Unmarshal(body, &env) != nil || env.Error == nil || env.Error.Reason != proxy.ReasonNotIntercepted {
			t.Errorf("CONNECT %s: %d %s, want 403 not_intercepted", host, resp.StatusCode, body)
		}
	}

	rig := newTLSRig(t)
	_, tlsPort, _ := net.SplitHostPort(rig.ts.Listener.Addr().String())
	onHost := func(h string) string {
		return strings.ReplaceAll(strings.Replace(baseConfig, hostsPass, "", 1), "host: 127.0.0.1,", "host: "+h+",")
	}
	for _, tc := range []struct {
		name, cfg, connect, sni string
	}{
		// The tools name localhost; the CONNECT names 127.0.0.1. Calls go
		// upstream under the tool's name, localhost, for which the rig's
		// upstream holds no certificate, so this rig skips upstream
		// verification (as the next case does for tool.test).
		{"alias of the tool host", onHost("localhost") + rig.tlsSection("  insecure_skip_verify: true\n"), "127.0.0.1:" + tlsPort, "127.0.0.1"},
		// The tools name tool.test; the CONNECT names an address no tool
		// names, and the TLS inside names tool.test.
		// The CONNECT's address is loopback, which no tool names: the
		// egress guard refuses it unless egress.allow lists it.
		{"sni of a tool host", onHost("tool.test") + rig.tlsSection("  insecure_skip_verify: true\n") + "egress: {allow: [127.0.0.1]}\n", "127.0.0.1:" + tlsPort, "tool.test"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, tc.cfg)
			before := rig.up.TotalHits()
			for i, want := range []int{422, 200} {
				conn := connectTLS(t, e.srv.Addr("forward", 0), tc.connect, &tls.Config{RootCAs: rig.pool, ServerName: tc.sni})
				path := "/esearch?term=x&bogus=1"
				if i == 1 {
					path = "/esearch?term=x"
				}
				fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", path, tc.sni)
				resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				conn.Close()
				if resp.StatusCode != want {
					t.Errorf("%s through CONNECT %s (SNI %s): %d, want %d", path, tc.connect, tc.sni, resp.StatusCode, want)
				}
			}
			if hits := rig.up.TotalHits() - before; hits != 1 {
				t.Errorf("upstream saw %d calls, want only the valid one", hits)
			}
		})
	}
}

// TestDialGuard checks a name that is no tool host but resolves to a
// loopback tool host (the machine's host name often does): a call under it
// that matches no tool would reach the tool's server unchecked, so the
// connection toolgate dials for it is refused, for plain calls and
// CONNECT tunnels alike.
func TestDialGuard(t *testing.T) {
	name, err := os.Hostname()
	if err != nil {
		t.Skip("no host name")
	}
	addrs, err := net.LookupIP(name)
	if err != nil || len(addrs) == 0 || !addrs[0].IsLoopback() {
		t.Skipf("host name %q does not resolve to loopback here (%v %v)", name, addrs, err)
	}
	up := newRecUpstream(t)
	// egress.allow admits loopback, so that the dial guard, not the egress
	// guard, is what refuses the name.
	e := newEnv(t, strings.ReplaceAll(routeConfig, "UPPORT", up.port())+"egress: {allow: [127.0.0.0/8, \"::1\"]}\n")
	for _, tc := range []struct{ method, path, body string }{
		{"POST", "/v1/tools", `{"q":"toolong"}`},
		{"GET", "/admin", ""},
	} {
		status, reason := rawCall(t, e.srv.Addr("forward", 0), tc.method, "http://"+name+":"+up.port()+tc.path, name, tc.body)
		if status != 403 || reason != bucketing.ReasonNotAllowlist {
			t.Errorf("%s %s under %s: %d %q, want 403 not_allowlisted", tc.method, tc.path, name, status, reason)
		}
	}
	// A CONNECT tunnel under the name is cut before any byte goes on.
	raw, resp := rawConnect(t, e.srv.Addr("forward", 0), name+":"+up.port())
	if resp.StatusCode == 200 {
		raw.SetDeadline(time.Now().Add(20 * time.Second))
		fmt.Fprintf(raw, "GET /admin HTTP/1.1\r\nHost: %s\r\n\r\n", name)
		if r, err := http.ReadResponse(bufio.NewReader(raw), nil); err == nil && r.StatusCode == 200 {
			t.Errorf("a call through a CONNECT tunnel under %s was answered 200", name)
		}
	}
	if seen := up.take(); len(seen) != 0 {
		t.Errorf("upstream saw %+v; the guard must stop every call", seen)
	}
}
