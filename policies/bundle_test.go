package policies

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestBundleConfigValidate checks the defaults of policies.bundles and
// each error a user can make there, with its field path.
func TestBundleConfigValidate(t *testing.T) {
	dir := t.TempDir()
	pem := "-----BEGIN PUBLIC KEY-----\nMFkw\n-----END PUBLIC KEY-----\n"
	for name, body := range map[string]string{"pub.pem": pem, "empty.pem": "", "secret": "s3cret", "token": "t"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	ok := func() BundleConfig { return BundleConfig{Name: "main", URL: "https://p.example.org/b.tar.gz"} }
	c := Config{Bundles: []BundleConfig{ok()}}
	if err := c.ValidateBundles(dir); err != nil {
		t.Fatal(err)
	}
	got := c.Bundles[0]
	if got.MinDelay != DefaultBundleMinDelay || got.MaxDelay != DefaultBundleMaxDelay || got.Timeout != DefaultBundleTimeout ||
		got.MaxBytes != DefaultBundleMaxBytes || got.Pending != PendingRefuse || got.Signing != nil {
		t.Errorf("defaults: %+v", got)
	}
	if got.MaxExpandedBytes != DefaultBundleMaxExpandedBytes || got.MaxFiles != DefaultBundleMaxFiles ||
		got.DownloadTimeout != DefaultBundleDownloadTimeout || got.RevisionOrder != RevisionSeen || got.AllowRollback {
		t.Errorf("defaults of the bounds and the rollback rule: %+v", got)
	}
	for _, tc := range []struct {
		name    string
		edit    func(*BundleConfig)
		wantErr string
	}{
		{"no name", func(b *BundleConfig) { b.Name = "" }, "bundles[0].name: required"},
		{"name with =", func(b *BundleConfig) { b.Name = "a=b" }, "bundles[0].name:"},
		{"no url", func(b *BundleConfig) { b.URL = "" }, "bundles[0].url: required"},
		{"file url", func(b *BundleConfig) { b.URL = "file:///etc/passwd" }, "not an http or https URL"},
		{"credentials in url", func(b *BundleConfig) { b.URL = "https://u:p@h/b.tar.gz" }, "bearer_token_file"},
		{"sub-second delay", func(b *BundleConfig) { b.MinDelay = 500 * time.Millisecond }, "bundles[0].min_delay"},
		{"max under min", func(b *BundleConfig) { b.MinDelay, b.MaxDelay = 10*time.Second, 5*time.Second }, "bundles[0].max_delay"},
		{"huge max_bytes", func(b *BundleConfig) { b.MaxBytes = 1 << 40 }, "bundles[0].max_bytes"},
		{"unknown pending", func(b *BundleConfig) { b.Pending = "maybe" }, "bundles[0].pending"},
		{"max_expanded_bytes under max_bytes", func(b *BundleConfig) { b.MaxBytes, b.MaxExpandedBytes = 1<<20, 1<<10 }, "bundles[0].max_expanded_bytes"},
		{"negative max_files", func(b *BundleConfig) { b.MaxFiles = -1 }, "bundles[0].max_files"},
		{"download_timeout under timeout", func(b *BundleConfig) { b.Timeout, b.DownloadTimeout = 10*time.Second, 5*time.Second }, "bundles[0].download_timeout"},
		{"sub-second download_timeout", func(b *BundleConfig) { b.DownloadTimeout = 10500 * time.Millisecond }, "bundles[0].download_timeout"},
		{"unknown revision_order", func(b *BundleConfig) { b.RevisionOrder = "newest" }, "bundles[0].revision_order"},
		{"missing token file", func(b *BundleConfig) { b.BearerTokenFile = "nope" }, "bundles[0].bearer_token_file"},
		{"signing without key", func(b *BundleConfig) { b.Signing = &BundleSigning{} }, "bundles[0].signing.public_key: required"},
		{"missing key file", func(b *BundleConfig) { b.Signing = &BundleSigning{PublicKey: "nope.pem"} }, "bundles[0].signing.public_key"},
		{"empty key file", func(b *BundleConfig) { b.Signing = &BundleSigning{PublicKey: "empty.pem"} }, "is empty"},
		{"secret for RS256", func(b *BundleConfig) { b.Signing = &BundleSigning{PublicKey: "secret"} }, "no PEM block"},
		{"unknown algorithm", func(b *BundleConfig) { b.Signing = &BundleSigning{PublicKey: "pub.pem", Algorithm: "none"} }, "bundles[0].signing.algorithm"},
		{"bad exclude glob", func(b *BundleConfig) { b.Signing = &BundleSigning{PublicKey: "pub.pem", Exclude: []string{"["}} }, "signing.exclude[0]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := ok()
			tc.edit(&b)
			c := Config{Bundles: []BundleConfig{b}}
			err := c.ValidateBundles(dir)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("err = %v, want one with %q", err, tc.wantErr)
			}
		})
	}
	dup := Config{Bundles: []BundleConfig{ok(), ok()}}
	if err := dup.ValidateBundles(dir); err == nil || !strings.Contains(err.Error(), "defined twice") {
		t.Errorf("two bundles named main: %v", err)
	}
	signed := ok()
	signed.Signing = &BundleSigning{PublicKey: "secret", Algorithm: "HS256"}
	signed.BearerTokenFile = "token"
	c = Config{Bundles: []BundleConfig{signed}}
	if err := c.ValidateBundles(dir); err != nil {
		t.Fatal(err)
	}
	if s := c.Bundles[0].Signing; string(s.Key()) != "s3cret" || s.KeyID != "default" {
		t.Errorf("signing after validation: key %q, key id %q", s.Key(), s.KeyID)
	}
	if signed.Signing.KeyID != "" {
		t.Error("validation changed the caller's signing settings")
	}
	files := c.Files(dir)
	if len(files) != 2 || !strings.HasSuffix(files[0], "token") || !strings.HasSuffix(files[1], "secret") {
		t.Errorf("Files = %v, want the token and key files", files)
	}
}

// FuzzDecodeBundleSettings decodes data.toolgate from arbitrary JSON
// values: errors, never a panic; what decodes has no field dropped.
func FuzzDecodeBundleSettings(f *testing.F) {
	f.Add([]byte(`{"policies": [{"name": "b", "package": "toolgate.b", "mode": "dry_run"}], "tools": {"t": ["b"]}}`))
	f.Add([]byte(`{"polices": []}`))
	f.Add([]byte(`[1, 2]`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var v any
		if err := json.Unmarshal(data, &v); err != nil {
			return
		}
		_, _ = DecodeBundleSettings(v)
	})
}
