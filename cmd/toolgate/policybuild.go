package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/toolgate/toolgate/cmd/toolgate/internal/exit"
	"github.com/toolgate/toolgate/cmd/toolgate/internal/policycmd"
)

func newPolicyBuildCmd() *cobra.Command {
	var out string
	var bo policycmd.BundleFlags
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
			if bo.Bundle {
				return policycmd.BuildBundle(c.Context(), c.OutOrStdout(), args[0], out, bo)
			}
			if bo.Revision != "" || bo.SigningKey != "" {
				return exit.AsUsage(fmt.Errorf("--revision and --signing-key go with --bundle"))
			}
			return policycmd.Build(c.Context(), c.OutOrStdout(), args[0], out)
		},
	}
	c.Flags().StringVarP(&out, "out", "o", "", "output file: .tar.gz for a bundle, .wasm for the bare module (default NAME.tar.gz; bundle.tar.gz with --bundle)")
	c.Flags().BoolVar(&bo.Bundle, "bundle", false, "build an OPA bundle of the Rego policies and data under the folder PATH, for policies.bundles (docs/bundles.md)")
	c.Flags().StringVar(&bo.Revision, "revision", "", "with --bundle: the bundle's revision")
	c.Flags().StringVar(&bo.SigningKey, "signing-key", "", "with --bundle: sign the bundle with this PEM private key file")
	c.Flags().StringVar(&bo.SigningAlg, "signing-alg", "RS256", "with --bundle: the signature's algorithm")
	return c
}
