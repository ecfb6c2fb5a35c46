package policycmd

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/toolgate/toolgate/cmd/toolgate/internal/config"
	"github.com/toolgate/toolgate/cmd/toolgate/internal/exit"
	"github.com/toolgate/toolgate/internal/atomicfile"
	"github.com/toolgate/toolgate/policies/opabundle"
	"github.com/toolgate/toolgate/policies/policytest"
	"github.com/toolgate/toolgate/policies/rego"
	"github.com/toolgate/toolgate/wasm"
)

// Build runs `toolgate policy build PATH`: it compiles the Rego policy at
// path to WebAssembly, checks the module loads in toolgate's engine, and
// writes it to out (a bundle, or a bare .wasm).
func Build(ctx context.Context, stdout io.Writer, path, out string) error {
	abs, err := filepath.Abs(path)
	if err != nil {
		return err
	}
	name := strings.TrimSuffix(filepath.Base(abs), ".rego")
	if out == "" {
		out = name + ".tar.gz"
	}
	bare := strings.HasSuffix(out, ".wasm")
	if !bare && !strings.HasSuffix(out, ".tar.gz") {
		return exit.AsUsage(fmt.Errorf("--out %q: name a .tar.gz (bundle) or a .wasm (bare module) file", out))
	}
	files, err := rego.Read(path)
	if err != nil {
		return fmt.Errorf("policy %q: %w", name, err)
	}
	if _, err := rego.Compile(name, files); err != nil {
		return err
	}
	// The bundle carries the sources under their paths below PATH, not the
	// build machine's.
	root := path // ReadRego names files below path as given
	if info, err := os.Stat(path); err == nil && !info.IsDir() {
		root = filepath.Dir(path)
	}
	rel := make(map[string][]byte, len(files))
	for f, b := range files {
		r, err := filepath.Rel(root, f)
		if err != nil {
			r = filepath.Base(f)
		}
		rel[filepath.ToSlash(r)] = b
	}
	files = rel
	compile := wasm.CompileRegoBundle
	if bare {
		compile = wasm.CompileRego
	}
	built, err := compile(ctx, files)
	if err != nil {
		return fmt.Errorf("policy %q: %w", name, err)
	}
	e, err := config.WasmEngine("")
	if err != nil {
		return err
	}
	p, err := e.Load(ctx, name, built, wasm.Options{})
	if err != nil {
		return err
	}
	abi := p.ABI()
	_ = p.Close(ctx)
	if err := atomicfile.WriteFile(out, built, 0o644); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "built %s: %d bytes, %s, entrypoint %s\n", out, len(built), abi, rego.DecisionEntrypoint)
	return nil
}

// BundleFlags are policy build's flags for --bundle.
type BundleFlags struct {
	Bundle                           bool
	Revision, SigningKey, SigningAlg string
}

// BuildBundle builds the OPA bundle of the folder dir into out.
func BuildBundle(ctx context.Context, stdout io.Writer, dir, out string, f BundleFlags) error {
	if out == "" {
		out = "bundle.tar.gz"
	}
	if !strings.HasSuffix(out, ".tar.gz") {
		return exit.AsUsage(fmt.Errorf("--out %q: a bundle is a .tar.gz file", out))
	}
	if fi, err := os.Stat(dir); err != nil {
		return err
	} else if !fi.IsDir() {
		return exit.AsUsage(fmt.Errorf("%s: --bundle builds a folder", dir))
	}
	var buf bytes.Buffer
	o := opabundle.BuildOptions{Revision: f.Revision, SigningKey: f.SigningKey, SigningAlg: f.SigningAlg}
	if err := opabundle.Build(ctx, dir, o, &buf); err != nil {
		return err
	}
	tmp, err := os.CreateTemp("", "toolgate-bundle-*.tar.gz")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.Write(buf.Bytes())
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	l, err := policytest.LoadBundle(tmp.Name())
	if err != nil {
		return fmt.Errorf("a sidecar would refuse the bundle: %w", err)
	}
	n := len(l.Names())
	_ = l.Close(ctx, nil)
	if err := atomicfile.WriteFile(out, buf.Bytes(), 0o644); err != nil {
		return err
	}
	signed := "unsigned"
	if f.SigningKey != "" {
		signed = "signed " + f.SigningAlg
	}
	fmt.Fprintf(stdout, "built %s: %d bytes, revision %q, %d policies, %s\n", out, buf.Len(), f.Revision, n, signed)
	return nil
}
