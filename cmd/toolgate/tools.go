package main

import (
	"errors"

	"github.com/spf13/cobra"

	"github.com/toolgate/toolgate/cmd/toolgate/internal/exit"
	"github.com/toolgate/toolgate/cmd/toolgate/internal/openapiimport"
)

func newToolsCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "tools",
		Short: "Make tool entries: import them from an OpenAPI document",
		Args:  exactArgs(0),
		RunE:  func(c *cobra.Command, _ []string) error { return c.Help() },
	}
	imp := &cobra.Command{
		Use:   "import",
		Short: "Import tool entries from a description of an API",
		Args:  exactArgs(0),
		RunE:  func(c *cobra.Command, _ []string) error { return c.Help() },
	}
	imp.AddCommand(newToolsImportOpenAPICmd())
	c.AddCommand(imp)
	return c
}

func newToolsImportOpenAPICmd() *cobra.Command {
	var opts openapiimport.RunOptions
	c := &cobra.Command{
		Use:   "openapi FILE|URL",
		Short: "Write a checked tool for each operation of an OpenAPI document",
		Long: `Import reads an OpenAPI 3.0 or 3.1 document (or Swagger 2.0, converted) and
writes one tool per operation: its name from the operationId, its match
(the server's host, the method, the path template), where its arguments
come from, and one JSON Schema for them (parameters and request body
merged, $refs resolved, OpenAPI's keywords translated to JSON Schema
2020-12). Operations it cannot check are listed with why, in the report
and in the file's header.

The tools go to stdout, or to -o FILE: when FILE exists, the changes to
each tool are printed before it is replaced (--dry-run prints them only).
See docs/from-zero-to-checked.md.`,
		Args: func(c *cobra.Command, args []string) error {
			if len(args) != 1 {
				return exit.AsUsage(errors.New("give one OpenAPI document, a file or a URL (see 'toolgate tools import openapi --help')"))
			}
			return nil
		},
		RunE: func(c *cobra.Command, args []string) error {
			opts.Source = args[0]
			return openapiimport.Run(c.Context(), opts, c.OutOrStdout(), c.ErrOrStderr())
		},
	}
	f := c.Flags()
	f.StringVarP(&opts.Output, "output", "o", "", "write the tools to this file (default stdout); an existing file's changes are printed first")
	f.BoolVar(&opts.DryRun, "dry-run", false, "print the report and the changes, write nothing")
	f.StringVar(&opts.Import.Server, "server", "", "the server the tools match: an index into the document's servers, or a URL used instead (needed when it lists several or none)")
	f.StringVar(&opts.Import.Prefix, "prefix", "", "put this before every tool name, such as 'petstore.'")
	f.BoolVar(&opts.Import.NotStrict, "not-strict", false, "write strict: false: the schemas stay open wherever the document does not close them")
	f.DurationVar(&opts.Timeout, "timeout", openapiimport.DefaultFetchTimeout, "bound on fetching a URL")
	return c
}
