package proxy_test

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolgate/toolgate/bucketing"
	"github.com/toolgate/toolgate/internal/demotools"
	"github.com/toolgate/toolgate/proxy"
	"github.com/toolgate/toolgate/proxy/tlsca"
)

// tlsRig is toolgate's CA, the merged trust bundle a client gets (system
// roots plus the CA, written the way `toolgate ca bundle` writes it), and a
// real TLS upstream serving the demo tools, whose own CA only toolgate
// trusts (tls.upstream_ca).
type tlsRig struct {
	caCert, caKey string // toolgate's CA files
	bundle        string // the merged bundle
	upCA          string // the TLS upstream's certificate, for tls.upstream_ca
	up            *demotools.Server
	ts            *httptest.Server
	pool          *x509.CertPool // the bundle, as a client's only roots
}

func newTLSRig(t testing.TB) *tlsRig {
	t.Helper()
	dir := t.TempDir()
	r := &tlsRig{caCert: filepath.Join(dir, "ca.crt"), caKey: filepath.Join(dir, "ca.key"),
		bundle: filepath.Join(dir, "bundle.pem"), upCA: filepath.Join(dir, "upstream-ca.pem")}
	if err := tlsca.Create(r.caCert, r.caKey, "", 0); err != nil {
		t.Fatal(err)
	}
	roots, err := tlsca.SystemRoots()
	if err != nil {
		t.Fatal(err)
	}
	caPEM, err := os.ReadFile(r.caCert)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := tlsca.WriteBundle(&b, roots, caPEM); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(r.bundle, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	r.pool = x509.NewCertPool()
	if !r.pool.AppendCertsFromPEM(b.Bytes()) {
		t.Fatal("bundle holds no certificate")
	}
	r.up = demotools.New()
	r.ts = httptest.NewUnstartedServer(r.up.Handler())
	r.ts.EnableHTTP2 = true
	r.ts.StartTLS()
	t.Cleanup(r.ts.Close)
	upPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: r.ts.Certificate().Raw})
	if err := os.WriteFile(r.upCA, upPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	return r
}

// tlsSection is the tls section naming the rig's files, plus extra lines.
func (r *tlsRig) tlsSection(extra string) string {
	return fmt.Sprintf("\ntls:\n  ca_cert: %s\n  ca_key: %s\n  upstream_ca: [%s]\n%s", r.caCert, r.caKey, r.upCA, extra)
}

// client is a legacy HTTPS client: a proxy URL, and the bundle as its only
// roots; h2 asks for HTTP/2 inside the tunnel.
func (r *tlsRig) client(e *env, h2 bool) *http.Client {
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		Proxy:             http.ProxyURL(&url.URL{Scheme: "http", Host: e.srv.Addr("forward", 0)}),
		TLSClientConfig:   &tls.Config{RootCAs: r.pool},
		ForceAttemptHTTP2: h2,
	}}
}

