package proxy

import (
	"bytes"
	"context"
	"fmt"
	"strings"

	"github.com/toolgate/toolgate/bucketing"
	"github.com/toolgate/toolgate/policies"
	"github.com/toolgate/toolgate/proxy/mcp"
)

// An MCP route's chain runs once per tools/call of a message
// (checkToolCall), in requestOrder's order: mcpCallStep reads the call's
// params (extraction), mcpSchemaStep checks the arguments against the
// schema the route configures for the tool or the server listed (learned,
// else fetched), then the policies and approval steps every tool shares.

// mcpCallStep reads a tools/call's params: the tool's name and its
// arguments. The first tools/call of a message names the event's tool.
type mcpCallStep struct{}

func buildMCPCall(*chainEnv) requestStep { return mcpCallStep{} }

func (mcpCallStep) check(_ context.Context, c *call) *refusal {
	m := mcpOf(c)
	tc, ref := mcp.ParseToolCall(m.msg.Params)
	first := c.ev.Tool == "" && (m.ans.CallID == nil || bytes.Equal(m.ans.CallID, m.msg.ID))
	if first && tc.Name != "" {
		c.nameTool(tc.Name)
	}
	m.tc, c.args = tc, tc.Args
	return problemRefusal(ref)
}

// problemRefusal is the validation refusal of params mcp.ParseToolCall
// cannot read; nil for none.
func problemRefusal(p *mcp.Problem) *refusal {
	if p == nil {
		return nil
	}
	return refuse(bucketing.CodeValidation, p.Reason, p.Detail, p.Violations)
}

// mcpSchemaStep checks a tools/call's arguments against its tool's schema.
// Each tool with an override under mcp.tools has its own steps, compiled
// once; the others share the route's. A dry-run tool's steps are wrapped
// in dryRun.
type mcpSchemaStep struct {
	route  *mcpRoute
	def    []requestStep
	byTool map[string][]requestStep
}

func buildMCPSchema(e *chainEnv) requestStep { return newMCPSchemaStep(e.t.mcp, e.approver != nil) }

func newMCPSchemaStep(route *mcpRoute, approver bool) requestStep {
	pin := mcpPinStep{mode: &route.cfg.Pin, approver: approver}
	s := &mcpSchemaStep{route: route, def: mcpRuleSteps(route, route.rule(""), pin), byTool: map[string][]requestStep{}}
	for name, rule := range route.tools {
		s.byTool[name] = mcpRuleSteps(route, rule, pin)
	}
	return s
}

// mcpRuleSteps compiles the schema steps of one tool rule: a configured
// schema is all there is; else the listed schema is looked up, and the
// tool must be one the server offers and have a usable schema. The pin
// step (mcp_pins.go) runs after the lookup and before any schema check,
// never in dry run.
func mcpRuleSteps(route *mcpRoute, rule *mcpToolRule, pin requestStep) []requestStep {
	wrap := func(s requestStep) requestStep {
		if rule.dryRun {
			return dryRun{step: s, label: "schema: "}
		}
		return s
	}
	if rule.schema != nil {
		return []requestStep{pin, wrap(mcpValidateStep{fixed: rule.schema})}
	}
	return []requestStep{
		mcpLookupStep{rule: rule},
		pin,
		wrap(mcpKnownStep{}),
		wrap(mcpUncheckedStep{refuse: route.cfg.Unchecked == UncheckedRefuse, dry: rule.dryRun}),
		wrap(mcpValidateStep{}),
	}
}

func (s *mcpSchemaStep) check(ctx context.Context, c *call) *refusal {
	steps := s.def
	if ts, ok := s.byTool[mcpOf(c).tc.Name]; ok {
		steps = ts
	}
	for _, st := range steps {
		if ref := st.check(ctx, c); ref != nil {
			return ref
		}
	}
	return nil
}

// mcpLookupStep finds the schema the server listed for the tool: learned
// before, else (mcp.unknown_tool: fetch) listed now with toolgate's own
// tools/list. It never refuses; the steps after it judge what it found.
type mcpLookupStep struct{ rule *mcpToolRule }

