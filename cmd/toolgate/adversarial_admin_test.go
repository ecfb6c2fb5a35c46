package main

// The adversarial group for deciders and the admin listener (issue 38,
// classes 2 and 6): what the agent, a process on the sidecar's host, or a
// web page an operator opens can send to the dashboard's decision form and
// to the admin listener. Every attack is judged by the process's state,
// never by toolgate's answer: was a decision recorded (toolgate approvals
// list) and honoured (did the real upstream execute the call), did a reload
// happen (the reload counters of /status).

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
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/chtest"
	"github.com/toolgate/toolgate/internal/demotools"
	"github.com/toolgate/toolgate/internal/frontjwt/frontjwttest"
)

// attackTally counts a group's attacks for its closing log line.
type attackTally struct{ tried, refused, changed int }

func (a *attackTally) report(t *testing.T, group string) {
	t.Logf("%s: %d attacks tried, %d refused, %d changed state", group, a.tried, a.refused, a.changed)
	if a.changed != 0 {
		t.Errorf("%s: %d attacks changed state, want 0", group, a.changed)
	}
}

// decidersConfig is a sidecar (events in ClickHouse, approvals in a file
// both the sidecar and the dashboard read) whose deciders are DECIDERS.
const decidersConfig = `events:
  queue: {flush_interval: 20ms}
  clickhouse: {addr: [CH], database: DB}
approvals:
  store: file
  file: approvals.ndjson
  deciders:
DECIDERS
`

