package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/toolgate/toolgate/cmd/toolgate/internal/exit"
	"github.com/toolgate/toolgate/cmd/toolgate/internal/policycmd"
)

func newPolicyCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "policy",
		Short: "Test, evaluate and check Rego policies and the checks they take part in",
		Long: `Policy is the command line for working on policies without running the
sidecar: test runs policies' Rego unit tests and case files, eval shows what
the checks decide for one call, check loads a configuration as the sidecar
would and reports whether it loads (and which listen addresses another
process holds).

Configurations load as 'toolgate run' loads them, and every bound policy's
unit tests run first. test and eval send nothing, so "${NAME}" in
inject_headers needs no environment variable there (an injected secret
shows as "(set)"); check, like run, needs NAME set and non-empty.`,
		RunE: func(c *cobra.Command, args []string) error {
			if len(args) == 0 {
				return exit.AsUsage(fmt.Errorf("missing subcommand: test, eval, check or build (see '%s --help')", c.CommandPath()))
			}
			return exit.AsUsage(fmt.Errorf("unknown command %q for %q (see '%s --help')", args[0], c.CommandPath(), c.CommandPath()))
		},
	}
	c.AddCommand(newPolicyTestCmd(), newPolicyEvalCmd(), newPolicyCheckCmd(), newPolicyBuildCmd())
	return c
}

func newPolicyTestCmd() *cobra.Command {
	var cfgPath string
	c := &cobra.Command{
		Use:   "test DIR|BUNDLE.tar.gz",
		Short: "Run policies' Rego unit tests and case files",
		Long: `Test runs everything under DIR (or the one .cases.yaml file DIR names; a
.rego file stands for its policy, the folder holding it) and prints one PASS
or FAIL line per test, then "N passed, M failed".
It exits 0 when at least one test ran and none failed, 1 otherwise, and 2 on
a usage error.

Rego unit tests: every folder holding .rego files (DIR itself included) is
one policy, named after the folder, with every .rego file below it; its
test_ rules in *_test.rego files run through OPA's tester, and, when the
policy runs on the compiled engine, again on that engine: a test that passes
in one and not the other fails. The engine is compiled (the default) unless
--config gives the policy (its policies.rego entry, by path) another one.
A policy that does not compile is one failure, with the compiler's message.

  PASS bounds/test_over_bounds_denied (210µs)
  FAIL bounds/test_within_bounds_allowed (policies/bounds/bounds_test.rego:5)

Case files: every *.cases.yaml file under DIR lists calls and what the
checks must decide for each (outcome, code, reason, message, violation
paths, dry-run denials, injected headers). A case runs the same checks the
sidecar runs for a call, through a configuration loaded as 'toolgate run'
loads it (the file's config: key, or --config), without sending anything.
docs/policies.md ("Case files") describes the format. Keys are checked: an
unknown or misspelt key is an error naming the file and line. A case that
does not match prints what it wanted and what it got:

  FAIL cases/examples.cases.yaml: retmax over the bound
    outcome  want refused      got allowed
    code     want validation   got (none)

Bundles: when DIR is an OPA bundle (a .tar.gz, as 'opa build' writes it),
its policies are chosen and compiled as a sidecar activating it would (its
data.toolgate settings, or one policy per package; docs/bundles.md) and
their unit tests run. The bundle's signature is not checked here.`,
		Args: exactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			return policycmd.Test(c.Context(), c.OutOrStdout(), args[0], cfgPath)
		},
	}
	c.Flags().StringVarP(&cfgPath, "config", "c", "", "configuration for every case file, instead of each file's config key; its engines apply to the Rego tests")
	return c
}

