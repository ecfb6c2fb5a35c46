package mcpcall

import (
	"bytes"
	"context"
	"fmt"
	"strings"

	"github.com/toolgate/toolgate/bucketing"
	"github.com/toolgate/toolgate/policies"
	"github.com/toolgate/toolgate/proxy/internal/conf"
	"github.com/toolgate/toolgate/proxy/internal/pipe"
	"github.com/toolgate/toolgate/proxy/internal/steps"
	"github.com/toolgate/toolgate/proxy/mcp"
)

// An MCP route's chain runs once per tools/call of a message
// (CheckToolCall), in requestOrder's order: mcpCallStep reads the call's
// params (extraction), SchemaStep checks the arguments against the
// schema the route configures for the tool or the server listed (learned,
// else fetched), then the policies and approval steps every tool shares.

// mcpCallStep reads a tools/call's params: the tool's name and its
// arguments. The first tools/call of a message names the event's tool.
type mcpCallStep struct{}

func BuildCall(*pipe.ChainEnv) pipe.RequestStep { return mcpCallStep{} }

func (mcpCallStep) Check(_ context.Context, c *pipe.Call) *conf.Refusal {
	m := ExchangeOf(c)
	tc, ref := mcp.ParseToolCall(m.msg.Params)
	first := c.Event.Tool == "" && (m.ans.CallID == nil || bytes.Equal(m.ans.CallID, m.msg.ID))
	if first && tc.Name != "" {
		c.NameTool(tc.Name)
	}
	m.tc, c.Args = tc, tc.Args
	return problemRefusal(ref)
}

// problemRefusal is the validation refusal of params mcp.ParseToolCall
// cannot read; nil for none.
func problemRefusal(p *mcp.Problem) *conf.Refusal {
	if p == nil {
		return nil
	}
	return conf.Refuse(bucketing.CodeValidation, p.Reason, p.Detail, p.Violations)
}

// SchemaStep checks a tools/call's arguments against its tool's schema.
// Each tool with an override under mcp.tools has its own steps, compiled
// once; the others share the route's. A dry-run tool's steps are wrapped
// in DryRun.
type SchemaStep struct {
	route   *conf.MCPRoute
	Default []pipe.RequestStep
	ByTool  map[string][]pipe.RequestStep
}

func BuildSchema(e *pipe.ChainEnv) pipe.RequestStep {
	return newMCPSchemaStep(e.Tool.MCP, e.Approver != nil)
}

func newMCPSchemaStep(route *conf.MCPRoute, approver bool) pipe.RequestStep {
	pin := mcpPinStep{mode: &route.Cfg.Pin, approver: approver}
	s := &SchemaStep{route: route, Default: mcpRuleSteps(route, route.Rule(""), pin), ByTool: map[string][]pipe.RequestStep{}}
	for name, rule := range route.Tools {
		s.ByTool[name] = mcpRuleSteps(route, rule, pin)
	}
	return s
}

// mcpRuleSteps compiles the schema steps of one tool rule: a configured
// schema is all there is; else the listed schema is looked up, and the
// tool must be one the server offers and have a usable schema. The pin
// step (pins.go) runs after the lookup and before any schema check,
// never in dry run.
func mcpRuleSteps(route *conf.MCPRoute, rule *conf.MCPToolRule, pin pipe.RequestStep) []pipe.RequestStep {
	wrap := func(s pipe.RequestStep) pipe.RequestStep {
		if rule.DryRun {
			return pipe.DryRun{Step: s, Label: "schema: "}
		}
		return s
	}
	if rule.Schema != nil {
		return []pipe.RequestStep{pin, wrap(mcpValidateStep{fixed: rule.Schema})}
	}
	return []pipe.RequestStep{
		mcpLookupStep{rule: rule},
		pin,
		wrap(mcpKnownStep{}),
		wrap(mcpUncheckedStep{refuse: route.Cfg.Unchecked == conf.UncheckedRefuse, dry: rule.DryRun}),
		wrap(mcpValidateStep{}),
	}
}

func (s *SchemaStep) Check(ctx context.Context, c *pipe.Call) *conf.Refusal {
	steps := s.Default
	if ts, ok := s.ByTool[ExchangeOf(c).tc.Name]; ok {
		steps = ts
	}
	for _, st := range steps {
		if ref := st.Check(ctx, c); ref != nil {
			return ref
		}
	}
	return nil
}

// mcpLookupStep finds the schema the server listed for the tool: learned
// before, else (mcp.unknown_tool: fetch) listed now with toolgate's own
// tools/list. It never refuses; the steps after it judge what it found.
type mcpLookupStep struct{ rule *conf.MCPToolRule }

