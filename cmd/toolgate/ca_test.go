package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/demotools"
)

// runCmd runs one toolgate command line and returns its exit code and output.
func runCmd(args ...string) (int, string, string) {
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

func TestCAInit(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "ca")
	code, out, errOut := runCmd("ca", "init", "--dir", dir, "--days", "30", "--name", "test CA")
	if code != exitOK {
		t.Fatalf("ca init: %d %s", code, errOut)
	}
	if !strings.Contains(out, "ca.crt") || !strings.Contains(out, "0600") {
		t.Errorf("ca init said %q", out)
	}
	for name, want := range map[string]os.FileMode{"ca.crt": 0o644, "ca.key": 0o600} {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil || fi.Mode().Perm() != want {
			t.Errorf("%s: %v mode %v, want %#o", name, err, fi.Mode().Perm(), want)
		}
	}
	b, _ := os.ReadFile(filepath.Join(dir, "ca.crt"))
	blk, _ := pem.Decode(b)
	c, err := x509.ParseCertificate(blk.Bytes)
	if err != nil || c.Subject.CommonName != "test CA" || !c.IsCA {
		t.Fatalf("certificate: %v %+v", err, c)
	}
	if d := time.Until(c.NotAfter); d < 29*24*time.Hour || d > 31*24*time.Hour {
		t.Errorf("valid for %v more, want 30 days", d)
	}
	keyBefore, _ := os.ReadFile(filepath.Join(dir, "ca.key"))

	tests := []struct {
		name     string
		args     []string
		wantCode int
		wantErr  string
	}{
		{"refuses to overwrite", []string{"ca", "init", "--dir", dir}, exitError, "refusing to overwrite"},
		{"needs --dir", []string{"ca", "init"}, exitUsage, "--dir is required"},
		{"days must be positive", []string{"ca", "init", "--dir", t.TempDir(), "--days", "0"}, exitUsage, "--days must be positive"},
		{"bundle needs --ca", []string{"ca", "bundle"}, exitUsage, "--ca is required"},
		{"bundle of a missing CA", []string{"ca", "bundle", "--ca", filepath.Join(dir, "nope.crt")}, exitError, "no such file"},
		{"bundle of a key", []string{"ca", "bundle", "--ca", filepath.Join(dir, "ca.key")}, exitError, "no PEM CERTIFICATE"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, _, errOut := runCmd(tc.args...)
			if code != tc.wantCode || !strings.Contains(errOut, tc.wantErr) {
				t.Errorf("exit %d, stderr %q; want %d and %q", code, errOut, tc.wantCode, tc.wantErr)
			}
		})
	}
	if after, _ := os.ReadFile(filepath.Join(dir, "ca.key")); !bytes.Equal(after, keyBefore) {
		t.Error("a refused init changed the key")
	}
}

func TestCABundle(t *testing.T) {
	dir := t.TempDir()
	if code, _, errOut := runCmd("ca", "init", "--dir", dir); code != exitOK {
		t.Fatal(errOut)
	}
	ca := filepath.Join(dir, "ca.crt")
	caPEM, _ := os.ReadFile(ca)
	code, stdout, errOut := runCmd("ca", "bundle", "--ca", ca)
	if code != exitOK {
		t.Fatalf("ca bundle: %d %s", code, errOut)
	}
	n := strings.Count(stdout, "-----BEGIN CERTIFICATE-----")
	if n < 2 || !strings.HasSuffix(stdout, string(caPEM)) {
		t.Errorf("bundle holds %d certificates and ends %q; want the system roots then the CA", n, stdout[max(0, len(stdout)-80):])
	}
	out := filepath.Join(dir, "bundle.pem")
	if code, _, errOut := runCmd("ca", "bundle", "--ca", ca, "--out", out); code != exitOK || !strings.Contains(errOut, "system roots") {
		t.Fatalf("ca bundle --out: %d %s", code, errOut)
	}
	if b, _ := os.ReadFile(out); string(b) != stdout {
		t.Error("the file differs from standard output")
	}
	if fi, _ := os.Stat(out); fi.Mode().Perm() != 0o644 {
		t.Errorf("bundle mode %#o, want 0644", fi.Mode().Perm())
	}
	// No roots anywhere: a clear error.
	empty := filepath.Join(dir, "empty.pem")
	os.WriteFile(empty, []byte("\n"), 0o644)
	t.Setenv("SSL_CERT_FILE", empty)
	t.Setenv("SSL_CERT_DIR", t.TempDir())
	if code, _, errOut := runCmd("ca", "bundle", "--ca", ca); code != exitError || !strings.Contains(errOut, "no system root certificates found") {
		t.Errorf("no roots: exit %d %q", code, errOut)
	}
}

