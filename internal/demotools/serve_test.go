package demotools

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/testutil"
)

// TestServeTLS checks `toolgate demo upstream --tls-cert`: the upstream
// answers over HTTPS with the certificate it wrote, which a client that
// trusts only that file accepts for 127.0.0.1, and it stops when ctx ends.
func TestServeTLS(t *testing.T) {
	certFile := filepath.Join(t.TempDir(), "up.pem")
	out := new(testutil.SyncBuffer)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, out, "127.0.0.1:0", certFile) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	}()
	url := regexp.MustCompile(`https://127\.0\.0\.1:\d+`)
	var base string
	for deadline := time.Now().Add(30 * time.Second); base == ""; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no https URL printed within 30 s: %q", out)
		}
		base = url.FindString(out.String())
	}
	pem, err := os.ReadFile(certFile)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pem) {
		t.Fatalf("%s holds no certificate", certFile)
	}
	c := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}
	resp, err := c.Get(base + "/")
	if err != nil {
		t.Fatalf("GET %s/ trusting only the written certificate: %v", base, err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET %s/ = %d, want 200", base, resp.StatusCode)
	}
}