// TestAdversarialDeciders attacks the dashboard's decision form as the
// agent would, from the sidecar's host: with the trusted header alone (the
// dashboard refuses to start on TCP), with every forgery of the front's
// JWT, with a valid identity but without the form's CSRF token or from
// another site. After every attack the pending call is retried through the
// sidecar: it must still be refused, the upstream must not have run it,
// and the store must hold no decision. Then the front's real token with
// the page's token decides, and the call runs upstream once.
func TestAdversarialDeciders(t *testing.T) {
	t.Parallel()
	ch := chtest.Shared(t)
	up, err := demotools.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()
	front := frontjwttest.New(t, "https://front.example", "toolgate-dashboard")
	const route = "POST /v1/documents/{doc_id}:batchUpdate"
	var tally attackTally

	configure := func(t *testing.T, db, deciders string) string {
		dir := approvalSidecarDir(t, strings.NewReplacer("CH", ch.Addr(), "DB", db, "DECIDERS", deciders).Replace(decidersConfig))
		writeFile(t, filepath.Join(dir, "jwks.json"), string(front.JWKS(t)))
		return dir
	}

	t.Run("trusted header alone on a TCP listener", func(t *testing.T) {
		dir := configure(t, "dec_header", "    trusted_header: X-Forwarded-User")
		cfg := filepath.Join(dir, "toolgate.yaml")
		for _, listen := range []string{"127.0.0.1:0", "[::1]:0"} {
			tally.tried++
			var out, errb strings.Builder
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			code := run(ctx, []string{"dashboard", "--config", cfg, "--listen", listen}, &out, &errb)
			cancel()
			line := lineOf(t, cfg, "trusted_header")
			want := fmt.Sprintf("%s:%d: approvals.deciders.trusted_header:", cfg, line)
			if code == 0 || strings.Contains(out.String(), "http://") {
				tally.changed++
				t.Errorf("--listen %s: the dashboard started (exit %d) with a header anyone on the host can send:\n%s%s", listen, code, out.String(), errb.String())
				continue
			}
			tally.refused++
			if !strings.Contains(errb.String(), want) || !strings.Contains(errb.String(), "approvals.deciders.jwt") || !strings.Contains(errb.String(), "unix:") {
				t.Errorf("--listen %s: the error does not name the field, its line and what to add (want %q):\n%s", listen, want, errb.String())
			}
		}
	})

	t.Run("front JWT", func(t *testing.T) {
		dir := configure(t, "dec_jwt", `    trusted_header: X-Forwarded-User
    jwt: {jwks_file: jwks.json, issuer: "https://front.example", audience: toolgate-dashboard}`)
		cfg := filepath.Join(dir, "toolgate.yaml")
		sc := startRun(t, dir, string(mustRead(t, cfg)))
		l := sc.running(t)
		defer sc.stop(t)
		status, env := editVia(t, l.Forward, up.URL(), "words")
		if status != 403 || env.Error.Approval == nil {
			t.Fatalf("first call: %d %+v", status, env.Error)
		}
		id := env.Error.Approval.ID
		out, stop := startCmd(t, "dashboard", "--config", cfg, "--listen", "127.0.0.1:0")
		defer stop()
		base := waitURL(t, out)
		// The strongest attacker holds a session and the form's token, as
		// the operator's own browser does (the page shows its form only
		// to a verified identity).
		signedIn := front.Sign(t, front.Claims("dana@example.com", 5*time.Minute))
		client, csrf := pageSession(t, base, "Authorization", "Bearer "+signedIn)
		_, otherCSRF := pageSession(t, base, "Authorization", "Bearer "+signedIn)
		if st, body := getBody(t, base+"approvals"); st != 200 || strings.Contains(body, `name="csrf"`) {
			t.Errorf("the page without the front's identity: %d, and it shows a decision form", st)
		}

		undecided := func(t *testing.T, attack string) {
			t.Helper()
			tally.tried++
			changed := false
			if status, _ := editVia(t, l.Forward, up.URL(), "words"); status != 403 {
				changed = true
				t.Errorf("%s: the retried call answered %d, want 403 pending", attack, status)
			}
			if n := up.Hits(route); n != 0 {
				changed = true
				t.Errorf("%s: the upstream ran the call %d times", attack, n)
			}
			if code, list := approvalsCmd(t, cfg, "list", "--json"); code != 0 || !strings.Contains(list, `"state":"pending"`) || strings.Contains(list, `"decider"`) && strings.Contains(list, `"verdict":"approved"`) {
				changed = true
				t.Errorf("%s: the store holds a decision (exit %d):\n%s", attack, code, list)
			}
			if changed {
				tally.changed++
			} else {
				tally.refused++
			}
		}
		good := front.Claims("dana@example.com", 5*time.Minute)
		with := func(k string, v any) map[string]any {
			c := front.Claims("dana@example.com", 5*time.Minute)
			c[k] = v
			return c
		}
		decide := func(hdr map[string]string, token string) int {
			t.Helper()
			form := url.Values{"id": {id}, "verdict": {"approved"}}
			if token != "" {
				form.Set("csrf", token)
			}
			req, _ := http.NewRequest("POST", base+"approvals/decide", strings.NewReader(form.Encode()))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			for k, v := range hdr {
				req.Header.Set(k, v)
			}
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			return resp.StatusCode
		}
		bearer := func(tok string) map[string]string { return map[string]string{"Authorization": "Bearer " + tok} }
		for _, a := range []struct {
			name  string
			hdr   map[string]string
			token string
		}{
			{"header only, from loopback", map[string]string{"X-Forwarded-User": "anyone"}, csrf},
			{"token signed by another key under the front's kid", bearer(front.SignWithOtherKey(t, good)), csrf},
			{"expired token", bearer(front.Sign(t, with("exp", time.Now().Add(-time.Hour).Unix()))), csrf},
			{"token for another audience", bearer(front.Sign(t, with("aud", "grafana"))), csrf},
			{"token from another issuer", bearer(front.Sign(t, with("iss", "https://evil.example"))), csrf},
			{"alg none", bearer(front.Unsigned(t, good)), csrf},
			{"HS256 keyed with the front's public key", bearer(front.HMACWithPublicKey(t, good)), csrf},
			{"valid token, header naming someone else", map[string]string{"Authorization": "Bearer " + front.Sign(t, good), "X-Forwarded-User": "mallory"}, csrf},
			{"valid token, no CSRF token", bearer(front.Sign(t, good)), ""},
			{"valid token, another session's CSRF token", bearer(front.Sign(t, good)), otherCSRF},
			{"valid token and CSRF token, cross-site", map[string]string{"Authorization": "Bearer " + front.Sign(t, good), "Sec-Fetch-Site": "cross-site"}, csrf},
			{"valid token and CSRF token, same-site page on another port", map[string]string{"Authorization": "Bearer " + front.Sign(t, good), "Sec-Fetch-Site": "same-site"}, csrf},
			{"valid token and CSRF token, foreign Origin", map[string]string{"Authorization": "Bearer " + front.Sign(t, good), "Origin": "http://evil.example"}, csrf},
		} {
			st := decide(a.hdr, a.token)
			undecided(t, fmt.Sprintf("%s (answered %d)", a.name, st))
		}

		// The front's real identity with the page's token decides, once.
		if st := decide(map[string]string{"Authorization": "Bearer " + front.Sign(t, good), "X-Forwarded-User": "dana@example.com", "Sec-Fetch-Site": "same-origin"}, csrf); st != http.StatusSeeOther {
			t.Fatalf("the front's signed identity: %d, want 303", st)
		}
		if status, env := editVia(t, l.Forward, up.URL(), "words"); status != 200 || !env.OK {
			t.Fatalf("approved call: %d %+v", status, env.Error)
		}
		if n := up.Hits(route); n != 1 {
			t.Errorf("upstream ran the approved call %d times, want 1", n)
		}
		if _, list := approvalsCmd(t, cfg, "list", "--json"); !strings.Contains(list, `"decider":"jwt:dana@example.com"`) {
			t.Errorf("the decision does not record the front's user:\n%s", list)
		}
	})

	t.Run("trusted header on a Unix socket", func(t *testing.T) {
		dir := configure(t, "dec_unix", "    trusted_header: X-Forwarded-User")
		cfg := filepath.Join(dir, "toolgate.yaml")
		sock := filepath.Join(dir, "front", "dashboard.sock")
		if err := os.Mkdir(filepath.Dir(sock), 0o750); err != nil {
			t.Fatal(err)
		}
		out, stop := startCmd(t, "dashboard", "--config", cfg, "--listen", "unix:"+sock)
		defer stop()
		deadline := time.Now().Add(60 * time.Second)
		for !strings.Contains(out.String(), "http+unix://") && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		fi, err := os.Stat(sock)
		if err != nil {
			t.Fatalf("no socket: %v\n%s", err, out.String())
		}
		if fi.Mode()&os.ModeSocket == 0 || fi.Mode().Perm() != 0o660 {
			t.Errorf("socket mode %v, want a socket with 0660", fi.Mode())
		}
		// The front, which alone mounts the socket's directory, reaches it.
		c := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", sock)
		}}}
		req, _ := http.NewRequest("GET", "http://dashboard/approvals", nil)
		req.Header.Set("X-Forwarded-User", "dana")
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("the front's request over the socket: %d", resp.StatusCode)
		}
	})
	t.Run("trusted header behind the front's client certificate", func(t *testing.T) {
		dir := configure(t, "dec_mtls", "    trusted_header: X-Forwarded-User")
		cfg := filepath.Join(dir, "toolgate.yaml")
		sc := startRun(t, dir, string(mustRead(t, cfg)))
		l := sc.running(t)
		defer sc.stop(t)
		status, env := editVia(t, l.Forward, up.URL(), "words")
		if status != 403 || env.Error.Approval == nil {
			t.Fatalf("first call: %d %+v", status, env.Error)
		}
		id := env.Error.Approval.ID
		hits := up.Hits(route)
		ca, other := newTestCA(t, "front CA"), newTestCA(t, "agent's own CA")
		serverCert := ca.issue(t, dir, "dashboard", false)
		frontCert, agentCert := ca.issue(t, dir, "front", true), other.issue(t, dir, "agent", true)
		out, stop := startCmd(t, "dashboard", "--config", cfg, "--listen", "127.0.0.1:0",
			"--tls-cert", serverCert.certFile, "--tls-key", serverCert.keyFile, "--client-ca", ca.file)
		defer stop()
		deadline := time.Now().Add(60 * time.Second)
		for !strings.Contains(out.String(), "https://") && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		m := regexp.MustCompile(`https://([0-9.:]+)/`).FindStringSubmatch(out.String())
		if m == nil {
			t.Fatalf("no https URL printed:\n%s", out.String())
		}
		base := "https://" + m[1] + "/"
		client := func(cert *tls.Certificate) *http.Client {
			tc := &tls.Config{RootCAs: ca.pool, ServerName: "dashboard"}
			if cert != nil {
				tc.Certificates = []tls.Certificate{*cert}
			}
			jar, _ := cookiejar.New(nil)
			return &http.Client{Jar: jar, Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: tc},
				CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		}
		decide := func(c *http.Client) (int, error) {
			req, _ := http.NewRequest("GET", base+"approvals", nil)
			req.Header.Set("X-Forwarded-User", "dana")
			resp, err := c.Do(req)
			if err != nil {
				return 0, err
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			tok := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindSubmatch(b)
			form := url.Values{"id": {id}, "verdict": {"approved"}}
			if tok != nil {
				form.Set("csrf", string(tok[1]))
			}
			req, _ = http.NewRequest("POST", base+"approvals/decide", strings.NewReader(form.Encode()))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			req.Header.Set("X-Forwarded-User", "dana")
			resp, err = c.Do(req)
			if err != nil {
				return 0, err
			}
			resp.Body.Close()
			return resp.StatusCode, nil
		}
		for _, a := range []struct {
			name string
			cert *tls.Certificate
		}{
			{"header without a client certificate", nil},
			{"header with a certificate of another CA", &agentCert.pair},
		} {
			tally.tried++
			st, err := decide(client(a.cert))
			changed := false
			if status, _ := editVia(t, l.Forward, up.URL(), "words"); status != 403 {
				changed = true
				t.Errorf("%s (%d, %v): the retried call answered %d", a.name, st, err, status)
			}
			if n := up.Hits(route); n != hits {
				changed = true
				t.Errorf("%s: the upstream ran the call %d times", a.name, n-hits)
			}
			if changed {
				tally.changed++
			} else {
				tally.refused++
			}
		}
		if st, err := decide(client(&frontCert.pair)); err != nil || st != http.StatusSeeOther {
			t.Fatalf("the front's request: %d %v, want 303", st, err)
		}
		if status, env := editVia(t, l.Forward, up.URL(), "words"); status != 200 || !env.OK {
			t.Fatalf("approved call: %d %+v", status, env.Error)
		}
	})
	tally.report(t, "deciders")
}

