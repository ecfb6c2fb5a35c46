package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/toolgate/toolgate/cmd/toolgate/internal/config"
	"github.com/toolgate/toolgate/policies/opabundle"
	"github.com/toolgate/toolgate/policies/policytest"
	"github.com/toolgate/toolgate/policies/rego"
	"github.com/toolgate/toolgate/wasm"
)

func newPolicyBuildCmd() *cobra.Command {
	var out string
	var bo bundleBuildFlags
	c := &cobra.Command{
		Use:   "build PATH [-o FILE]",
		Short: "Compile a Rego policy to WebAssembly",
		Long: `Build compiles the Rego policy at PATH (a .rego file, or a folder of them;
*_test.rego files are left out) with OPA's WASM compiler into a module whose
one entrypoint, toolgate_decision/decision, is the policy's decision
document {deny, allow, inject}. It writes an OPA bundle (.tar.gz, as
'opa build -t wasm' does) or, when FILE ends in .wasm, the bare module.
Either goes in a configuration's policies.wasm list.

The policy is compiled by the interpreter too (so errors name file and
line), and the module is loaded once into toolgate's WASM engine, so a
module that would not run is refused here. Builtins OPA's WASM runtime
leaves to the host (sprintf, time.*, units.*, ...) are run by toolgate with
OPA's Go implementations, as in the interpreter. Run 'toolgate policy test'
for its tests.

Writes FILE (default: the policy's name + .tar.gz) with mode 0644 through a
temporary file, so a failed build leaves an existing FILE as it was.

With --bundle, PATH is a folder and FILE an OPA bundle of its Rego files and
data files, built by OPA's compiler as 'opa build --bundle PATH' builds it,
with --revision and signed with --signing-key (as 'opa build --signing-key'
signs), for a sidecar's policies.bundles. toolgate's settings (which
policies, their modes, which tools they bind) go in PATH/toolgate/data.json;
docs/bundles.md describes them. The bundle is read back and its policies
compiled as a sidecar would, so a bundle a sidecar would refuse is refused
here; 'toolgate policy test FILE' runs its tests.`,
		Args: exactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			if bo.bundle {
				return runBundleBuild(c.Context(), c.OutOrStdout(), args[0], out, bo)
			}
			if bo.revision != "" || bo.signingKey != "" {
				return usageError{fmt.Errorf("--revision and --signing-key go with --bundle")}
			}
			return runPolicyBuild(c.Context(), c.OutOrStdout(), args[0], out)
		},
	}
	c.Flags().StringVarP(&out, "out", "o", "", "output file: .tar.gz for a bundle, .wasm for the bare module (default NAME.tar.gz; bundle.tar.gz with --bundle)")
	c.Flags().BoolVar(&bo.bundle, "bundle", false, "build an OPA bundle of the Rego policies and data under the folder PATH, for policies.bundles (docs/bundles.md)")
	c.Flags().StringVar(&bo.revision, "revision", "", "with --bundle: the bundle's revision")
	c.Flags().StringVar(&bo.signingKey, "signing-key", "", "with --bundle: sign the bundle with this PEM private key file")
	c.Flags().StringVar(&bo.signingAlg, "signing-alg", "RS256", "with --bundle: the signature's algorithm")
	return c
}

func runPolicyBuild(ctx context.Context, stdout io.Writer, path, out string) error {
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
		return usageError{fmt.Errorf("--out %q: name a .tar.gz (bundle) or a .wasm (bare module) file", out)}
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
	if err := writeFileAtomic(out, built, 0o644); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "built %s: %d bytes, %s, entrypoint %s\n", out, len(built), abi, rego.DecisionEntrypoint)
	return nil
}

// bundleBuildFlags are policy build's flags for --bundle.
type bundleBuildFlags struct {
	bundle                           bool
	revision, signingKey, signingAlg string
}

// runBundleBuild builds the OPA bundle of the folder dir into out.
func runBundleBuild(ctx context.Context, stdout io.Writer, dir, out string, f bundleBuildFlags) error {
	if out == "" {
		out = "bundle.tar.gz"
	}
	if !strings.HasSuffix(out, ".tar.gz") {
		return usageError{fmt.Errorf("--out %q: a bundle is a .tar.gz file", out)}
	}
	if fi, err := os.Stat(dir); err != nil {
		return err
	} else if !fi.IsDir() {
		return usageError{fmt.Errorf("%s: --bundle builds a folder", dir)}
	}
	var buf bytes.Buffer
	o := opabundle.BuildOptions{Revision: f.revision, SigningKey: f.signingKey, SigningAlg: f.signingAlg}
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
	if err := writeFileAtomic(out, buf.Bytes(), 0o644); err != nil {
		return err
	}
	signed := "unsigned"
	if f.signingKey != "" {
		signed = "signed " + f.signingAlg
	}
	fmt.Fprintf(stdout, "built %s: %d bytes, revision %q, %d policies, %s\n", out, buf.Len(), f.revision, n, signed)
	return nil
}
