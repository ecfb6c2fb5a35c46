package adversarial_test

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/proxy/tlsca"
)

// connectAttack is a CONNECT through the forward listener, then (unless
// inner is empty) a TLS handshake with SNI and one request inside.
type connectAttack struct {
	name    string
	point   string
	control bool   // a valid call: it must reach the tool's handler, checked, with the tool's secret
	connect string // the CONNECT authority ({PORT}: the TLS upstream's port)
	sni     string // "" sends no SNI
	inner   string // the request inside the tunnel, without traceparent and the final CRLF; "" for none
	// failed: the CONNECT's dial must fail, and its event must say so.
	failed bool
}

// innerPost is a POST with a bad JSON body for the tools' path on host.
func innerPost(host, body string) string {
	return "POST /v1/tools HTTP/1.1\r\nHost: " + host + "\r\nContent-Type: application/json\r\nContent-Length: " +
		fmt.Sprint(len(body)) + "\r\nConnection: close\r\n" + "\r\n" + body
}

var connectAttacks = []connectAttack{
	{name: "connect-control-valid", point: "control", control: true, connect: "localhost:{PORT}", sni: "localhost", inner: innerPost("localhost:{PORT}", goodJSON)},
	{name: "connect-control-bad", point: "control", connect: "localhost:{PORT}", sni: "localhost", inner: innerPost("localhost:{PORT}", badJSON)},
	{name: "connect-ip-alias-sni-tool-host", point: "3", connect: "127.0.0.1:{PORT}", sni: "localhost", inner: innerPost("localhost:{PORT}", badJSON)},
	{name: "connect-ip-alias-no-sni", point: "3", connect: "127.0.0.1:{PORT}", inner: innerPost("127.0.0.1:{PORT}", badJSON)},
	{name: "connect-ipv4-mapped-ipv6", point: "3", connect: "[::ffff:127.0.0.1]:{PORT}", sni: "localhost", inner: innerPost("localhost:{PORT}", badJSON)},
	{name: "connect-upper-case-host", point: "v", connect: "LOCALHOST:{PORT}", sni: "localhost", inner: innerPost("localhost:{PORT}", badJSON)},
	{name: "connect-trailing-dot", point: "v", connect: "localhost.:{PORT}", sni: "localhost", inner: innerPost("localhost:{PORT}", badJSON)},
	{name: "connect-tool-host-inner-host-alias", point: "v", connect: "localhost:{PORT}", sni: "localhost", inner: innerPost("127.0.0.1:{PORT}", badJSON)},
	// 192.0.2.1 (TEST-NET-1) is no tool's host under any name, and nothing
	// answers there: the dial fails (at the gate's 1s dial timeout at most).
	{name: "connect-dial-fails", point: "7", connect: "192.0.2.1:9", sni: "unreachable.example", failed: true},
}

// TestAdversarialTLS attacks a tool on an HTTPS upstream through CONNECT:
// other names for its host in the CONNECT and in the SNI must not tunnel
// past the checks, the tool's injected secret reaches its own origin (the
// control) and no other, and a CONNECT whose dial fails is recorded as a
// failure.
func TestAdversarialTLS(t *testing.T) {
	w := shared(t)
	g := startTLSGate(t, w)
	forward := g.srv.Addr("forward", 0)
	o := newOracle(t)
	rep := newReport()
	for _, a := range connectAttacks {
		t.Run(a.name, func(t *testing.T) {
			j := &judge{t: t, g: g, o: o, w: w, secrets: map[string]string{"secret-tls": w.tls.origin()}}
			expand := strings.NewReplacer("{PORT}", w.tls.port).Replace
			trace, tp := newTrace()
			resp, err := sendConnect(forward, expand(a.connect), a.sni, expand(a.inner), tp)
			v := j.verdict(trace, resp, err)
			if a.failed {
				if msg := connectFailureRecorded(t, g, trace); msg != "" {
					v.leaks = append(v.leaks, msg)
					v.outcome = outLeaked
				}
			}
			rep.add(t, a.name, a.point, "tls/forward/"+a.connect, v)
			if a.control && (v.reached == 0 || !v.mediated) {
				t.Errorf("control got %s (%s), want it inspected and forwarded to the tool's handler", v.outcome, strings.Join(v.notes, "; "))
			}
		})
	}
	t.Run("secret-reaches-own-origin", func(t *testing.T) {
		// The control's secret must have arrived: else the secret checks
		// above prove nothing.
		trace, tp := newTrace()
		resp, err := sendConnect(forward, w.tls.authority(), "localhost", innerPost(w.tls.authority(), goodJSON), tp)
		if err != nil {
			t.Fatal(err)
		}
		hs, err := w.tls.take()
		if err != nil {
			t.Fatal(err)
		}
		if len(hs) != 1 || hs[0].Secret != "secret-tls" || traceOf(hs[0].Trace) != trace {
			t.Errorf("answer %d; the tool's HTTPS upstream got %+v, want one call with the tool's secret", resp.StatusCode, hs)
		}
	})
	rep.print(t, "TestAdversarialTLS")
}