// testCA is a certificate authority for a test's TLS.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pool *x509.CertPool
	file string // its certificate, PEM
}

// testCert is a certificate a testCA issued, as files and as a pair.
type testCert struct {
	certFile, keyFile string
	pair              tls.Certificate
}

func newTestCA(t *testing.T, name string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	file := filepath.Join(t.TempDir(), "ca.crt")
	writeFile(t, file, string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})))
	return &testCA{cert: cert, key: key, pool: pool, file: file}
}

func (ca *testCA) issue(t *testing.T, dir, name string, client bool) testCert {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	usage := x509.ExtKeyUsageServerAuth
	if client {
		usage = x509.ExtKeyUsageClientAuth
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name}, DNSNames: []string{name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), ExtKeyUsage: []x509.ExtKeyUsage{usage}, KeyUsage: x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kb, _ := x509.MarshalECPrivateKey(key)
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb})
	c := testCert{certFile: filepath.Join(dir, name+".crt"), keyFile: filepath.Join(dir, name+".key")}
	writeFile(t, c.certFile, string(certPEM))
	writeFile(t, c.keyFile, string(keyPEM))
	if c.pair, err = tls.X509KeyPair(certPEM, keyPEM); err != nil {
		t.Fatal(err)
	}
	return c
}

// lineOf is the line of the first YAML key name in the file at path.
func lineOf(t *testing.T, path, key string) int {
	t.Helper()
	for i, l := range strings.Split(string(mustRead(t, path)), "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), key+":") {
			return i + 1
		}
	}
	t.Fatalf("%s has no %s", path, key)
	return 0
}

