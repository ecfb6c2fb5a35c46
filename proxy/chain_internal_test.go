package proxy

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/toolgate/toolgate/policies"
	"github.com/toolgate/toolgate/policies/budget"
	"github.com/toolgate/toolgate/proxy/budgetengine"
	"github.com/toolgate/toolgate/proxy/internal/conf"
	"github.com/toolgate/toolgate/proxy/internal/mcpcall"
	"github.com/toolgate/toolgate/proxy/internal/pipe"
)

// allowAll is a policy step that allows every call.
type allowAll struct{}

func (allowAll) Check(context.Context, *policies.Input) policies.Decision {
	return policies.Decision{Allow: true}
}

// noApproval is an approval step no call needs.
type noApproval struct{}

func (noApproval) Approve(context.Context, *policies.ApprovalCall) policies.ApprovalOutcome {
	return policies.ApprovalOutcome{}
}

// TestCompileChain checks that each tool's chain holds the steps its
// configuration asks for, in requestOrder, and no others: a tool without
// a schema has no schema step, one without policies no policy step.
func TestCompileChain(t *testing.T) {
	const cfgYAML = `
tools:
  - name: bare
    match: {path: /bare}
  - name: schema_only
    match: {path: /schema}
    schema: {type: object}
  - name: with_policies
    match: {path: /policies}
    schema: {type: object}
  - name: injects
    match: {host: api.example.org, path: /inject}
    inject_headers: {X-Key: k}
  - name: answers
    match: {path: /answers}
    answer: {schema: {type: object}}
  - name: mcp_route
    protocol: mcp
    match: {path: /mcp}
    mcp:
      tools:
        dry: {dry_run: true}
`
	var cfg conf.Config
	dec := yaml.NewDecoder(strings.NewReader(cfgYAML))
	dec.KnownFields(true)
	if err := dec.Decode(&cfg); err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(t.TempDir()); err != nil {
		t.Fatal(err)
	}
	bcfg := budget.Config{Limits: []budget.Limit{{Name: "all", Calls: 10, Window: time.Hour}}}
	if err := bcfg.Validate([]string{"bare"}, conf.UpstreamKey); err != nil {
		t.Fatal(err)
	}
	// Budgets that name one tool and one upstream: only the tools they
	// could count get a budget step (budget.Engine.MayApply); a tool
	// without a host may reach the upstream, so it keeps one.
	scoped := budget.Config{
		Limits:    []budget.Limit{{Name: "one", Tools: []string{"schema_only"}, Calls: 10, Window: time.Hour}},
		Upstreams: []budget.Upstream{{Host: "files.example.org", Rate: 5}},
	}
	if err := scoped.Validate([]string{"bare", "schema_only", "with_policies", "injects", "answers"}, conf.UpstreamKey); err != nil {
		t.Fatal(err)
	}
	checkers := map[string]pipe.Checker{"with_policies": allowAll{}, "mcp_route": allowAll{}}
	tests := []struct {
		name     string
		snap     pipe.Snapshot
		approver conf.Approver
		want     map[string]string // tool -> its steps
	}{
		{
			name: "schemas and policies",
			snap: pipe.Snapshot{Config: &cfg, Checkers: checkers},
			want: map[string]string{
				"bare":          "extract",
				"schema_only":   "extract → schema",
				"with_policies": "extract → schema → policies → origin",
				"injects":       "extract → origin",
				"answers":       "extract",
				"mcp_route":     "extract → schema → policies",
			},
		},
		{
			name:     "approvals and budgets",
			snap:     pipe.Snapshot{Config: &cfg, Budgets: budgetengine.Adapt(budget.New(&bcfg, nil))},
			approver: noApproval{},
			want: map[string]string{
				"bare":          "extract → approval → budget",
				"schema_only":   "extract → schema → approval → budget",
				"with_policies": "extract → schema → approval → budget",
				"mcp_route":     "extract → schema → approval",
			},
		},
		{
			name: "budgets that cannot count every tool",
			snap: pipe.Snapshot{Config: &cfg, Budgets: budgetengine.Adapt(budget.New(&scoped, nil))},
			want: map[string]string{
				"bare":        "extract → budget",
				"schema_only": "extract → schema → budget",
				"injects":     "extract → origin",
				"answers":     "extract → budget",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			chains := compileChains(&cfg, &tt.snap, tt.approver)
			for _, tl := range cfg.Compiled {
				want, ok := tt.want[tl.Cfg.Name]
				if !ok {
					continue
				}
				if got := chains[tl].Names(); got != want {
					t.Errorf("%s: chain %q; want %q", tl.Cfg.Name, got, want)
				}
				if n := len(chains[tl].Answers); (tl.Cfg.Name == "answers") != (n == 1) {
					t.Errorf("%s: %d answer steps", tl.Cfg.Name, n)
				}
			}
		})
	}
	// The MCP route's dry-run tool has its schema steps wrapped in DryRun;
	// the route's default steps are not.
	for _, tl := range cfg.Compiled {
		if tl.MCP == nil {
			continue
		}
		s := mcpcall.BuildSchema(&pipe.ChainEnv{Tool: tl, Snap: &pipe.Snapshot{Config: &cfg}}).(*mcpcall.SchemaStep)
		wrapped := func(steps []pipe.RequestStep) (n int) {
			for _, st := range steps {
				if _, ok := st.(pipe.DryRun); ok {
					n++
				}
			}
			return n
		}
		if n := wrapped(s.ByTool["dry"]); n != 3 {
			t.Errorf("dry-run tool: %d of its schema steps wrapped in dryRun; want 3 (known, unchecked, validate)", n)
		}
		if n := wrapped(s.Default); n != 0 {
			t.Errorf("default rule: %d steps wrapped in dryRun; want none", n)
		}
	}
}
