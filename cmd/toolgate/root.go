package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime/debug"

	"github.com/spf13/cobra"

	"github.com/toolgate/toolgate/cmd/toolgate/internal/exit"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = ""

// Exit codes (package exit holds them, for the commands' work wherever it
// lives).
const (
	exitOK      = exit.OK
	exitError   = exit.Error
	exitUsage   = exit.Usage
	exitRefused = exit.Refused
)

// run executes one toolgate command line and returns its exit code. It is
// main without the process: tests call it with buffers.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	root := newRootCmd(stdout, stderr)
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return exitOK
	}
	var st exit.Status
	if errors.As(err, &st) {
		return int(st) // the command has said why
	}
	fmt.Fprintln(stderr, "toolgate:", err)
	var ue exit.UsageError
	if errors.As(err, &ue) {
		return exitUsage
	}
	return exitError
}

func newRootCmd(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:           "toolgate",
		Short:         "The tool-call sidecar: strict arguments, one envelope, one event per call",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	// An unknown command is a usage error; the bare command prints help.
	root.Args = func(c *cobra.Command, args []string) error {
		if len(args) > 0 {
			return exit.AsUsage(fmt.Errorf("unknown command %q (see '%s --help')", args[0], c.CommandPath()))
		}
		return nil
	}
	root.RunE = func(c *cobra.Command, _ []string) error { return c.Help() }
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return exit.AsUsage(fmt.Errorf("%w (see '%s --help')", err, c.CommandPath()))
	})
	root.Version = buildVersion()
	root.SetVersionTemplate("toolgate {{.Version}}\n")
	root.AddCommand(newRunCmd(), newDemoCmd(), newVersionCmd(), newPolicyCmd(), newSchemaCmd(), newDashboardCmd(), newCACmd(), newApprovalsCmd(), newMCPCmd(), newToolsCmd())
	return root
}

// exactArgs is cobra.ExactArgs whose failure is a usage error (exit 2).
func exactArgs(n int) cobra.PositionalArgs {
	return func(c *cobra.Command, args []string) error {
		if err := cobra.ExactArgs(n)(c, args); err != nil {
			return exit.AsUsage(fmt.Errorf("%w (see '%s --help')", err, c.CommandPath()))
		}
		return nil
	}
}

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Args:  exactArgs(0),
		RunE: func(c *cobra.Command, _ []string) error {
			fmt.Fprintln(c.OutOrStdout(), "toolgate", buildVersion())
			return nil
		},
	}
}

func buildVersion() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}
