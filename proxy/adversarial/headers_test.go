package adversarial_test

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolgate/toolgate/proxy/tlsca"
)

// headerRecorder is an upstream (Go's net/http server) that records the
// headers of every request it serves, by the caller's X-Probe header.
type headerRecorder struct {
	mu     sync.Mutex
	got    map[string]http.Header
	protos map[string]bool // the protocols requests came in
	srv    *httptest.Server
}

func newHeaderRecorder(t *testing.T, useTLS bool) *headerRecorder {
	h := &headerRecorder{got: map[string]http.Header{}, protos: map[string]bool{}}
	h.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.mu.Lock()
		h.got[r.Header.Get("X-Probe")] = r.Header.Clone()
		h.protos[r.Proto] = true
		h.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"ok":1}`))
	}))
	if useTLS {
		h.srv.EnableHTTP2 = true // toolgate's client may speak HTTP/2 to it
		h.srv.StartTLS()
	} else {
		h.srv.Start()
	}
	t.Cleanup(h.srv.Close)
	return h
}

func (h *headerRecorder) authority() string {
	_, p, _ := net.SplitHostPort(h.srv.Listener.Addr().String())
	return "localhost:" + p
}

func (h *headerRecorder) take(probe string) http.Header {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.got[probe]
}

// headerSet is one exact set of request headers a raw client sends, and
// the headers the upstream must receive: the same, but for the hop-by-hop
// ones (those the Connection header names included), Host, and the
// message framing (Content-Length), which are the connection's.
type headerSet struct {
	name   string
	method string
	lines  []string // header lines, without Host and X-Probe
	body   string
	want   []string // header lines the upstream must receive, without X-Probe
}

var headerSets = []headerSet{
	{name: "none", method: "GET", want: nil},
	{name: "json body, no user agent", method: "POST", body: `{"term":"a"}`,
		lines: []string{"Content-Type: application/json"},
		want:  []string{"Content-Type: application/json"}},
	{name: "caller's user agent and repeated headers", method: "GET",
		lines: []string{"User-Agent: legacy-tool/2.1", "Accept: */*", "X-Custom: one", "X-Custom: two", "Accept-Encoding: br", "Accept-Language: de"},
		want:  []string{"User-Agent: legacy-tool/2.1", "Accept: */*", "X-Custom: one", "X-Custom: two", "Accept-Encoding: br", "Accept-Language: de"}},
	// Go's HTTP client cannot write an empty User-Agent line: an empty
	// value goes as no User-Agent at all (docs/security.md says so).
	{name: "empty user agent", method: "GET",
		lines: []string{"User-Agent: ", "Authorization: Bearer caller-token"},
		want:  []string{"Authorization: Bearer caller-token"}},
	{name: "hop-by-hop", method: "GET",
		lines: []string{"Connection: X-Drop, keep-alive", "X-Drop: 1", "Keep-Alive: timeout=5", "Te: trailers", "X-Keep: 1"},
		want:  []string{"X-Keep: 1"}},
}

// render is the raw request: request target tp, Host host, then the set's
// lines and its probe.
func (s headerSet) render(tp, host, probe string) string {
	var b strings.Builder
	q := ""
	if s.method == "GET" {
		q = "?term=a"
	}
	fmt.Fprintf(&b, "%s %s%s HTTP/1.1\r\nHost: %s\r\nX-Probe: %s\r\n", s.method, tp, q, host, probe)
	for _, l := range s.lines {
		b.WriteString(l + "\r\n")
	}
	if s.body != "" {
		fmt.Fprintf(&b, "Content-Length: %d\r\n", len(s.body))
	}
	b.WriteString("\r\n" + s.body)
	return b.String()
}

// received lists the header lines an upstream got, as "Name: value" in
// canonical names, framing and the probe left out, sorted.
func received(h http.Header) []string {
	var out []string
	for k, vs := range h {
		if k == "Content-Length" || k == "X-Probe" {
			continue
		}
		for _, v := range vs {
			out = append(out, k+": "+v)
		}
	}
	slices.Sort(out)
	return out
}

func canonicalLines(lines []string) []string {
	out := make([]string, 0, len(lines))
	for _, l := range lines {
		k, v, _ := strings.Cut(l, ":")
		out = append(out, http.CanonicalHeaderKey(k)+": "+strings.TrimSpace(v))
	}
	slices.Sort(out)
	return out
}

// TestAdversarialHeadersAsSent is the differential on headers: a raw
// client sends exact header sets to a tool through the forward listener,
// the reverse listener, and intercepted TLS (CONNECT, then the request in
// the tunnel), and to a host without tools through the forward listener,
// and the upstream's server records what it received. The
// upstream must get the caller's headers as sent, hop-by-hop headers
// aside: none added by toolgate's HTTP client (no User-Agent:
// Go-http-client/1.1 for a caller that sent none, no Accept-Encoding).
func TestAdversarialHeadersAsSent(t *testing.T) {
	plain, secure, untooled := newHeaderRecorder(t, false), newHeaderRecorder(t, true), newHeaderRecorder(t, false)
	dir := t.TempDir()
	caCert, caKey := filepath.Join(dir, "ca.crt"), filepath.Join(dir, "ca.key")
	if err := tlsca.Create(caCert, caKey, "", 0); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "listen:\n  forward: 127.0.0.1:0\n  reverse:\n    - {listen: \"127.0.0.1:0\", upstream: %q}\ntools:\n", "http://"+plain.authority())
	for _, up := range []*headerRecorder{plain, secure} {
		for _, m := range []string{"GET", "POST"} {
			fmt.Fprintf(&b, "  - name: h_%s_%s\n    match: {host: %q, method: %s, path: /v1/tools}\n    schema: %s\n",
				strings.ReplaceAll(up.authority(), ":", "_"), strings.ToLower(m), up.authority(), m, toolSchema)
		}
	}
	fmt.Fprintf(&b, "tls:\n  ca_cert: %s\n  ca_key: %s\n  insecure_skip_verify: true\nupstream: {dial_timeout: 1s}\n", caCert, caKey)
	// The host without tools is on loopback: egress.allow lets it through.
	b.WriteString("egress: {allow: [127.0.0.1]}\n")
	g, err := startGate(t, b.String())
	if err != nil {
		t.Fatal(err)
	}
	type path struct {
		name string
		up   *headerRecorder
		send func(raw string) (*http.Response, error)
		tp   func() string
		host func() string
	}
	fwd, rev := g.srv.Addr("forward", 0), g.srv.Addr("reverse", 0)
	paths := []path{
		{"forward", plain, func(raw string) (*http.Response, error) { return exchange(fwd, []byte(raw), "GET", 5*time.Second) },
			func() string { return "http://" + plain.authority() + "/v1/tools" }, plain.authority},
		{"reverse", plain, func(raw string) (*http.Response, error) { return exchange(rev, []byte(raw), "GET", 5*time.Second) },
			func() string { return "/v1/tools" }, func() string { return rev }},
		{"forward, host without tools", untooled, func(raw string) (*http.Response, error) { return exchange(fwd, []byte(raw), "GET", 5*time.Second) },
			func() string { return "http://" + untooled.authority() + "/v1/tools" }, untooled.authority},
		{"intercepted TLS", secure, func(raw string) (*http.Response, error) { return inTunnel(fwd, secure.authority(), raw) },
			func() string { return "/v1/tools" }, secure.authority},
	}
	for _, p := range paths {
		for i, s := range headerSets {
			probe := fmt.Sprintf("%s-%d", strings.ReplaceAll(p.name, " ", "-"), i)
			resp, err := p.send(s.render(p.tp(), p.host(), probe))
			if err != nil || resp.StatusCode != http.StatusOK {
				t.Errorf("%s, %s: %v %v", p.name, s.name, resp, err)
				continue
			}
			got := p.up.take(probe)
			if got == nil {
				t.Errorf("%s, %s: the upstream got nothing", p.name, s.name)
				continue
			}
			if g, w := received(got), canonicalLines(s.want); !slices.Equal(g, w) {
				t.Errorf("%s, %s: the upstream received\n  %q\nthe caller sent (hop-by-hop aside)\n  %q", p.name, s.name, g, w)
			}
		}
	}
	t.Logf("the TLS upstream was reached over %v", secure.protos)
}

// inTunnel sends raw inside TLS through a CONNECT to authority on the
// forward proxy at proxyAddr, and reads the answer.
func inTunnel(proxyAddr, authority, raw string) (*http.Response, error) {
	c, err := net.DialTimeout("tcp", proxyAddr, 5*time.Second)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", authority, authority)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil || resp.StatusCode != http.StatusOK {
		return resp, err
	}
	tc := tls.Client(&bufferedConn{Conn: c, r: br}, tlsClientConfig("localhost"))
	if _, err := tc.Write([]byte(raw)); err != nil {
		return nil, err
	}
	return readAnswer(tc, "GET")
}
