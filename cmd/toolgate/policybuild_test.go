package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/policies"
	"github.com/toolgate/toolgate/wasm"
)

// TestPolicyBuild builds the bounds example (which needs the host's
// sprintf) into a bundle and a bare module, loads each as the sidecar
// would, and checks their decisions; bad input fails with a clear message
// and leaves no file behind.
func TestPolicyBuild(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx := context.Background()
	for _, out := range []string{"bounds.tar.gz", "bounds.wasm"} {
		t.Run(out, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			path := filepath.Join(dir, out)
			code := run(ctx, []string{"policy", "build", "../../examples/policies/bounds", "-o", path}, &stdout, &stderr)
			if code != 0 || !strings.HasPrefix(stdout.String(), "built "+path+": ") {
				t.Fatalf("exit %d, stdout %q, stderr %q", code, stdout.String(), stderr.String())
			}
			e, err := wasm.NewEngine(ctx, wasm.EngineOptions{CacheDir: "off"})
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close(ctx)
			p, err := e.LoadFile(ctx, "bounds", path, wasm.Options{})
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range []struct {
				retmax string
				denied bool
			}{{"20", false}, {"500", true}} {
				res, err := p.Eval(ctx, &policies.Input{Tool: "pubmed_search", Arguments: map[string]any{"retmax": json.Number(c.retmax)}})
				if err != nil {
					t.Fatal(err)
				}
				if got := len(res.Denies) > 0; got != c.denied {
					t.Errorf("retmax %s: denies %+v, want denied=%v", c.retmax, res.Denies, c.denied)
				}
				if c.denied && (res.Denies[0].Message != "retmax must be at most 100" || res.Denies[0].Path != "/retmax") {
					t.Errorf("retmax %s: deny %+v, want sprintf's message at /retmax", c.retmax, res.Denies[0])
				}
			}
		})
	}

	bad := filepath.Join(dir, "bad")
	if err := os.Mkdir(bad, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(bad, "p.rego"), "package p\n\ndeny contains \"x\" if http.send({\"method\": \"GET\", \"url\": \"http://x\"})\n")
	for _, c := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"network builtin", []string{"policy", "build", bad, "-o", filepath.Join(dir, "bad.wasm")}, 1, "http.send"},
		{"output kind", []string{"policy", "build", "../../examples/policies/bounds", "-o", filepath.Join(dir, "b.zip")}, 2, "name a .tar.gz (bundle) or a .wasm"},
		{"missing policy", []string{"policy", "build", filepath.Join(dir, "nowhere"), "-o", filepath.Join(dir, "n.wasm")}, 1, "no such file"},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(ctx, c.args, &stdout, &stderr); code != c.code || !strings.Contains(stderr.String(), c.want) {
			t.Errorf("%s: exit %d, stderr %q; want exit %d and %q", c.name, code, stderr.String(), c.code, c.want)
		}
	}
	for _, f := range []string{"bad.wasm", "b.zip", "n.wasm"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
			t.Errorf("a failed build left %s behind", f)
		}
	}
}