func (s mcpLookupStep) Check(_ context.Context, c *pipe.Call) *conf.Refusal {
	m := ExchangeOf(c)
	name := m.tc.Name
	m.unknown = false
	sch, known, why := m.Tools.Lookup(name, s.rule.Strict)
	if m.Route.Cfg.UnknownTool == conf.UnknownToolFetch && ((!known && !m.Tools.IsCut()) || m.Tools.Stale()) {
		if !m.ListedOnly {
			if err := FetchTools(c, c.In, c.Target, m.tc.Meta); err != nil {
				// A stale list is still used when listing fails (2026-07-28
				// server/utilities/caching allows serving stale on errors).
				c.Host.Log.Warn("mcp: listing the server's tools failed; the call is checked against what was learned before, if anything", "server", m.Server, "tool", name, "err", err)
			}
			m.Tools = m.h.Schemas.Resolve(m.Key, m.PrivKey)
			sch, known, why = m.Tools.Lookup(name, s.rule.Strict)
		}
		m.unknown = !known && m.Tools.IsListed()
	}
	m.sch, m.why = sch, why
	noteListedKeywords(c, sch)
	return nil
}

// mcpKnownStep refuses a call of a tool the server's whole list lacks.
type mcpKnownStep struct{}

func (mcpKnownStep) Check(_ context.Context, c *pipe.Call) *conf.Refusal {
	m := ExchangeOf(c)
	if !m.unknown {
		return nil
	}
	names := m.Tools.Names()
	offers := strings.Join(names, ", ")
	if len(names) == 0 {
		offers = "(no tools)"
	}
	return conf.Refuse(bucketing.CodeValidation, reasonUnknownTool,
		fmt.Sprintf("Tool '%s' is not offered by MCP server %s; it offers: %s", m.tc.Name, m.Server, offers),
		[]policies.Violation{{Path: "", Reason: reasonUnknownTool, Message: "unknown tool", Expected: "one of: " + offers}})
}

// mcpUncheckedStep handles a call no schema can check: the call passes
// uninspected, or (mcp.unchecked: refuse) is refused. A listed schema that
// cannot be used is logged, noted for /status and, when the call passes,
// in the event.
type mcpUncheckedStep struct {
	refuse bool // mcp.unchecked: refuse
	dry    bool // the tool's rule is dry run
}

func (s mcpUncheckedStep) Check(_ context.Context, c *pipe.Call) *conf.Refusal {
	m := ExchangeOf(c)
	name := m.tc.Name
	unusable := ""
	if m.why != nil {
		unusable = mcp.UnusableReason(m.why)
		what := "passes unchecked"
		if s.refuse {
			what = "is refused (mcp.unchecked: refuse)"
		}
		c.Host.Log.Warn("mcp: the listed schema cannot be used; the call "+what, "server", m.Server, "tool", name, "reason", unusable, "err", m.why)
		m.h.MCPUnusable.Note(m.Server, name, unusable, m.why)
		if !s.refuse || s.dry {
			// The event says why the call passed without a schema.
			c.NotePolicyError("schema: " + unusable)
		}
	}
	if m.sch != nil {
		return nil
	}
	c.NoteUninspected()
	if !s.refuse {
		return nil
	}
	detail := fmt.Sprintf("Tool '%s' of MCP server %s cannot be checked (no usable schema), and this route refuses calls it cannot check", name, m.Server)
	if unusable != "" {
		detail = fmt.Sprintf("Tool '%s' of MCP server %s cannot be checked (its listed schema is unusable: %s), and this route refuses calls it cannot check", name, m.Server, unusable)
	}
	ref := conf.Refuse(bucketing.CodePolicy, reasonUnchecked, detail,
		[]policies.Violation{{Path: "", Reason: reasonUnchecked, Message: "no usable schema to check the arguments against"}})
	ref.DryRunNote = "(arguments): no usable schema"
	return ref
}

// mcpValidateStep validates the arguments against the tool's schema: the
// configured one (fixed), else the one looked up. It is the schema step
// plain tools run (ValidateArgs), case variants of declared names included.
type mcpValidateStep struct{ fixed *policies.Schema }

func (s mcpValidateStep) Check(_ context.Context, c *pipe.Call) *conf.Refusal {
	sch := s.fixed
	if sch == nil {
		sch = ExchangeOf(c).sch
	}
	if sch == nil {
		return nil
	}
	return steps.ValidateArgs(ExchangeOf(c).tc.Name, sch, c.Args, false)
}

// CheckToolCall runs the route's chain on one tools/call of the message:
// its params, the schema, the policies, then approval. It records the tool
// name and whether the call was inspected.
func CheckToolCall(c *pipe.Call, ctx context.Context, msg *mcp.Message) *conf.Refusal {
	m := ExchangeOf(c)
	m.msg = msg
	c.Ask, m.pinAsk = nil, nil
	return c.Chain.Run(ctx, c)
}