// connectFailureRecorded waits (generously: the dial times out first) for
// the event of a CONNECT whose dial failed, and says what is wrong with it:
// "" when it was recorded as the failure it is.
func connectFailureRecorded(t *testing.T, g *gate, trace string) string {
	deadline := time.Now().Add(15 * time.Second)
	for {
		g.read(t)
		for _, e := range g.byTrace(trace) {
			if e.Listener != "connect" {
				continue
			}
			if e.OK {
				return "a CONNECT whose dial failed was recorded as ok"
			}
			return ""
		}
		if time.Now().After(deadline) {
			return "a CONNECT whose dial failed was not recorded"
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// startTLSGate starts a gate with a CA whose tools (tls_get, tls_post)
// are on the HTTPS upstream and inject the secret secret-tls.
func startTLSGate(t *testing.T, w *world) *gate {
	t.Helper()
	dir := t.TempDir()
	caCert, caKey := filepath.Join(dir, "ca.crt"), filepath.Join(dir, "ca.key")
	if err := tlsca.Create(caCert, caKey, "", 0); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	b.WriteString("listen:\n  forward: 127.0.0.1:0\ntools:\n")
	for _, m := range []string{"GET", "POST"} {
		fmt.Fprintf(&b, "  - name: tls_%s\n    match: {host: %q, method: %s, path: /v1/tools}\n    schema: %s\n    inject_headers: {X-Api-Key: secret-tls}\n",
			strings.ToLower(m), w.tls.authority(), m, toolSchema)
	}
	// The rig's upstream certificate names 127.0.0.1 and example.com, not
	// localhost: the gate skips verifying it (a test rig's setting).
	fmt.Fprintf(&b, "tls:\n  ca_cert: %s\n  ca_key: %s\n  insecure_skip_verify: true\nupstream: {dial_timeout: 1s}\n", caCert, caKey)
	g, err := startGate(t, b.String())
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// TestAdversarialHTTP2 sends the legacy-client attacks over HTTP/2 inside
// intercepted TLS (a CONNECT through the forward listener, ALPN h2), where
// the method, path and headers arrive as HTTP/2 fields rather than a
// request line.
func TestAdversarialHTTP2(t *testing.T) {
	w := shared(t)
	g := startTLSGate(t, w)
	j := &judge{g: g, o: newOracle(t), w: w, secrets: map[string]string{"secret-tls": w.tls.origin()}}
	tr := &http.Transport{
		Proxy:             http.ProxyURL(&url.URL{Scheme: "http", Host: g.srv.Addr("forward", 0)}),
		TLSClientConfig:   tlsClientConfig(""),
		ForceAttemptHTTP2: true,
	}
	t.Cleanup(tr.CloseIdleConnections)
	cl := &http.Client{Timeout: 10 * time.Second, Transport: tr}
	c := cell{up: w.tls, listener: "forward", mode: "pass", addr: g.srv.Addr("forward", 0)}
	rep := newReport()
	for _, a := range clientAttacks {
		if a.forward {
			continue // they name a plain-HTTP host
		}
		t.Run(a.name, func(t *testing.T) {
			j.t = t
			req, err := a.build(c, "https://"+w.tls.authority())
			if err != nil {
				t.Fatal(err)
			}
			trace, tp := newTrace()
			req.Header.Set("Traceparent", tp)
			resp, err := cl.Do(req)
			if err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.Proto != "HTTP/2.0" {
					t.Errorf("answer over %s, want HTTP/2.0 inside the tunnel", resp.Proto)
				}
			}
			v := j.verdict(trace, resp, err)
			rep.add(t, a.name, a.point, "tls/h2/pass", v)
			if a.control && (v.reached == 0 || !v.mediated) {
				t.Errorf("control got %s (%s), want it inspected and forwarded to the tool's handler", v.outcome, strings.Join(v.notes, "; "))
			}
		})
	}
	rep.print(t, "TestAdversarialHTTP2")
}

// sendConnect opens a CONNECT tunnel to authority through the forward
// proxy at proxyAddr and, when inner is set, sends inner in TLS (SNI sni)
// with the traceparent tp. It returns the inner answer, or the CONNECT's
// own when the tunnel was refused or inner is empty (with sni set, a TLS
// handshake is still begun, so a proxy that waits for a ClientHello gets
// one).
func sendConnect(proxyAddr, authority, sni, inner, tp string) (*http.Response, error) {
	c, err := net.DialTimeout("tcp", proxyAddr, 5*time.Second)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\nTraceparent: %s\r\n\r\n", authority, authority, tp)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil || resp.StatusCode != http.StatusOK || (inner == "" && sni == "") {
		return resp, err
	}
	tc := tls.Client(&bufferedConn{Conn: c, r: br}, tlsClientConfig(sni))
	herr := tc.Handshake()
	if inner == "" {
		return resp, nil // the ClientHello was sent: what became of it is in the events
	}
	if herr != nil {
		return nil, fmt.Errorf("handshake in the tunnel: %w", herr)
	}
	i := strings.Index(inner, "\r\n")
	if _, err := tc.Write([]byte(inner[:i+2] + "Traceparent: " + tp + "\r\n" + inner[i+2:])); err != nil {
		return nil, err
	}
	return readAnswer(tc, "POST")
}

// bufferedConn reads what the CONNECT answer's reader already buffered
// before the connection itself.
type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (b *bufferedConn) Read(p []byte) (int, error) { return b.r.Read(p) }

// secretConfigs are tools that inject a secret with a match that names no
// port, or no host: the secret's only origin is https on the scheme's
// default port of the host, or none at all (toolgate refuses such a tool
// at load). The upstreams are plain HTTP on other ports: no call may carry
// the secret to them.
var secretConfigs = []struct {
	name, match, origin string
}{
	{"inject-host-without-port", `{host: localhost, method: GET, path: /v1/secret}`, "https://localhost:443"},
	{"inject-without-host", `{method: GET, path: /v1/secret}`, ""},
}

// TestAdversarialSecrets checks point 5 of issue 13: an injected secret
// goes only to its tool's own origin (scheme, host and port), never to
// another port of the host, another host, or over plain HTTP, whichever
// listener the caller uses.
func TestAdversarialSecrets(t *testing.T) {
	w := shared(t)
	o := newOracle(t)
	rep := newReport()
	for _, sc := range secretConfigs {
		t.Run(sc.name, func(t *testing.T) {
			var b strings.Builder
			b.WriteString("listen:\n  forward: 127.0.0.1:0\n  reverse:\n")
			for _, u := range w.ups {
				fmt.Fprintf(&b, "    - {listen: \"127.0.0.1:0\", upstream: %q}\n", u.origin())
			}
			fmt.Fprintf(&b, "tools:\n  - name: secret\n    match: %s\n    inject_headers: {X-Api-Key: secret-%s}\n", sc.match, sc.name)
			g, err := startGate(t, b.String())
			if err != nil {
				t.Logf("toolgate refused the configuration: %v", err)
				rep.add(t, sc.name, "5", "config", verdict{outcome: outRefused, notes: []string{"refused at load"}})
				return
			}
			j := &judge{t: t, g: g, o: o, w: w, secrets: map[string]string{"secret-" + sc.name: sc.origin}}
			for _, c := range cells(g, w, "pass") {
				trace, tp := newTrace()
				raw, method := rawReq{method: "GET", target: "/v1/secret?term=x"}.render(c, tp)
				resp, err := exchange(c.addr, raw, method, 5*time.Second)
				rep.add(t, sc.name, "5", c.String(), j.verdict(trace, resp, err))
			}
		})
	}
	rep.print(t, "TestAdversarialSecrets")
}