// adminAttackConfig is a sidecar with an admin listener; ADMIN adds to
// admin's settings.
const adminAttackConfig = `
listen: {forward: 127.0.0.1:0}
admin: {listen: 127.0.0.1:0, pprof: true ADMIN}
events: {file: {path: events.ndjson}}
tools:
  - name: docs_edit
    match: {host: 127.0.0.1, method: POST, path: "/v1/documents/{doc_id}:batchUpdate"}
`

// TestAdversarialAdmin sends the admin listener what a web page can send
// (a form or text/plain POST, a no-cors fetch without a body, a foreign
// Origin, a cross-site or same-site Sec-Fetch-Site) and, with
// admin.token_file, requests without the token or with a wrong one. A
// reload is judged by the reload counters of /status (OK plus failed):
// none of the attacks may move them, and the operator's own request
// (X-Toolgate-Admin, and the token) must. The same attacks on POST
// /mcp/pins/accept must be stopped by the guard (401, 403) while the
// operator's request reaches its handler.
func TestAdversarialAdmin(t *testing.T) {
	t.Parallel()
	const token = "admin-token-0123456789abcdef"
	var tally attackTally
	for _, tc := range []struct {
		name  string
		admin string
		token string
	}{
		{"no token", "", ""},
		{"admin.token_file", ", token_file: admin.token", token},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeFile(t, filepath.Join(dir, "admin.token"), token+"\n")
			sc := startRun(t, dir, strings.Replace(adminAttackConfig, " ADMIN", tc.admin, 1))
			l := sc.running(t)
			defer sc.stop(t)
			c := &http.Client{Timeout: 60 * time.Second}
			auth := map[string]string{}
			if tc.token != "" {
				auth["Authorization"] = "Bearer " + tc.token
			}
			reloads := func() uint64 {
				t.Helper()
				a := do(t, c, "GET", "http://"+l.Admin+"/status", auth)
				var st struct {
					Reload struct {
						Reloads struct{ OK, Failed uint64 } `json:"reloads"`
					} `json:"reload"`
				}
				if err := json.Unmarshal([]byte(a.body), &st); err != nil {
					t.Fatalf("/status %d: %v\n%s", a.status, err, a.body)
				}
				return st.Reload.Reloads.OK + st.Reload.Reloads.Failed
			}
			post := func(path, ctype, body string, hdr map[string]string) int {
				t.Helper()
				var rd *strings.Reader
				if body != "" {
					rd = strings.NewReader(body)
				}
				req, _ := http.NewRequest("POST", "http://"+l.Admin+path, nil)
				if rd != nil {
					req, _ = http.NewRequest("POST", "http://"+l.Admin+path, rd)
				}
				if ctype != "" {
					req.Header.Set("Content-Type", ctype)
				}
				for k, v := range hdr {
					req.Header.Set(k, v)
				}
				resp, err := c.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				return resp.StatusCode
			}
			merge := func(ms ...map[string]string) map[string]string {
				out := map[string]string{}
				for _, m := range ms {
					for k, v := range m {
						out[k] = v
					}
				}
				return out
			}
			admin := map[string]string{"X-Toolgate-Admin": "1"}
			before := reloads()
			attacks := []struct {
				name, ctype, body string
				hdr               map[string]string
			}{
				{"form-encoded POST, cross-site", "application/x-www-form-urlencoded", "a=b", merge(auth, map[string]string{"Sec-Fetch-Site": "cross-site", "Origin": "http://evil.example"})},
				{"form-encoded POST, no browser headers", "application/x-www-form-urlencoded", "a=b", auth},
				{"text/plain POST", "text/plain", "x", auth},
				{"multipart POST", "multipart/form-data; boundary=x", "--x--", auth},
				{"no-cors fetch, no body", "", "", merge(auth, map[string]string{"Sec-Fetch-Site": "cross-site", "Origin": "http://evil.example"})},
				{"admin header, cross-site", "", "", merge(auth, admin, map[string]string{"Sec-Fetch-Site": "cross-site"})},
				{"admin header, same-site page on another port", "", "", merge(auth, admin, map[string]string{"Sec-Fetch-Site": "same-site"})},
				{"admin header, foreign Origin", "application/json", "{}", merge(auth, admin, map[string]string{"Origin": "http://evil.example"})},
				{"admin header, Origin null", "application/json", "{}", merge(auth, admin, map[string]string{"Origin": "null"})},
			}
			if tc.token != "" {
				attacks = append(attacks,
					struct {
						name, ctype, body string
						hdr               map[string]string
					}{"admin header, no token", "", "", admin},
					struct {
						name, ctype, body string
						hdr               map[string]string
					}{"admin header, wrong token", "", "", merge(admin, map[string]string{"Authorization": "Bearer " + strings.Repeat("x", len(token))})},
					struct {
						name, ctype, body string
						hdr               map[string]string
					}{"admin header, token as Basic", "", "", merge(admin, map[string]string{"Authorization": "Basic " + token})},
				)
			}
			for _, a := range attacks {
				tally.tried++
				st := post("/reload", a.ctype, a.body, a.hdr)
				if n := reloads(); n != before || st < 400 {
					tally.changed++
					t.Errorf("%s: POST /reload answered %d and the reload counters went %d -> %d", a.name, st, before, n)
					before = n
				} else {
					tally.refused++
				}
			}
			// POST /mcp/pins/accept takes the same guard: every attack is
			// stopped by it (401 or 403), while the operator's request
			// reaches the handler (404 here: nothing waits for a decision).
			for _, a := range attacks {
				tally.tried++
				body := a.body
				if a.ctype == "application/json" {
					body = `{"route":"r","server":"http://127.0.0.1/mcp","tool":"pay","digest":""}`
				}
				if st := post("/mcp/pins/accept", a.ctype, body, a.hdr); st != http.StatusUnauthorized && st != http.StatusForbidden {
					tally.changed++
					t.Errorf("%s: POST /mcp/pins/accept answered %d; want the guard's 401 or 403", a.name, st)
				} else {
					tally.refused++
				}
			}
			if st := post("/mcp/pins/accept", "application/json", `{"route":"r","server":"http://127.0.0.1/mcp","tool":"pay","digest":""}`, merge(auth, admin)); st != http.StatusNotFound {
				t.Errorf("the operator's POST /mcp/pins/accept: %d, want 404 (the handler: nothing to accept)", st)
			}
			// pprof's symbol lookup answers a program, never a page.
			tally.tried++
			if st := post("/debug/pprof/symbol", "text/plain", "0x1", auth); st != http.StatusForbidden {
				tally.changed++
				t.Errorf("text/plain POST /debug/pprof/symbol: %d, want 403", st)
			} else {
				tally.refused++
			}
			if st := post("/debug/pprof/symbol", "text/plain", "0x1", merge(auth, admin)); st != http.StatusOK {
				t.Errorf("POST /debug/pprof/symbol with the admin header: %d, want 200", st)
			}
			if tc.token != "" {
				tally.tried++
				if a := do(t, c, "GET", "http://"+l.Admin+"/status", nil); a.status != http.StatusUnauthorized || strings.Contains(a.body, "config_version") {
					tally.changed++
					t.Errorf("/status without the token: %d %s", a.status, a.body)
				} else {
					tally.refused++
				}
				for _, p := range []string{"/healthz", "/readyz"} {
					if a := do(t, c, "GET", "http://"+l.Admin+p, nil); a.status != 200 {
						t.Errorf("probe %s without the token: %d, want 200", p, a.status)
					}
				}
			}
			// The operator's request reloads.
			if st := post("/reload", "", "", merge(auth, admin)); st != 200 {
				t.Errorf("the operator's POST /reload: %d, want 200", st)
			}
			if n := reloads(); n != before+1 {
				t.Errorf("after the operator's POST /reload the counters went %d -> %d, want one more", before, n)
			}
		})
	}
	tally.report(t, "admin")
}
