package sidecar

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/toolgate/toolgate/cmd/toolgate/internal/config"
	"github.com/toolgate/toolgate/policies/policytest"
	"github.com/toolgate/toolgate/proxy"
	"github.com/toolgate/toolgate/proxy/tlsca"
)

// standInAddr is the loopback address the example configurations' tool
// hosts resolve to in TestEvalAgreesWithSidecar: an address of its own,
// so that its HTTPS stand-in can hold port 443 (the port the tools'
// injected headers are bound to) without meeting another test.
const standInAddr = "127.0.0.61"

// TestEvalAgreesWithSidecar holds `policy eval` to the sidecar: every case
// of the example configurations' case files is decided by proxy.EvaluateAt
// (what `policy eval --url` runs) and sent, as a legacy service would send
// it (through the forward proxy, its arguments where the tool reads them),
// through a live sidecar running the same configuration, loaded as `run`
// loads it, to a stand-in of the tool's upstream. Each call goes twice:
// over HTTPS to the tool's own origin (intercepted with the sidecar's CA)
// and over plain HTTP to another port, where every example tool's injected
// headers make the sidecar refuse it (origin_mismatch), and eval must say
// so too. The two agree when: eval allows ⇔ the stand-in received the
// call (with every header eval says is injected); eval asks for approval
// ⇔ the sidecar answers approval_pending; eval refuses ⇔ the sidecar
// refuses with the same code and reason, and the stand-in received
// nothing.
func TestEvalAgreesWithSidecar(t *testing.T) {
	examples := filepath.Join("..", "..", "..", "..", "examples")
	caseFiles := []string{
		filepath.Join(examples, "policies", "cases", "examples.cases.yaml"),
		filepath.Join(examples, "policies", "cases", "policies-only.cases.yaml"),
	}
	dir := t.TempDir()
	upCA, leaf := standInCerts(t, dir)
	tlsUp, err := net.Listen("tcp", net.JoinHostPort(standInAddr, "443"))
	if err != nil {
		if errors.Is(err, syscall.EACCES) && os.Getenv("CI") == "" {
			t.Skipf("binding %s:443 needs root (CI runs as root): %v", standInAddr, err)
		}
		t.Fatal(err)
	}
	plainUp, err := net.Listen("tcp", net.JoinHostPort(standInAddr, "0"))
	if err != nil {
		t.Fatal(err)
	}
	rec := &received{byID: map[string]http.Header{}}
	for _, ln := range []net.Listener{tls.NewListener(tlsUp, &tls.Config{Certificates: []tls.Certificate{leaf}}), plainUp} {
		srv := &http.Server{Handler: rec, ReadHeaderTimeout: 10 * time.Second}
		go srv.Serve(ln)
		t.Cleanup(func() { srv.Close() })
	}
	_, plainPort, _ := net.SplitHostPort(plainUp.Addr().String())
	mitmCert, mitmKey := filepath.Join(dir, "ca.crt"), filepath.Join(dir, "ca.key")
	if err := tlsca.Create(mitmCert, mitmKey, "toolgate eval differential", time.Hour); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PUBMED_API_KEY", "pubmed-test-key")
	t.Setenv("DOCS_TOKEN", "docs-test-token")

	compared := 0
	for _, cf := range caseFiles {
		file, err := policytest.ReadCaseFile(cf)
		if err != nil {
			t.Fatal(err)
		}
		cfgPath := filepath.Join(filepath.Dir(cf), file.Config)
		sub := filepath.Join(dir, strings.TrimSuffix(filepath.Base(cf), ".cases.yaml"))
		if err := os.Mkdir(sub, 0o755); err != nil {
			t.Fatal(err)
		}
		data := liveConfig(t, cfgPath, sub, mitmCert, mitmKey, upCA)
		lc, err := config.Parse(cfgPath, data)
		if err != nil {
			t.Fatalf("%s, loaded as run loads it: %v", cfgPath, err)
		}
		sc, err := Start(lc, Options{Logger: slog.New(slog.DiscardHandler), EgressResolver: standInResolver{}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			sc.Stop(ctx)
		})
		client := viaSidecar(t, sc.ProxyAddr("forward", 0), mitmCert)
		for i, c := range file.Cases {
			tc := toolNamed(lc, c.Tool)
			if tc == nil || tc.Protocol == "mcp" {
				t.Fatalf("%s: case %q: no HTTP tool %q", cf, c.Name, c.Tool)
			}
			for _, origin := range []struct{ scheme, port string }{{"https", ""}, {"http", plainPort}} {
				id := fmt.Sprintf("%s/%d/%s", filepath.Base(cf), i, origin.scheme)
				req, target := callOf(t, tc, origin.scheme, origin.port, c.Arguments, c.Headers)
				v, err := proxy.EvaluateAt(context.Background(), lc.Snapshot, c.Tool, target, c.JSONArguments, req.Header.Clone())
				if err != nil {
					t.Fatalf("%s: eval: %v", id, err)
				}
				req.Header.Set("X-Diff-Call", id)
				resp, err := client.Do(req)
				if err != nil {
					t.Fatalf("%s: %v", id, err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				got, reached := rec.take(id)
				where := fmt.Sprintf("%s (case %q, %s %s)", id, c.Name, req.Method, target)
				switch {
				case v.Allowed && v.Approval == nil:
					if !reached {
						t.Errorf("%s: eval allows it; the sidecar answered %d %s and upstream got nothing", where, resp.StatusCode, bytesHead(body))
						continue
					}
					for k := range v.Inject {
						if got.Get(k) == "" {
							t.Errorf("%s: eval says %s is injected; upstream got no such header", where, k)
						}
					}
				case v.Allowed:
					if reached || !strings.Contains(string(body), `"approval_pending"`) {
						t.Errorf("%s: eval says it waits for approval; the sidecar answered %d %s (reached upstream: %v)", where, resp.StatusCode, bytesHead(body), reached)
					}
				default:
					var env struct {
						Error struct{ Code, Reason string } `json:"error"`
					}
					json.Unmarshal(body, &env)
					if reached || env.Error.Code != v.Code || env.Error.Reason != v.Reason {
						t.Errorf("%s: eval refuses it %s/%s; the sidecar answered %d %s/%s (reached upstream: %v)", where, v.Code, v.Reason, resp.StatusCode, env.Error.Code, env.Error.Reason, reached)
					}
				}
				compared++
			}
		}
	}
	if compared < 20 {
		t.Fatalf("compared %d calls; the example case files hold more", compared)
	}
	t.Logf("%d calls decided alike by policy eval and the sidecar", compared)
}

// received is the stand-in upstream: the headers of each call it got, by
// the test's call id.
type received struct {
	mu   sync.Mutex
	byID map[string]http.Header
}

func (r *received) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	io.Copy(io.Discard, io.LimitReader(req.Body, 1<<20))
	r.mu.Lock()
	r.byID[req.Header.Get("X-Diff-Call")] = req.Header.Clone()
	r.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	io.WriteString(w, `{"result": "stand-in"}`)
}

// take returns (and forgets) the headers upstream got with the call id.
func (r *received) take(id string) (http.Header, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	h, ok := r.byID[id]
	delete(r.byID, id)
	return h, ok
}

// standInResolver sends every upstream name to the stand-in.
type standInResolver struct{}

func (standInResolver) LookupNetIP(context.Context, string, string) ([]netip.Addr, error) {
	return []netip.Addr{netip.MustParseAddr(standInAddr)}, nil
}

// liveConfig is the configuration at path as a sidecar beside the test
// runs it: its tools, policies, budgets and approvals unchanged; its
// listeners on free loopback ports (the forward proxy only), no admin
// listener, its events and approval requests in dir, and HTTPS
// interception with the test's CA, trusting upCA upstream.
func liveConfig(t *testing.T, path, dir, caCert, caKey, upCA string) []byte {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	root := doc.Content[0]
	set := func(key string, v any) {
		var n yaml.Node
		if err := n.Encode(v); err != nil {
			t.Fatal(err)
		}
		for i := 0; i+1 < len(root.Content); i += 2 {
			if root.Content[i].Value == key {
				root.Content[i+1] = &n
				return
			}
		}
		root.Content = append(root.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: key}, &n)
	}
	has := func(key string) bool {
		for i := 0; i+1 < len(root.Content); i += 2 {
			if root.Content[i].Value == key {
				return true
			}
		}
		return false
	}
	set("listen", map[string]any{"forward": "127.0.0.1:0"})
	set("admin", map[string]any{"listen": "off"})
	set("events", map[string]any{"file": map[string]any{"path": filepath.Join(dir, "events.ndjson")}})
	set("tls", map[string]any{"ca_cert": caCert, "ca_key": caKey, "upstream_ca": []string{upCA}})
	if has("approvals") {
		var a map[string]any
		for i := 0; i+1 < len(root.Content); i += 2 {
			if root.Content[i].Value == "approvals" {
				if err := root.Content[i+1].Decode(&a); err != nil {
					t.Fatal(err)
				}
			}
		}
		a["file"] = filepath.Join(dir, "approvals.ndjson")
		set("approvals", a)
	}
	out, err := yaml.Marshal(&doc)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// toolNamed is the named tool's configuration.
func toolNamed(lc *config.Loaded, name string) *proxy.ToolConfig {
	for i := range lc.Config.Tools {
		if lc.Config.Tools[i].Name == name {
			return &lc.Config.Tools[i]
		}
	}
	return nil
}

var pathVar = regexp.MustCompile(`\{([A-Za-z0-9_]+)\}`)

// callOf is the request a legacy service sends for a call of tc with
// args: the path template filled, the other arguments where the tool
// reads them (the query string for a GET or a tool that reads only the
// query, a form body for one that reads forms, else a JSON body), to the
// tool's host over scheme (port "" for the scheme's default). target is
// the URL, for eval.
func callOf(t *testing.T, tc *proxy.ToolConfig, scheme, port string, args map[string]any, headers map[string]string) (*http.Request, string) {
	t.Helper()
	rest := make(map[string]any, len(args))
	for k, v := range args {
		rest[k] = v
	}
	path := pathVar.ReplaceAllStringFunc(tc.Match.Path, func(m string) string {
		name := m[1 : len(m)-1]
		v := fmt.Sprint(rest[name])
		delete(rest, name)
		return url.PathEscape(v)
	})
	host := tc.Match.Host
	if port != "" {
		host = net.JoinHostPort(host, port)
	}
	method := tc.Match.Method
	if method == "" {
		method = http.MethodPost
	}
	u := &url.URL{Scheme: scheme, Host: host, Path: path}
	var body io.Reader
	ctype := ""
	form := func() url.Values {
		q := url.Values{}
		for k, v := range rest {
			switch v := v.(type) {
			case []any:
				for _, e := range v {
					q.Add(k, fmt.Sprint(e))
				}
			case map[string]any:
				t.Fatalf("tool %s: argument %s is an object; a query or form cannot carry it", tc.Name, k)
			default:
				q.Add(k, fmt.Sprint(v))
			}
		}
		return q
	}
	switch {
	case slices.Contains(tc.Args, "form"):
		body, ctype = strings.NewReader(form().Encode()), "application/x-www-form-urlencoded"
	case slices.Contains(tc.Args, "query") || (len(tc.Args) == 0 && method == http.MethodGet):
		u.RawQuery = form().Encode()
	default:
		b, err := json.Marshal(rest)
		if err != nil {
			t.Fatal(err)
		}
		body, ctype = strings.NewReader(string(b)), "application/json"
	}
	req, err := http.NewRequest(method, u.String(), body)
	if err != nil {
		t.Fatal(err)
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	return req, u.String()
}

// viaSidecar is a client configured as a legacy service is: the sidecar
// as its proxy, the sidecar's CA trusted.
func viaSidecar(t *testing.T, proxyAddr, caCert string) *http.Client {
	t.Helper()
	pem, err := os.ReadFile(caCert)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pem)
	tr := &http.Transport{
		Proxy:           http.ProxyURL(&url.URL{Scheme: "http", Host: proxyAddr}),
		TLSClientConfig: &tls.Config{RootCAs: roots},
	}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}
}