func (s mcpLookupStep) check(_ context.Context, c *call) *refusal {
	m := mcpOf(c)
	name := m.tc.Name
	m.unknown = false
	sch, known, why := m.srv.Lookup(name, s.rule.strict)
	if m.route.cfg.UnknownTool == UnknownToolFetch && ((!known && !m.srv.IsCut()) || m.srv.Stale()) {
		if !m.listedOnly {
			if err := c.fetchTools(c.in, c.target, m.tc.Meta); err != nil {
				// A stale list is still used when listing fails (2026-07-28
				// server/utilities/caching allows serving stale on errors).
				c.s.log.Warn("mcp: listing the server's tools failed; the call is checked against what was learned before, if anything", "server", m.server, "tool", name, "err", err)
			}
			m.srv = m.h.mcp.Resolve(m.key, m.privKey)
			sch, known, why = m.srv.Lookup(name, s.rule.strict)
		}
		m.unknown = !known && m.srv.IsListed()
	}
	m.sch, m.why = sch, why
	c.noteListedKeywords(sch)
	return nil
}

// mcpKnownStep refuses a call of a tool the server's whole list lacks.
type mcpKnownStep struct{}

func (mcpKnownStep) check(_ context.Context, c *call) *refusal {
	m := mcpOf(c)
	if !m.unknown {
		return nil
	}
	names := m.srv.Names()
	offers := strings.Join(names, ", ")
	if len(names) == 0 {
		offers = "(no tools)"
	}
	return refuse(bucketing.CodeValidation, reasonUnknownTool,
		fmt.Sprintf("Tool '%s' is not offered by MCP server %s; it offers: %s", m.tc.Name, m.server, offers),
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

func (s mcpUncheckedStep) check(_ context.Context, c *call) *refusal {
	m := mcpOf(c)
	name := m.tc.Name
	unusable := ""
	if m.why != nil {
		unusable = mcp.UnusableReason(m.why)
		what := "passes unchecked"
		if s.refuse {
			what = "is refused (mcp.unchecked: refuse)"
		}
		c.s.log.Warn("mcp: the listed schema cannot be used; the call "+what, "server", m.server, "tool", name, "reason", unusable, "err", m.why)
		m.h.mcpUnusable.Note(m.server, name, unusable, m.why)
		if !s.refuse || s.dry {
			// The event says why the call passed without a schema.
			c.notePolicyError("schema: " + unusable)
		}
	}
	if m.sch != nil {
		return nil
	}
	c.noteUninspected()
	if !s.refuse {
		return nil
	}
	detail := fmt.Sprintf("Tool '%s' of MCP server %s cannot be checked (no usable schema), and this route refuses calls it cannot check", name, m.server)
	if unusable != "" {
		detail = fmt.Sprintf("Tool '%s' of MCP server %s cannot be checked (its listed schema is unusable: %s), and this route refuses calls it cannot check", name, m.server, unusable)
	}
	ref := refuse(bucketing.CodePolicy, reasonUnchecked, detail,
		[]policies.Violation{{Path: "", Reason: reasonUnchecked, Message: "no usable schema to check the arguments against"}})
	ref.dryRunNote = "(arguments): no usable schema"
	return ref
}

// mcpValidateStep validates the arguments against the tool's schema: the
// configured one (fixed), else the one looked up. It is the schema step
// plain tools run (validateArgs), case variants of declared names included.
type mcpValidateStep struct{ fixed *policies.Schema }

func (s mcpValidateStep) check(_ context.Context, c *call) *refusal {
	sch := s.fixed
	if sch == nil {
		sch = mcpOf(c).sch
	}
	if sch == nil {
		return nil
	}
	return validateArgs(mcpOf(c).tc.Name, sch, c.args)
}

// checkToolCall runs the route's chain on one tools/call of the message:
// its params, the schema, the policies, then approval. It records the tool
// name and whether the call was inspected.
func (c *call) checkToolCall(ctx context.Context, msg *mcp.Message) *refusal {
	m := mcpOf(c)
	m.msg = msg
	c.ask, m.pinAsk = nil, nil
	return c.ch.run(ctx, c)
}