func newPolicyEvalCmd() *cobra.Command {
	var cfgPath, tool, args, evalURL string
	var mf policycmd.MCPFlags
	var headers []string
	c := &cobra.Command{
		Use:   "eval --config FILE --tool NAME --args JSON [--url URL] [--header K=V ...] [--tools-list FILE | --live URL] [--route NAME]",
		Short: "Show what the checks decide for one call",
		Long: `Eval runs one tool's checks (its schema, its policies, then the origin rule
for injected headers: the sidecar's own chain without sending anything) on
the given arguments as the sidecar would for a call with a JSON body, and
prints the decision: allowed, needs_approval (a policy holds it for a
person's approval; shown with the effect and the fields the person sees) or
refused, the code, reason and detail, each violation's path and message,
the denials of dry-run policies, the headers that would be injected
upstream (secrets show as "(set)") with the only origin they go to, and,
for a refusal, the exact envelope the caller would get.

--url is the URL the call goes to, as the service sends it
(http://localhost:8080/v1/notes): it is put in canonical form and routed as
the sidecar does (it must reach --tool; its path variables join the
arguments), and a tool that injects headers refuses it, as the sidecar
does, when it goes to another origin than the tool's (plain HTTP without
inject_over_http, another port than match.host names). Without --url the
call goes to the tool's own origin (https, its host and port).

--args is the JSON object of arguments, as a JSON body would carry them.
What eval cannot reproduce: for a tool that reads its arguments from the
query string, a form body or path variables, the sidecar turns "5" into 5
where the schema asks for a number; eval does not, so write numbers and
booleans as JSON ({"days": 5}, not {"days": "5"}). Repeated keys are arrays.
--header adds a request header, such as the agent and session headers or
a header policies may see (policies.headers); repeat it for more.

MCP tools: with --tools-list or --live, --tool names a tool of an MCP
server (the name a tools/call gives) and eval runs the checks of an MCP
route (protocol: mcp; --route names it when the configuration has more
than one) for a tools/call of it: the schema mcp.tools gives it, else the
one the server lists, the unknown-tool rule (a tool the list lacks is
refused as unknown_tool, or passes unchecked with unknown_tool: pass), then
the route's policies. A refusal prints the JSON-RPC answer the caller
would get: a result with isError true, over HTTP 200.
--tools-list FILE is a recorded tools/list answer: its result, or the
JSON-RPC response (a JSON or text/event-stream body), the whole list in
one page. --live URL lists the tools of the MCP server at URL with the
route's own tools/list, bounded as the route bounds it (its timeout,
max_message_bytes, 20 pages), with the route's inject_headers (so, like
run, it needs their environment variables) and the --header values; the
route must match URL. Only tools/list is sent, never the tools/call: a
server that keeps sessions, and so refuses a tools/list outside one, is
sent initialize and notifications/initialized first, and the session is
closed (DELETE) at the end.
What eval cannot reproduce for MCP: the list the sidecar holds at the
time of a call (it learns lists from the traffic, per server and per
authorization context for lists marked cacheScope private, and forgets
them on list_changed or ttlMs expiry), a batch, a caller's _meta, and the
2026-07-28 header checks (Mcp-Method, Mcp-Name). A --header
MCP-Protocol-Version=2026-07-28 shows the answer of that era
(resultType complete).

Exit codes: 0 when the call would be allowed, 3 when it would be refused,
1 on an error (a configuration that does not load, --args that is not a JSON
object, a tool the configuration does not have, a tools/list that cannot be
read or fetched), 2 on a usage error.`,
		Args: exactArgs(0),
		RunE: func(c *cobra.Command, _ []string) error {
			if tool == "" {
				return exit.AsUsage(fmt.Errorf("--tool is required (see '%s --help')", c.CommandPath()))
			}
			if mf.ToolsList != "" && mf.Live != "" {
				return exit.AsUsage(fmt.Errorf("--tools-list and --live: give one (see '%s --help')", c.CommandPath()))
			}
			if mf.Route != "" && mf.ToolsList == "" && mf.Live == "" {
				return exit.AsUsage(fmt.Errorf("--route needs --tools-list or --live (see '%s --help')", c.CommandPath()))
			}
			h, err := policycmd.ParseHeaders(headers)
			if err != nil {
				return exit.AsUsage(err)
			}
			if err := checkConfigGiven(c, cfgPath); err != nil {
				return err
			}
			if mf.ToolsList != "" || mf.Live != "" {
				return policycmd.EvalMCP(c.Context(), c.OutOrStdout(), cfgPath, tool, args, h, mf)
			}
			return policycmd.Eval(c.Context(), c.OutOrStdout(), cfgPath, tool, evalURL, args, h)
		},
	}
	c.Flags().StringVarP(&cfgPath, "config", "c", defaultConfig, "configuration file")
	c.Flags().StringVar(&tool, "tool", "", "the tool's name in the configuration, or with --tools-list or --live an MCP tool's name (required)")
	c.Flags().StringVar(&args, "args", "{}", "the call's arguments: a JSON object")
	c.Flags().StringArrayVar(&headers, "header", nil, "a request header as NAME=VALUE (repeatable)")
	c.Flags().StringVar(&evalURL, "url", "", "the URL the call goes to, as the service sends it (scheme, host, port, path); default: the tool's own origin over https")
	c.Flags().StringVar(&mf.ToolsList, "tools-list", "", "a recorded tools/list answer (JSON-RPC response or result) giving the MCP tools' schemas")
	c.Flags().StringVar(&mf.Live, "live", "", "the URL of the MCP server to list the tools of, with the route's own tools/list")
	c.Flags().StringVar(&mf.Route, "route", "", "the MCP route's name in the configuration (default: its only MCP route)")
	return c
}

func newPolicyCheckCmd() *cobra.Command {
	var cfgPath string
	c := &cobra.Command{
		Use:   "check --config FILE",
		Short: "Load a configuration, its schemas and policies, and report",
		Long: `Check loads a configuration as 'toolgate run' does (the file, its schemas,
its policies, every policy's unit tests) without starting anything, and
prints "ok: N tools, M policies, config version V, policy version W", or the
first error as FILE:LINE: field: message. It exits 0 or 1: a step for the CI
of a policy repository. It starts nothing, so it cannot promise that run
will start: a listen address another process holds (a running sidecar, for
one) is named on a "note:" line after "ok", and an events folder that
cannot be written shows only when run opens it.`,
		Args: exactArgs(0),
		RunE: func(c *cobra.Command, _ []string) error {
			if err := checkConfigGiven(c, cfgPath); err != nil {
				return err
			}
			return policycmd.Check(c.OutOrStdout(), cfgPath)
		},
	}
	c.Flags().StringVarP(&cfgPath, "config", "c", defaultConfig, "configuration file")
	return c
}
