package proxy_test

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/toolgate/toolgate/internal/section"
	"github.com/toolgate/toolgate/proxy"
	"github.com/toolgate/toolgate/proxy/tlsca"
)

// TestTLSConfig checks the tls section and listen.transparent: files
// resolve against the configuration's folder, and every mistake is named
// by its field.
func TestTLSConfig(t *testing.T) {
	dir := t.TempDir()
	if err := tlsca.Create(filepath.Join(dir, "ca.crt"), filepath.Join(dir, "ca.key"), "", 0); err != nil {
		t.Fatal(err)
	}
	wide := filepath.Join(dir, "wide.key")
	b, _ := os.ReadFile(filepath.Join(dir, "ca.key"))
	os.WriteFile(wide, b, 0o600)
	os.Chmod(wide, 0o644)
	os.WriteFile(filepath.Join(dir, "junk.pem"), []byte("junk"), 0o644)
	const tool = "\ntools:\n  - {name: t, match: {host: api.example, path: /x}}\n"
	tests := []struct {
		name      string
		yaml      string
		wantField string // "" for valid
		wantMsg   string
	}{
		{"no tls at all", tool, "", ""},
		{"ca relative to the config", "tls: {ca_cert: ca.crt, ca_key: ca.key}" + tool, "", ""},
		{"transparent with a CA", "listen: {transparent: 127.0.0.1:15001}\ntls: {ca_cert: ca.crt, ca_key: ca.key}" + tool, "", ""},
		{"transparent off", "listen: {transparent: \"off\"}" + tool, "", ""},
		{"cert without key", "tls: {ca_cert: ca.crt}" + tool, "tls.ca_key", "required when tls.ca_cert is set"},
		{"key without cert", "tls: {ca_key: ca.key}" + tool, "tls.ca_cert", "required when tls.ca_key is set"},
		{"missing cert", "tls: {ca_cert: nope.crt, ca_key: ca.key}" + tool, "tls.ca_cert", "no such file"},
		{"wide key", "tls: {ca_cert: ca.crt, ca_key: wide.key}" + tool, "tls.ca_key", "mode 0644"},
		{"junk cert", "tls: {ca_cert: junk.pem, ca_key: ca.key}" + tool, "tls.ca_cert", "no PEM CERTIFICATE"},
		{"transparent without CA", "listen: {transparent: 127.0.0.1:15001}" + tool, "tls.ca_cert", "required when listen.transparent is on"},
		{"transparent wide", "listen: {transparent: 0.0.0.0:15001}\ntls: {ca_cert: ca.crt, ca_key: ca.key}" + tool, "listen.transparent", "not a loopback address"},
		{"transparent on the forward address", "listen: {forward: 127.0.0.1:18080, transparent: 127.0.0.1:18080}\ntls: {ca_cert: ca.crt, ca_key: ca.key}" + tool, "listen.transparent", "already used by listen.forward"},
		{"port 443 without CA", "tools:\n  - {name: t, match: {host: api.example:443, path: /x}}\n", "tools[0].match.host", "names port 443"},
		{"upstream_ca junk", "tls: {upstream_ca: [junk.pem]}" + tool, "tls.upstream_ca[0]", "holds no PEM certificate"},
		{"upstream_ca missing", "tls: {upstream_ca: [ca.crt, nope.pem]}" + tool, "tls.upstream_ca[1]", "no such file"},
		{"only transparent listens", "listen: {forward: \"off\", transparent: 127.0.0.1:15001}\ntls: {ca_cert: ca.crt, ca_key: ca.key}" + tool, "", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var cfg proxy.Config
			dec := yaml.NewDecoder(strings.NewReader(tc.yaml))
			dec.KnownFields(true)
			if err := dec.Decode(&cfg); err != nil {
				t.Fatal(err)
			}
			err := cfg.Validate(dir)
			if runtime.GOOS != "linux" && strings.Contains(tc.yaml, "transparent: 127") {
				return // transparent mode is refused off Linux
			}
			if tc.wantField == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			var fe *section.Error
			if !errors.As(err, &fe) || fe.Path != tc.wantField || !strings.Contains(err.Error(), tc.wantMsg) {
				t.Errorf("err = %v, want %s: ...%s...", err, tc.wantField, tc.wantMsg)
			}
		})
	}
	// The CA is loaded, ready for the listeners.
	var cfg proxy.Config
	yaml.Unmarshal([]byte("tls: {ca_cert: ca.crt, ca_key: ca.key}"+tool), &cfg)
	if err := cfg.Validate(dir); err != nil || cfg.TLS.CA() == nil {
		t.Errorf("CA not loaded: %v", err)
	}
}
