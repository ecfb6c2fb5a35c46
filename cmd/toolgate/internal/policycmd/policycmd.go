// Package policycmd is the work of `toolgate policy`: test (Rego unit
// tests and case files, through policies/policytest), eval (one call's
// verdict, through proxy.Evaluate), check (a configuration loads as run
// loads it) and build (a Rego policy compiled to WebAssembly, or an OPA
// bundle).
package policycmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"

	"github.com/toolgate/toolgate/cmd/toolgate/internal/config"
	"github.com/toolgate/toolgate/cmd/toolgate/internal/exit"
	"github.com/toolgate/toolgate/policies"
	"github.com/toolgate/toolgate/policies/policytest"
	"github.com/toolgate/toolgate/proxy"
)

// MCPFlags are policy eval's flags for MCP tools: --tools-list, --live,
// --route.
type MCPFlags struct{ ToolsList, Live, Route string }

// EvalMCP runs `toolgate policy eval` for a tool of an MCP server, whose
// schema comes from a recorded tools/list (mf.ToolsList) or a live one
// (mf.Live), and prints the verdict on out.
func EvalMCP(ctx context.Context, out io.Writer, cfgPath, tool, rawArgs string, h http.Header, mf MCPFlags) error {
	args, err := policytest.DecodeArguments([]byte(rawArgs))
	if err != nil {
		return fmt.Errorf("--args: %w", err)
	}
	src := proxy.MCPTools{Route: mf.Route, Live: mf.Live}
	var lc *config.Loaded
	if mf.Live != "" {
		// A live list is sent with the route's inject_headers: their
		// secrets must be there, as for run.
		lc, err = config.Load(cfgPath)
	} else {
		lc, err = config.LoadOffline(cfgPath)
	}
	if err != nil {
		return err
	}
	if mf.ToolsList != "" {
		if src.List, err = policytest.ReadToolsList(mf.ToolsList); err != nil {
			return fmt.Errorf("--tools-list: %w", err)
		}
	}
	v, err := proxy.EvaluateMCP(ctx, lc.Snapshot, src, tool, args, h)
	if err != nil {
		return err
	}
	policytest.PrintVerdict(out, tool, v)
	if !v.Allowed {
		return exit.Status(exit.Refused)
	}
	return nil
}

// Check loads the configuration at cfgPath as run does and prints
// "ok: ..." and a note for each listen address another process holds.
func Check(out io.Writer, cfgPath string) error {
	lc, err := config.Load(cfgPath)
	if err != nil {
		return err
	}
	pv := lc.LoadedPolicies.Version()
	if pv == "" {
		pv = "(none)"
	}
	fmt.Fprintf(out, "ok: %d tools, %d policies, config version %s, policy version %s\n",
		len(lc.Tools), len(lc.LoadedPolicies.Names()), lc.Version, pv)
	for _, n := range takenAddrs(lc) {
		fmt.Fprintf(out, "note: %s: %s is in use by another process; run would not start here while it is\n", n.field, n.addr)
	}
	return nil
}

// takenAddr is a configured listen address another process holds.
type takenAddr struct{ field, addr string }

// takenAddrs tries each fixed listen address of lc (not port 0, not "off")
// and returns those it cannot bind, releasing the others at once.
func takenAddrs(lc *config.Loaded) []takenAddr {
	addrs := []takenAddr{{"listen.forward", lc.Listen.Forward}, {"listen.transparent", lc.Listen.Transparent}, {"admin.listen", lc.Admin.Listen}}
	for i, r := range lc.Listen.Reverse {
		addrs = append(addrs, takenAddr{fmt.Sprintf("listen.reverse[%d].listen", i), r.Listen})
	}
	var taken []takenAddr
	for _, a := range addrs {
		if a.addr == "" || a.addr == "off" || strings.HasSuffix(a.addr, ":0") {
			continue
		}
		ln, err := net.Listen("tcp", a.addr)
		if err != nil {
			taken = append(taken, a)
			continue
		}
		ln.Close()
	}
	return taken
}