// TestSidecarHTTPS runs the sidecar with a CA from `ca init`, and a client
// that trusts only the bundle from `ca bundle`: an HTTPS typo is refused,
// a valid call reaches the TLS upstream, the admin listener serves the CA,
// and a wide-open key is refused at start with its file and line.
func TestSidecarHTTPS(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if code, _, errOut := runCmd("ca", "init", "--dir", filepath.Join(dir, "ca")); code != exitOK {
		t.Fatal(errOut)
	}
	bundle := filepath.Join(dir, "bundle.pem")
	if code, _, errOut := runCmd("ca", "bundle", "--ca", filepath.Join(dir, "ca", "ca.crt"), "--out", bundle); code != exitOK {
		t.Fatal(errOut)
	}
	up := demotools.New()
	ts := httptest.NewTLSServer(up.Handler())
	t.Cleanup(ts.Close)
	os.WriteFile(filepath.Join(dir, "up.crt"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ts.Certificate().Raw}), 0o644)
	config := fmt.Sprintf(`
listen: {forward: 127.0.0.1:0}
admin: {listen: 127.0.0.1:0}
events: {file: {path: %s}}
tls:
  ca_cert: ca/ca.crt
  ca_key: ca/ca.key
  upstream_ca: [up.crt]
tools:
  - name: pubmed_search
    match: {host: 127.0.0.1, method: GET, path: /esearch}
    schema:
      type: object
      properties: {term: {type: string}, retmax: {type: integer}}
`, filepath.Join(dir, "events.ndjson"))
	r := startRun(t, dir, config)
	l := r.running(t)
	pemBytes, _ := os.ReadFile(bundle)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pemBytes)
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		Proxy:           http.ProxyURL(&url.URL{Scheme: "http", Host: l.Forward}),
		TLSClientConfig: &tls.Config{RootCAs: pool},
	}}
	a := do(t, c, "GET", ts.URL+"/esearch?term=x&retmx=5", nil)
	if a.status != 422 || a.header.Get("X-Toolgate-Error-Code") != "validation" || !strings.Contains(a.body, `"unknown_field"`) {
		t.Errorf("typo over HTTPS: %d %s", a.status, a.body)
	}
	a = do(t, c, "GET", ts.URL+"/esearch?term=x&retmax=5", nil)
	if a.status != 200 || up.Hits("GET /esearch") != 1 {
		t.Errorf("valid call over HTTPS: %d %s, upstream hits %d", a.status, a.body, up.Hits("GET /esearch"))
	}
	caPEM, _ := os.ReadFile(filepath.Join(dir, "ca", "ca.crt"))
	a = do(t, directClient(t), "GET", "http://"+l.Admin+"/ca.crt", nil)
	if a.status != 200 || a.body != string(caPEM) {
		t.Errorf("GET /ca.crt: %d %q", a.status, a.body)
	}
	r.stop(t)

	// A CA key others can read stops the start, naming file and line.
	os.Chmod(filepath.Join(dir, "ca", "ca.key"), 0o644)
	path := filepath.Join(dir, "toolgate.yaml")
	code, _, errOut := runCmd("run", "--config", path)
	if code != exitError || !strings.Contains(errOut, path+":7: tls.ca_key: ") || !strings.Contains(errOut, "chmod 600") {
		t.Errorf("wide key: exit %d %q", code, errOut)
	}
}

// TestAdminCAWithoutCA checks /ca.crt says so when no CA is configured.
func TestAdminCAWithoutCA(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	r := startRun(t, dir, "listen: {forward: 127.0.0.1:0}\nadmin: {listen: 127.0.0.1:0}\nevents: {file: {path: "+filepath.Join(dir, "ev.ndjson")+"}}\n")
	l := r.running(t)
	if a := do(t, directClient(t), "GET", "http://"+l.Admin+"/ca.crt", nil); a.status != 404 || !strings.Contains(a.body, "tls.ca_cert") {
		t.Errorf("GET /ca.crt without a CA: %d %q", a.status, a.body)
	}
}

// TestReloadTLS checks tls.insecure_skip_verify is logged at start and on
// every reload, and a reload that changes the tls section is refused.
func TestReloadTLS(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if code, _, errOut := runCmd("ca", "init", "--dir", filepath.Join(dir, "ca")); code != exitOK {
		t.Fatal(errOut)
	}
	if code, _, errOut := runCmd("ca", "init", "--dir", filepath.Join(dir, "ca2")); code != exitOK {
		t.Fatal(errOut)
	}
	base := "listen: {forward: 127.0.0.1:0}\nadmin: {listen: 127.0.0.1:0}\nevents: {file: {path: " + filepath.Join(dir, "ev.ndjson") + "}}\n"
	r := startRun(t, dir, base+"tls: {ca_cert: ca/ca.crt, ca_key: ca/ca.key, insecure_skip_verify: true}\n")
	l := r.running(t)
	warnings := func() int { return strings.Count(r.stderr.String(), "tls.insecure_skip_verify is on") }
	if n := warnings(); n != 1 {
		t.Errorf("%d insecure warnings at start, want 1", n)
	}
	admin := directClient(t)
	if a := do(t, admin, "POST", "http://"+l.Admin+"/reload", map[string]string{"X-Toolgate-Admin": "1"}); a.status != 200 {
		t.Fatalf("reload: %d %s", a.status, a.body)
	}
	if n := warnings(); n != 2 {
		t.Errorf("%d insecure warnings after a reload, want 2", n)
	}
	writeFile(t, r.path, base+"tls: {ca_cert: ca2/ca.crt, ca_key: ca2/ca.key, insecure_skip_verify: true}\n")
	if a := do(t, admin, "POST", "http://"+l.Admin+"/reload", map[string]string{"X-Toolgate-Admin": "1"}); a.status != 422 || !strings.Contains(a.body, "tls settings") {
		t.Errorf("reload with another CA: %d %s, want it refused", a.status, a.body)
	}
}
