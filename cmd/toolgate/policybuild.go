package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/toolgate/toolgate/cmd/toolgate/internal/config"
	"github.com/toolgate/toolgate/policies/rego"
	"github.com/toolgate/toolgate/wasm"
)

func newPolicyBuildCmd() *cobra.Command {
	var out string
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
temporary file, so a failed build leaves an existing FILE as it was.`,
		Args: exactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			return runPolicyBuild(c.Context(), c.OutOrStdout(), args[0], out)
		},
	}
	c.Flags().StringVarP(&out, "out", "o", "", "output file: .tar.gz for a bundle, .wasm for the bare module (default NAME.tar.gz)")
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