// ParseHeaders turns --header NAME=VALUE flags into request headers.
func ParseHeaders(flags []string) (http.Header, error) {
	h := http.Header{}
	for _, f := range flags {
		k, v, ok := strings.Cut(f, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" || strings.ContainsAny(k, " \t:") {
			return nil, fmt.Errorf("--header %q: expected NAME=VALUE", f)
		}
		h.Add(k, v)
	}
	return h, nil
}

// Eval runs `toolgate policy eval`: the checks of the configuration at
// cfgPath on one call of tool, sent to rawURL ("" for the tool's own
// origin), printing the verdict on out.
func Eval(ctx context.Context, out io.Writer, cfgPath, tool, rawURL, rawArgs string, h http.Header) error {
	args, err := policytest.DecodeArguments([]byte(rawArgs))
	if err != nil {
		return fmt.Errorf("--args: %w", err)
	}
	lc, err := config.LoadOffline(cfgPath)
	if err != nil {
		return err
	}
	v, err := proxy.EvaluateAt(ctx, lc.Snapshot, tool, rawURL, args, h)
	if err != nil {
		return err
	}
	policytest.PrintVerdict(out, tool, v)
	if !v.Allowed && v.Reason == "wrong_type" && readsStrings(lc, tool) {
		fmt.Fprintln(out, "\nnote: this tool reads arguments from the path, the query string or a form, where the sidecar turns \"5\" into 5 as the schema asks; --args is read as a JSON body is, without that coercion: write numbers and booleans as JSON")
	}
	if !v.Allowed {
		return exit.Status(exit.Refused)
	}
	return nil
}

// Test runs `toolgate policy test` and maps its report to an exit
// code: 0 when at least one test ran and none failed, 1 otherwise, 2 for a
// path that holds no policy work.
func Test(ctx context.Context, out io.Writer, dir, cfgPath string) error {
	var rep policytest.Report
	var err error
	if policytest.IsBundle(dir) {
		rep, err = policytest.RunBundle(ctx, out, dir)
	} else {
		rep, err = policytest.Run(ctx, out, dir, cfgPath, loadCaseConfig)
	}
	switch {
	case errors.Is(err, policytest.ErrNotPolicyPath):
		return exit.AsUsage(err)
	case err != nil:
		return err
	case rep.Failed > 0:
		return exit.Status(exit.Error)
	case rep.Passed == 0:
		return fmt.Errorf("no Rego tests and no cases (*%s) under %s", policytest.CaseFileSuffix, dir)
	}
	return nil
}

// loadCaseConfig loads a case file's configuration as policy eval does
// (offline), for policytest.
func loadCaseConfig(path string) (policytest.Config, error) {
	lc, err := config.LoadOffline(path)
	if err != nil {
		return nil, err
	}
	return caseConfig{lc}, nil
}

// caseConfig is a configuration as policytest sees it: the proxy's
// evaluation of its snapshot.
type caseConfig struct{ lc *config.Loaded }

func (c caseConfig) Evaluate(ctx context.Context, tool string, args map[string]any, h http.Header) (policytest.Verdict, error) {
	v, err := proxy.Evaluate(ctx, c.lc.Snapshot, tool, args, h)
	return v, err
}

func (c caseConfig) EvaluateMCP(ctx context.Context, t policytest.MCPTools, tool string, args map[string]any, h http.Header) (policytest.Verdict, error) {
	v, err := proxy.EvaluateMCP(ctx, c.lc.Snapshot, proxy.MCPTools{Route: t.Route, List: t.List}, tool, args, h)
	return v, err
}

func (c caseConfig) PolicySection() (string, *policies.Config) { return c.lc.Path, &c.lc.Policies }

var _ policytest.Config = caseConfig{}

// readsStrings reports whether the named tool takes arguments from a
// string-only source (path, query, form; path and query by default),
// whose values the sidecar coerces and policy eval does not.
func readsStrings(lc *config.Loaded, tool string) bool {
	for _, t := range lc.Tools {
		if t.Name != tool {
			continue
		}
		if len(t.Args) == 0 {
			return true
		}
		for _, a := range t.Args {
			if a == "path" || a == "query" || a == "form" {
				return true
			}
		}
	}
	return false
}