// TestHTTPSLikePlain sends the same calls over plain HTTP and over HTTPS
// through the forward proxy (HTTP/1.1 and HTTP/2 inside the tunnel) and
// checks the HTTPS answers and events are those of plain HTTP: refused,
// validated, forwarded and enveloped alike.
func TestHTTPSLikePlain(t *testing.T) {
	rig := newTLSRig(t)
	e := newEnv(t, baseConfig+rig.tlsSection(""))
	const js = "application/json"
	calls := []struct {
		name, method, path, ctype, body string
		hdr                             map[string]string
		wantStatus                      int
		wantCode                        string
	}{
		{"valid, enveloped", "GET", "/esearch?term=crispr&retmax=5", "", "", wantEnvelope, 200, ""},
		{"valid, legacy", "GET", "/v1/structure/P69905", "", "", nil, 200, ""},
		{"typo refused", "GET", "/esearch?term=x&retmx=5", "", "", nil, 422, "validation"},
		{"nested typo refused", "POST", "/v1/documents/d1:batchUpdate", js, `{"requests":[{"insertText":{"txt":"Hello","index":1}}]}`, nil, 422, "validation"},
		{"wrong type refused", "POST", "/v1/targets/search", js, `{"query":"EGFR","limit":"ten"}`, wantEnvelope, 422, "validation"},
		{"upstream 503 bucketed", "GET", "/faults/status/503", "", "", wantEnvelope, 503, "upstream"},
		{"hidden error bucketed", "GET", "/faults/hidden-error", "", "", wantEnvelope, 502, "upstream"},
		{"form call", "POST", "/v1/notes", "application/x-www-form-urlencoded", "title=Plan&tags=a", wantEnvelope, 201, ""},
		{"unmatched passes", "GET", "/faults/text", "", "", nil, 200, ""},
	}
	viaTLS := map[string]*http.Client{"https-h1": rig.client(e, false), "https-h2": rig.client(e, true)}
	for _, c := range calls {
		t.Run(c.name, func(t *testing.T) {
			plain := do(t, e.viaHTTP, c.method, e.up.URL()+c.path, c.ctype, c.body, c.hdr)
			if plain.status != c.wantStatus {
				t.Fatalf("plain: status %d, want %d: %s", plain.status, c.wantStatus, plain.body)
			}
			for name, cl := range viaTLS {
				before := rig.up.TotalHits()
				a := do(t, cl, c.method, rig.ts.URL+c.path, c.ctype, c.body, c.hdr)
				if a.status != plain.status {
					t.Errorf("%s: status %d, plain %d: %s", name, a.status, plain.status, a.body)
				}
				if got, want := a.header.Get(proxy.HeaderErrorCode), plain.header.Get(proxy.HeaderErrorCode); got != want || got != c.wantCode {
					t.Errorf("%s: %s = %q, plain %q, want %q", name, proxy.HeaderErrorCode, got, want, c.wantCode)
				}
				if !bytes.Equal(a.body, plain.body) {
					t.Errorf("%s: body differs from plain HTTP:\n got %s\nwant %s", name, a.body, plain.body)
				}
				hits := rig.up.TotalHits() - before
				if refused := c.wantStatus == 422; refused && hits != 0 || !refused && hits != 1 {
					t.Errorf("%s: upstream saw %d requests (refused calls must see none, others one)", name, hits)
				}
			}
		})
	}
	evs := e.waitEvents(t, 3*len(calls))
	if len(evs) != 3*len(calls) {
		t.Fatalf("%d events for %d calls", len(evs), 3*len(calls))
	}
	// Events come in call order: plain, then the two HTTPS clients in map
	// order; compare each HTTPS event with its plain twin.
	for i := 0; i < len(calls); i++ {
		p := evs[3*i]
		for _, ev := range evs[3*i+1 : 3*i+3] {
			if ev.Tool != p.Tool || ev.ErrorCode != p.ErrorCode || ev.Reason != p.Reason || ev.Refused != p.Refused ||
				ev.OK != p.OK || ev.Envelope != p.Envelope || strings.Join(ev.ViolationPaths, ",") != strings.Join(p.ViolationPaths, ",") {
				t.Errorf("call %q: https event %+v differs from plain %+v", calls[i].name, ev, p)
			}
			if ev.Listener != "forward" || ev.Host != rig.ts.Listener.Addr().String() {
				t.Errorf("call %q: https event listener %q host %q, want forward and %s", calls[i].name, ev.Listener, ev.Host, rig.ts.Listener.Addr())
			}
		}
	}
}

// TestHTTPSValidForwarded checks an intercepted call reaches the TLS
// upstream with the injected header, over a verified connection, and that
// one leaf serves every connection to the host.
func TestHTTPSValidForwarded(t *testing.T) {
	rig := newTLSRig(t)
	e := newEnv(t, withInjection(baseConfig, rig.ts.Listener.Addr().String(), false)+rig.tlsSection(""))
	for i := 0; i < 3; i++ {
		// A fresh client each time: a new CONNECT, a new TLS handshake.
		c := rig.client(e, i%2 == 1)
		a := do(t, c, "GET", rig.ts.URL+"/esearch?term=crispr&retmax=5", "", "", wantEnvelope)
		if a.status != 200 || a.env == nil || !a.env.OK {
			t.Fatalf("call %d: %d %s", i, a.status, a.body)
		}
		if got := rig.up.LastRequest().Header.Get("X-Api-Key"); got != "injected-key" {
			t.Errorf("call %d: upstream got X-Api-Key %q, want the injected key", i, got)
		}
		if got := rig.up.LastRequest().Header.Get(proxy.HeaderEnvelope); got != "" {
			t.Errorf("the envelope header leaked upstream")
		}
	}
	// HTTP/2 is offered inside the tunnel, and taken by a client that asks.
	resp, err := rig.client(e, true).Get(rig.ts.URL + "/esearch?term=x")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.ProtoMajor != 2 {
		t.Errorf("HTTP/2 client got %s inside the tunnel", resp.Proto)
	}
	// The leaf the client saw: minted by toolgate's CA for the host.
	conn := connectTLS(t, e.srv.Addr("forward", 0), rig.ts.Listener.Addr().String(), &tls.Config{RootCAs: rig.pool, ServerName: "127.0.0.1"})
	leaf := conn.ConnectionState().PeerCertificates[0]
	conn.Close()
	ca, _ := os.ReadFile(rig.caCert)
	blk, _ := pem.Decode(ca)
	caCert, _ := x509.ParseCertificate(blk.Bytes)
	if err := leaf.CheckSignatureFrom(caCert); err != nil {
		t.Errorf("leaf not signed by toolgate's CA: %v", err)
	}
	if len(leaf.IPAddresses) != 1 || leaf.IPAddresses[0].String() != "127.0.0.1" || len(leaf.DNSNames) != 0 {
		t.Errorf("leaf SAN = %v %v, want IP 127.0.0.1", leaf.DNSNames, leaf.IPAddresses)
	}
	if life := leaf.NotAfter.Sub(leaf.NotBefore); life > 26*time.Hour {
		t.Errorf("leaf valid for %v; leaves are short-lived", life)
	}
}