// standInCerts writes a CA (its certificate's path is returned, for the
// sidecar's tls.upstream_ca) and returns a certificate it signed for every
// host the example configurations name, for the stand-in.
func standInCerts(t *testing.T, dir string) (string, tls.Certificate) {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	ca := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "stand-in upstream CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caParsed, _ := x509.ParseCertificate(caDER)
	leafKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	leaf := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "stand-in upstream"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		DNSNames:    []string{"eutils.ncbi.nlm.nih.gov", "alphafold.ebi.ac.uk", "targets.example.org", "docs.googleapis.com", "notes.internal.example"},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	leafDER, err := x509.CreateCertificate(rand.Reader, leaf, caParsed, &leafKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(dir, "upstream-ca.crt")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o644); err != nil {
		t.Fatal(err)
	}
	return caFile, tls.Certificate{Certificate: [][]byte{leafDER}, PrivateKey: leafKey}
}

// bytesHead is the start of an answer, for a failure message.
func bytesHead(b []byte) string {
	if len(b) > 300 {
		b = b[:300]
	}
	return string(b)
}

// TestEvalAgreesWithSidecarMCP is TestEvalAgreesWithSidecar for the
// example MCP route: each case of examples/mcp/files.cases.yaml is decided
// by proxy.EvaluateMCP with the recorded tools/list, and sent as a
// tools/call through a live sidecar running examples/mcp/toolgate.yaml (its
// route pointed at a stand-in MCP server that lists the same tools) as an
// MCP client configured with only a proxy variable sends it. They agree
// when eval allows ⇔ the server received the tools/call, and eval refuses
// ⇔ the sidecar answers with an isError result whose envelope has the
// same code and reason, and the server received no tools/call.
func TestEvalAgreesWithSidecarMCP(t *testing.T) {
	examples := filepath.Join("..", "..", "..", "..", "examples", "mcp")
	file, err := policytest.ReadCaseFile(filepath.Join(examples, "files.cases.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	list, err := os.ReadFile(filepath.Join(examples, "tools-list.json"))
	if err != nil {
		t.Fatal(err)
	}
	var listed struct {
		Result json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal(list, &listed); err != nil || listed.Result == nil {
		t.Fatalf("tools-list.json: %v", err)
	}
	srv := &mcpStandIn{list: listed.Result, calls: map[string]bool{}}
	up, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second}
	go hs.Serve(up)
	t.Cleanup(func() { hs.Close() })

	cfgPath := filepath.Join(examples, file.Config)
	raw, err := os.ReadFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	// The same configuration, its route and reverse upstream pointed at
	// the stand-in's port instead of 3001, and the forward listener on.
	data := strings.ReplaceAll(string(raw), "127.0.0.1:3001", up.Addr().String())
	data = strings.Replace(data, "listen:\n  reverse:", "listen:\n  forward: 127.0.0.1:0\n  reverse:", 1)
	data = strings.Replace(data, "listen: 127.0.0.1:18083", "listen: 127.0.0.1:0", 1)
	dir := t.TempDir()
	data += fmt.Sprintf("admin:\n  listen: \"off\"\nevents:\n  file:\n    path: %s\n", filepath.Join(dir, "events.ndjson"))
	lc, err := config.Parse(cfgPath, []byte(data))
	if err != nil {
		t.Fatalf("%s, loaded as run loads it: %v", cfgPath, err)
	}
	sc, err := Start(lc, Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		sc.Stop(ctx)
	})
	client := &http.Client{
		Transport: &http.Transport{Proxy: http.ProxyURL(&url.URL{Scheme: "http", Host: sc.ProxyAddr("forward", 0)})},
		Timeout:   30 * time.Second,
	}
	endpoint := "http://" + up.Addr().String() + "/mcp"
	for i, c := range file.Cases {
		v, err := proxy.EvaluateMCP(context.Background(), lc.Snapshot, proxy.MCPTools{List: list}, c.Tool, c.JSONArguments, nil)
		if err != nil {
			t.Fatalf("case %q: eval: %v", c.Name, err)
		}
		id := fmt.Sprintf("diff-%d", i)
		msg, _ := json.Marshal(map[string]any{
			"jsonrpc": "2.0", "id": id, "method": "tools/call",
			"params": map[string]any{"name": c.Tool, "arguments": c.Arguments},
		})
		req, _ := http.NewRequest(http.MethodPost, endpoint, strings.NewReader(string(msg)))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("case %q: %v", c.Name, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		reached := srv.took(id)
		var ans struct {
			Result struct {
				IsError bool `json:"isError"`
				Meta    struct {
					Envelope struct {
						Error struct{ Code, Reason string } `json:"error"`
					} `json:"toolgate/envelope"`
				} `json:"_meta"`
			} `json:"result"`
		}
		json.Unmarshal(body, &ans)
		got := ans.Result.Meta.Envelope.Error
		switch {
		case v.Allowed && !reached:
			t.Errorf("case %q: eval allows it; the sidecar answered %d %s and the server got no tools/call", c.Name, resp.StatusCode, bytesHead(body))
		case !v.Allowed && (reached || !ans.Result.IsError || got.Code != v.Code || got.Reason != v.Reason):
			t.Errorf("case %q: eval refuses it %s/%s; the sidecar answered %d %s/%s (server got the call: %v): %s", c.Name, v.Code, v.Reason, resp.StatusCode, got.Code, got.Reason, reached, bytesHead(body))
		}
	}
	t.Logf("%d MCP calls compared", len(file.Cases))
}

// mcpStandIn is a stateless MCP server: it lists the recorded tools and
// answers every tools/call, remembering the ids of those it got.
type mcpStandIn struct {
	list  json.RawMessage
	mu    sync.Mutex
	calls map[string]bool
}

func (s *mcpStandIn) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "POST only", http.StatusMethodNotAllowed)
		return
	}
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&m); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if m.ID == nil {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	var result any
	switch m.Method {
	case "initialize":
		result = map[string]any{"protocolVersion": "2025-06-18", "capabilities": map[string]any{"tools": map[string]any{}}, "serverInfo": map[string]any{"name": "stand-in", "version": "1"}}
	case "tools/list":
		result = s.list
	case "tools/call":
		var id string
		json.Unmarshal(m.ID, &id)
		s.mu.Lock()
		s.calls[id] = true
		s.mu.Unlock()
		result = map[string]any{"content": []any{map[string]any{"type": "text", "text": "done"}}}
	default:
		result = map[string]any{}
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": m.ID, "result": result})
}

// took reports whether the server got the tools/call with id.
func (s *mcpStandIn) took(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[id]
}
