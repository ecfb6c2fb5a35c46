package opabundle_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/policies"
	"github.com/toolgate/toolgate/policies/opabundle"
	"github.com/toolgate/toolgate/policies/rego"
)

const boundsRego = `package toolgate.bounds

deny contains {"msg": "retmax must be at most 50", "path": "/retmax"} if {
	input.arguments.retmax > 50
}
`

const boundsTest = `package toolgate.bounds_test

import data.toolgate.bounds

test_over_denied if {
	count(bounds.deny) == 1 with input as {"arguments": {"retmax": 60}}
}
`

const wordsRego = `package lib.words

deny contains "no" if input.arguments.term == "no"
`

// build writes files (path below the bundle's folder to content) and
// builds them into a bundle with OPA's compiler.
func build(t testing.TB, files map[string]string, rev string) []byte {
	t.Helper()
	dir := t.TempDir()
	for p, body := range files {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var buf bytes.Buffer
	if err := opabundle.Build(context.Background(), dir, opabundle.BuildOptions{Revision: rev}, &buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// load reads a bundle and loads it as a sidecar would, with the file's
// own section local.
func load(t testing.TB, tarball []byte, local policies.Config) (*policies.Loaded, error) {
	t.Helper()
	b, err := opabundle.Read("main", bytes.NewReader(tarball), nil, opabundle.Limits{})
	if err != nil {
		return nil, err
	}
	local.Bundles = []policies.BundleConfig{{Name: "main", URL: "http://bundle.invalid/b.tar.gz"}}
	return local.Load(t.TempDir(), policies.LoadOptions{Rego: rego.Host{}, Bundles: []*policies.Bundle{b}})
}

// TestBundlePolicies reads bundles built by OPA's compiler and loads
// them: each way of naming policies, the default without settings, and
// settings a sidecar must refuse.
func TestBundlePolicies(t *testing.T) {
	for _, tc := range []struct {
		name    string
		files   map[string]string
		names   []string // the policies loaded
		tool    string   // a tool whose set must hold len(names) policies
		wantErr string
	}{
		{"by package", map[string]string{
			"toolgate/bounds/bounds.rego": boundsRego, "toolgate/bounds/bounds_test.rego": boundsTest,
			"toolgate/data.json": `{"policies": [{"name": "bounds", "package": "toolgate.bounds", "mode": "dry_run"}], "tools": {"pubmed_search": ["bounds"]}}`,
		}, []string{"bounds"}, "pubmed_search", ""},
		{"by path", map[string]string{
			"toolgate/bounds/bounds.rego": boundsRego,
			"toolgate/data.json":          `{"policies": [{"name": "bounds", "path": "/toolgate/bounds"}], "global": ["bounds"]}`,
		}, []string{"bounds"}, "any_tool", ""},
		{"no settings: one global policy per package", map[string]string{
			"toolgate/bounds/bounds.rego": boundsRego, "toolgate/bounds/bounds_test.rego": boundsTest,
			"lib/words.rego": wordsRego,
		}, []string{"lib.words", "toolgate.bounds"}, "any_tool", ""},
		{"misspelt setting", map[string]string{
			"toolgate/bounds/bounds.rego": boundsRego,
			"toolgate/data.json":          `{"polices": []}`,
		}, nil, "", `unknown field "polices"`},
		{"tool bound to a policy the bundle lacks", map[string]string{
			"toolgate/bounds/bounds.rego": boundsRego,
			"toolgate/data.json":          `{"policies": [{"name": "bounds", "package": "toolgate.bounds"}], "tools": {"t": ["nope"]}}`,
		}, nil, "", `has no policy named "nope"`},
		{"package absent", map[string]string{
			"toolgate/bounds/bounds.rego": boundsRego,
			"toolgate/data.json":          `{"policies": [{"name": "x", "package": "toolgate.other"}]}`,
		}, nil, "", "no .rego file of package toolgate.other"},
		{"both package and path", map[string]string{
			"toolgate/bounds/bounds.rego": boundsRego,
			"toolgate/data.json":          `{"policies": [{"name": "x", "package": "toolgate.bounds", "path": "/toolgate"}]}`,
		}, nil, "", "either a package or a path"},
		{"unknown mode", map[string]string{
			"toolgate/bounds/bounds.rego": boundsRego,
			"toolgate/data.json":          `{"policies": [{"name": "x", "package": "toolgate.bounds", "mode": "loud"}]}`,
		}, nil, "", `unknown mode "loud"`},
		{"a builtin toolgate refuses", map[string]string{
			"toolgate/bounds/bounds.rego": boundsRego + "\nx := http.send({\"method\": \"GET\", \"url\": \"http://127.0.0.1:1/\"})\n",
		}, nil, "", "http.send"},
		{"no policies", map[string]string{"toolgate/data.json": `{"policies": []}`}, nil, "", opabundle.ErrNoPolicies.Error()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, err := load(t, build(t, tc.files, "r1"), policies.Config{})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one with %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close(context.Background(), nil)
			if got := strings.Join(l.Names(), ","); got != strings.Join(tc.names, ",") {
				t.Errorf("policies %s, want %s", got, strings.Join(tc.names, ","))
			}
			if l.Version() != "r1" {
				t.Errorf("policy version %q, want the revision r1", l.Version())
			}
			set, err := l.SetFor(tc.tool, nil, "", false)
			if err != nil || set == nil || set.Len() != len(tc.names) {
				t.Errorf("set of %s: %v, %v; want %d policies", tc.tool, set, err, len(tc.names))
			}
			rep, err := l.RunTests(context.Background())
			if err != nil || rep.Failed != 0 {
				t.Errorf("tests: %+v, %v", rep, err)
			}
		})
	}
}

// TestBundleVersion checks the policy version: the revision; a hash of
// the files without one; the revision and the file's own hash with local
// policies.
func TestBundleVersion(t *testing.T) {
	files := map[string]string{"toolgate/bounds/bounds.rego": boundsRego}
	l, err := load(t, build(t, files, ""), policies.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if v := l.Version(); !strings.HasPrefix(v, "sha256:") {
		t.Errorf("version without a revision = %q, want sha256:...", v)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "words.rego"), []byte(wordsRego), 0o644); err != nil {
		t.Fatal(err)
	}
	local := policies.Config{Rego: []policies.RegoConfig{{Name: "words", Path: filepath.Join(dir, "words.rego")}}}
	l, err = load(t, build(t, files, "r9"), local)
	if err != nil {
		t.Fatal(err)
	}
	if v := l.Version(); !strings.HasPrefix(v, "r9+") || len(v) != len("r9+")+12 {
		t.Errorf("version with local policies = %q, want r9+HASH", v)
	}
}

// TestReadRefuses checks what Read refuses: a corrupt tarball, and an
// unsigned bundle when a key is configured.
func TestReadRefuses(t *testing.T) {
	good := build(t, map[string]string{"toolgate/bounds/bounds.rego": boundsRego}, "r1")
	if _, err := opabundle.Read("main", bytes.NewReader(good[:len(good)/2]), nil, opabundle.Limits{}); err == nil {
		t.Error("a truncated tarball was read")
	}
	if _, err := opabundle.Read("main", bytes.NewReader(good), nil, opabundle.Limits{Compressed: 10, Entry: 10}); err == nil {
		t.Error("a bundle over max bytes was read")
	}
	dir := t.TempDir()
	key := filepath.Join(dir, "secret")
	if err := os.WriteFile(key, []byte("s3cret"), 0o600); err != nil {
		t.Fatal(err)
	}
	c := policies.Config{Bundles: []policies.BundleConfig{{Name: "main", URL: "http://x/b.tar.gz",
		Signing: &policies.BundleSigning{PublicKey: key, Algorithm: "HS256"}}}}
	l, err := c.Load(dir, policies.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = opabundle.Read("main", bytes.NewReader(good), l.Bundles()[0].Signing, opabundle.Limits{})
	if err == nil || !strings.Contains(err.Error(), ".signatures.json") {
		t.Errorf("unsigned bundle with a key configured: %v, want refused for its missing signature", err)
	}
	var signed bytes.Buffer
	src := t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "b.rego"), []byte(boundsRego), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := opabundle.Build(context.Background(), src, opabundle.BuildOptions{Revision: "s", SigningKey: "s3cret", SigningAlg: "HS256"}, &signed); err != nil {
		t.Fatal(err)
	}
	if b, err := opabundle.Read("main", bytes.NewReader(signed.Bytes()), l.Bundles()[0].Signing, opabundle.Limits{}); err != nil || b.Revision != "s" {
		t.Errorf("signed bundle: %v, %v; want read at revision s", b, err)
	}
	var other bytes.Buffer
	if err := opabundle.Build(context.Background(), src, opabundle.BuildOptions{SigningKey: "other", SigningAlg: "HS256"}, &other); err != nil {
		t.Fatal(err)
	}
	if _, err := opabundle.Read("main", bytes.NewReader(other.Bytes()), l.Bundles()[0].Signing, opabundle.Limits{}); err == nil {
		t.Error("a bundle signed with another secret was read")
	}
}

// FuzzRead feeds Read (the parser of what a bundle server sends) and the
// load that follows arbitrary bytes: errors, never a panic.
func FuzzRead(f *testing.F) {
	good := build(f, map[string]string{
		"toolgate/bounds/bounds.rego": boundsRego, "toolgate/bounds/bounds_test.rego": boundsTest,
		"toolgate/data.json": `{"policies": [{"name": "bounds", "package": "toolgate.bounds"}], "tools": {"t": ["bounds"]}}`,
	}, "r1")
	f.Add(good)
	f.Add(good[:len(good)/2])
	f.Add([]byte{0x1f, 0x8b})
	f.Add([]byte("not a tarball"))
	f.Fuzz(func(t *testing.T, data []byte) {
		b, err := opabundle.Read("main", bytes.NewReader(data), nil, opabundle.Limits{Compressed: 1 << 20, Expanded: 4 << 20, Entries: 1000, Entry: 1 << 20})
		if err != nil {
			return
		}
		c := policies.Config{Bundles: []policies.BundleConfig{{Name: "main", URL: "http://bundle.invalid/"}}}
		if l, err := c.Load("", policies.LoadOptions{Rego: rego.Host{}, Bundles: []*policies.Bundle{b}}); err == nil {
			l.Close(context.Background(), nil)
		}
	})
}