// connectTLS opens a CONNECT tunnel through the forward proxy and completes
// a TLS handshake in it.
func connectTLS(t *testing.T, proxyAddr, target string, cfg *tls.Config) *tls.Conn {
	t.Helper()
	raw, resp := rawConnect(t, proxyAddr, target)
	if resp.StatusCode != 200 {
		t.Fatalf("CONNECT %s: %d", target, resp.StatusCode)
	}
	tc := tls.Client(raw, cfg)
	if err := tc.Handshake(); err != nil {
		t.Fatalf("handshake through CONNECT %s: %v", target, err)
	}
	return tc
}

// rawConnect sends a CONNECT and reads the answer.
func rawConnect(t *testing.T, proxyAddr, target string) (net.Conn, *http.Response) {
	t.Helper()
	raw, err := net.Dial("tcp", proxyAddr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { raw.Close() })
	fmt.Fprintf(raw, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
	br := bufio.NewReader(raw)
	resp, err := http.ReadResponse(br, &http.Request{Method: "CONNECT"})
	if err != nil {
		t.Fatal(err)
	}
	if br.Buffered() > 0 && resp.StatusCode == 200 {
		t.Fatalf("proxy sent %d bytes after its CONNECT answer", br.Buffered())
	}
	return raw, resp
}

// TestConnectOtherHosts checks CONNECT to a host no tool matches: tunnelled
// untouched under unmatched: pass (the client sees upstream's own
// certificate), refused with the envelope under deny; and a host with tool
// routes but no CA configured: refused, never tunnelled past the checks.
func TestConnectOtherHosts(t *testing.T) {
	rig := newTLSRig(t)
	_, port, _ := net.SplitHostPort(rig.ts.Listener.Addr().String())
	// The tools here match 127.0.0.1 on port 1 only, so no tool matches
	// the TLS upstream's port under any loopback name.
	other := "localhost:" + port
	onPort1 := strings.ReplaceAll(strings.Replace(baseConfig, hostsPass, "", 1), "host: 127.0.0.1,", `host: "127.0.0.1:1",`)

	pass := newEnv(t, onPort1+rig.tlsSection("")+"egress: {allow: [127.0.0.1]}\n")
	upPool := x509.NewCertPool()
	upPool.AddCert(rig.ts.Certificate())
	tc := connectTLS(t, pass.srv.Addr("forward", 0), other, &tls.Config{RootCAs: upPool, ServerName: "example.com"})
	if !tc.ConnectionState().PeerCertificates[0].Equal(rig.ts.Certificate()) {
		t.Errorf("a tunnelled connection must show upstream's own certificate")
	}
	tc.Close()

	deny := newEnv(t, onPort1+rig.tlsSection("")+"\nunmatched: deny\n")
	noCA := newEnv(t, baseConfig)
	for _, tc := range []struct {
		name       string
		e          *env
		target     string
		wantReason string
	}{
		{"deny, no tool", deny, other, "not_allowlisted"},
		{"tool host, no CA", noCA, rig.ts.Listener.Addr().String(), proxy.ReasonNotIntercepted},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, resp := rawConnect(t, tc.e.srv.Addr("forward", 0), tc.target)
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
			var env bucketing.Envelope
			if resp.StatusCode != 403 || json.Unmarshal(body, &env) != nil || env.Error == nil {
				t.Fatalf("CONNECT %s: %d %s, want 403 and an envelope", tc.target, resp.StatusCode, body)
			}
			if env.Error.Code != "policy" || env.Error.Reason != tc.wantReason || resp.Header.Get(proxy.HeaderErrorCode) != "policy" {
				t.Errorf("refusal = %s/%s (%s), want policy/%s", env.Error.Code, env.Error.Reason, env.Error.Detail, tc.wantReason)
			}
		})
	}
	hits := rig.up.TotalHits()
	if hits != 0 {
		t.Errorf("upstream saw %d requests; none was sent", hits)
	}
	evs := pass.waitEvents(t, 1)
	if len(evs) != 1 || evs[0].Listener != "connect" || evs[0].Reason != "tunnel" || !evs[0].OK {
		t.Errorf("pass events = %+v, want one tunnel", evs)
	}
	for name, e := range map[string]*env{"deny": deny, "noCA": noCA} {
		evs := e.waitEvents(t, 1)
		if len(evs) != 1 || evs[0].Listener != "connect" || !evs[0].Refused || evs[0].ErrorCode != "policy" {
			t.Errorf("%s events = %+v, want one refused CONNECT", name, evs)
		}
	}
}

