package main

import (
	"time"

	"github.com/spf13/cobra"

	"github.com/toolgate/toolgate/cmd/toolgate/internal/exit"
	"github.com/toolgate/toolgate/cmd/toolgate/internal/mcppin"
)

func newMCPCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "mcp",
		Short: "Work with MCP servers: pin their tool definitions",
		Args:  exactArgs(0),
		RunE:  func(c *cobra.Command, _ []string) error { return c.Help() },
	}
	c.AddCommand(newMCPPinCmd())
	return c
}

func newMCPPinCmd() *cobra.Command {
	var opts mcppin.Options
	var headers []string
	c := &cobra.Command{
		Use:   "pin",
		Short: "Pin the tool definitions of a live MCP server in a lock file",
		Long: `Pin lists every tool of a live MCP server (streamable HTTP, every page)
and writes the route's entries for that server in a lock file: each tool's
digest, a digest per field and its definition, for review. Other routes'
and servers' entries are kept. It prints each tool that is new, changed
(with the fields that changed, never their values) or removed.

Name the lock file in the route's mcp.pin.lock_file: the sidecar loads it,
and refuses calls to a tool whose definition differs (docs/mcp.md, "Pinned
tool definitions"). With --check nothing is written, and the command fails
when the lock file is out of date (for CI).`,
		Args: exactArgs(0),
		RunE: func(c *cobra.Command, _ []string) error {
			h, err := mcppin.ParseHeaders(headers)
			if err != nil {
				return exit.AsUsage(err)
			}
			opts.Header = h
			return mcppin.Run(c.Context(), opts, c.OutOrStdout())
		},
	}
	f := c.Flags()
	f.StringVar(&opts.URL, "url", "", "the MCP server's endpoint, such as http://127.0.0.1:8080/mcp (required)")
	f.StringVar(&opts.Route, "route", "", "the MCP route's name (tools[].name) the pins are for (required)")
	f.StringVar(&opts.LockFile, "lock", "", "the lock file to write, created when missing (required)")
	f.StringArrayVar(&headers, "header", nil, "a header sent with every request, 'Name: value' (repeatable)")
	f.BoolVar(&opts.Check, "check", false, "compare without writing; fail when the lock file is out of date")
	f.DurationVar(&opts.Timeout, "timeout", 30*time.Second, "bound on the whole run")
	return c
}
