package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestAdminTokenAndDecidersErrors: admin.token_file and
// approvals.deciders.jwt are checked at load, each mistake reported with
// the file, the field's line and the field.
func TestAdminTokenAndDecidersErrors(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "short.token"), []byte("abc\n"), 0o600)
	os.WriteFile(filepath.Join(dir, "good.token"), []byte("  0123456789abcdef0123\n"), 0o600)
	const base = "listen: {forward: 127.0.0.1:0}\n"
	for _, tc := range []struct {
		name, text, want string
	}{
		{"token file missing", base + "admin:\n  token_file: none.token\n", ":3: admin.token_file:"},
		{"token too short", base + "admin:\n  token_file: short.token\n", ":3: admin.token_file:"},
		{"jwt without issuer", base + "approvals:\n  deciders:\n    jwt:\n      jwks_file: k.json\n      audience: a\n", ":4: approvals.deciders.jwt.issuer:"},
		{"jwt without keys", base + "approvals:\n  deciders:\n    jwt: {issuer: i, audience: a}\n", "approvals.deciders.jwt.jwks_file:"},
		{"jwt with HS256", base + "approvals:\n  deciders:\n    jwt:\n      jwks_file: k.json\n      issuer: i\n      audience: a\n      algorithms: [RS256, HS256]\n", "approvals.deciders.jwt.algorithms[1]:"},
		{"jwks over plain http", base + "approvals:\n  deciders:\n    jwt:\n      jwks_url: http://idp.example/jwks\n      issuer: i\n      audience: a\n", ":5: approvals.deciders.jwt.jwks_url:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, "toolgate.yaml")
			_, err := Parse(path, []byte(tc.text))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Parse = %v; want an error containing %q", err, tc.want)
			}
		})
	}
	lc, err := Parse(filepath.Join(dir, "toolgate.yaml"), []byte(base+"admin:\n  token_file: good.token\n"))
	if err != nil {
		t.Fatal(err)
	}
	if lc.Admin.Token() != "0123456789abcdef0123" {
		t.Errorf("token %q, want the file's, white space trimmed", lc.Admin.Token())
	}
}