// TestHTTPSUpstreamVerified checks upstream certificates are verified: an
// upstream whose CA toolgate does not trust fails as upstream/tls, and
// tls.insecure_skip_verify (for test rigs) lets it through.
func TestHTTPSUpstreamVerified(t *testing.T) {
	rig := newTLSRig(t)
	section := fmt.Sprintf("\ntls:\n  ca_cert: %s\n  ca_key: %s\n", rig.caCert, rig.caKey)
	strict := newEnv(t, baseConfig+section)
	a := do(t, rig.client(strict, false), "GET", rig.ts.URL+"/esearch?term=x", "", "", wantEnvelope)
	if a.status != 502 || a.env == nil || a.env.Error == nil || a.env.Error.Reason != "tls" {
		t.Errorf("untrusted upstream: %d %s, want 502 upstream/tls", a.status, a.body)
	}
	loose := newEnv(t, baseConfig+section+"  insecure_skip_verify: true\n")
	a = do(t, rig.client(loose, false), "GET", rig.ts.URL+"/esearch?term=x", "", "", wantEnvelope)
	if a.status != 200 {
		t.Errorf("insecure_skip_verify: %d %s, want 200", a.status, a.body)
	}
}

// TestHTTPSCurl drives the forward proxy with curl, trusting only the
// bundle: a typo refused with the envelope, a valid call forwarded.
func TestHTTPSCurl(t *testing.T) {
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Skip("curl not installed (scripts/testdeps.sh installs it)")
	}
	rig := newTLSRig(t)
	e := newEnv(t, baseConfig+rig.tlsSection(""))
	fwd := "http://" + e.srv.Addr("forward", 0)
	for _, tc := range []struct {
		name, path, flag string
		wantStatus       string
		wantBody         string
	}{
		{"typo, http/1.1", "/esearch?term=x&retmx=5", "--http1.1", "422", `"reason":"unknown_field"`},
		{"typo, http/2", "/esearch?term=x&retmx=5", "--http2", "422", `"reason":"unknown_field"`},
		{"valid", "/esearch?term=crispr&retmax=2", "--http1.1", "200", `"esearchresult"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(curl, "-sS", tc.flag, "--cacert", rig.bundle, "-x", fwd,
				"-w", "\n%{http_code}", rig.ts.URL+tc.path)
			cmd.Env = []string{"PATH=/usr/bin:/bin"} // no proxy variables, no other trust store
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("curl: %v: %s", err, out)
			}
			i := strings.LastIndexByte(string(out), '\n')
			body, status := string(out[:max(i, 0)]), string(out[i+1:])
			if status != tc.wantStatus || !strings.Contains(body, tc.wantBody) {
				t.Errorf("curl %s: status %s body %s, want %s and %s", tc.path, status, body, tc.wantStatus, tc.wantBody)
			}
		})
	}
	if evs := e.waitEvents(t, 3); len(evs) != 3 {
		t.Errorf("%d events for 3 calls", len(evs))
	}
}

// TestHTTPSHammer runs many concurrent HTTPS calls on fresh connections
// through one CONNECT host: each gets its answer, there is one event per
// call, and the host's leaf is minted once.
func TestHTTPSHammer(t *testing.T) {
	rig := newTLSRig(t)
	cfgText := baseConfig + rig.tlsSection("")
	e := newEnv(t, cfgText)
	const workers, per = 8, 10
	var wg sync.WaitGroup
	errc := make(chan error, workers*per)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < per; i++ {
				c := rig.client(e, (w+i)%2 == 0)
				c.Transport.(*http.Transport).DisableKeepAlives = true
				path := "/esearch?term=x&retmax=3"
				want := 200
				if i%3 == 0 {
					path, want = "/esearch?term=x&retmx=3", 422
				}
				resp, err := c.Get(rig.ts.URL + path)
				if err != nil {
					errc <- err
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != want {
					errc <- fmt.Errorf("%s: %d, want %d", path, resp.StatusCode, want)
				}
			}
		}(w)
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Error(err)
	}
	if evs := e.waitEvents(t, workers*per); len(evs) != workers*per {
		t.Errorf("%d events for %d calls", len(evs), workers*per)
	}
	if n := metricValue(t, e.srv, "toolgate_proxy_leaf_certs_minted_total", nil); n != 1 {
		t.Errorf("%v leaves minted for one host over %d connections, want 1", n, workers*per)
	}
	if n := metricValue(t, e.srv, "toolgate_proxy_intercept_connections_total", map[string]string{"listener": "forward", "outcome": "intercepted"}); n != workers*per {
		t.Errorf("%v intercepted connections counted, want %d", n, workers*per)
	}
}

// metricValue gathers one series of a collector, labels selecting it; 0
// when it does not exist (yet).
func metricValue(t *testing.T, c prometheus.Collector, name string, labels map[string]string) float64 {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if v, ok := labels[lp.GetName()]; ok && v != lp.GetValue() {
					continue next
				}
			}
			if m.Counter != nil {
				return m.Counter.GetValue()
			}
			return m.Gauge.GetValue()
		}
	}
	return 0 // a labelled series appears with its first observation
}

// BenchmarkProxyHTTPS compares one keep-alive HTTPS connection straight to
// the TLS upstream with the same validated call intercepted through the
// forward proxy, and the cost of a new intercepted connection (CONNECT and
// a TLS handshake with a cached leaf) per call.
func BenchmarkProxyHTTPS(b *testing.B) {
	rig := newTLSRig(b)
	e := newEnvTo(b, benchConfig+rig.tlsSection(""), nil, nil, nil, time.Second)
	upPool := x509.NewCertPool()
	upPool.AddCert(rig.ts.Certificate())
	direct := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: upPool}}}
	for _, tc := range []struct {
		name   string
		client func() *http.Client
		fresh  bool
	}{
		{"direct", func() *http.Client { return direct }, false},
		{"intercepted", func() *http.Client { return rig.client(e, false) }, false},
		{"intercepted-new-conn", func() *http.Client { return rig.client(e, false) }, true},
	} {
		b.Run(tc.name, func(b *testing.B) {
			c := tc.client()
			path := "/bench/validated"
			if tc.name == "direct" {
				path = "/bench/direct"
			}
			b.ResetTimer()
			for b.Loop() {
				if tc.fresh {
					c = tc.client()
				}
				resp, err := c.Post(rig.ts.URL+path, "application/json", strings.NewReader(benchBody))
				if err != nil {
					b.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					b.Fatalf("status %d", resp.StatusCode)
				}
				if tc.fresh {
					c.CloseIdleConnections()
				}
			}
		})
	}
}

// TestHTTPSUntrustingClient checks a client that does not trust toolgate's
// CA fails its handshake, and nothing reaches upstream: the handshake
// failure is counted, and there is no call to record.
func TestHTTPSUntrustingClient(t *testing.T) {
	rig := newTLSRig(t)
	e := newEnv(t, baseConfig+rig.tlsSection(""))
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		Proxy: http.ProxyURL(&url.URL{Scheme: "http", Host: e.srv.Addr("forward", 0)}),
		// The system roots only: toolgate's CA is not among them.
	}}
	_, err := c.Get(rig.ts.URL + "/esearch?term=x")
	var uerr x509.UnknownAuthorityError
	if err == nil || !errors.As(err, &uerr) {
		t.Fatalf("err = %v, want an unknown authority", err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for metricValue(t, e.srv, "toolgate_proxy_intercept_connections_total", map[string]string{"listener": "forward", "outcome": "handshake_failed"}) != 1 {
		if time.Now().After(deadline) {
			t.Fatal("the failed handshake was not counted")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if rig.up.TotalHits() != 0 {
		t.Errorf("upstream saw %d requests", rig.up.TotalHits())
	}
	if evs := e.readEvents(t); len(evs) != 0 {
		t.Errorf("events = %+v, want none: no call was made", evs)
	}
}
