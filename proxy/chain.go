package proxy

import (
	"context"
	"strings"
)

// A tool's chain: its request steps in order, and its answer steps,
// compiled once when a snapshot is put in force (Swap; Evaluate compiles
// the one tool it evaluates), so that a tool without a schema, policies,
// approval, injected headers, budgets or answer checks has no such step
// and pays nothing for it. The order is requestOrder below and answerOrder
// (answer.go); the package doc numbers it.

// requestStep is one step a call passes before it goes upstream. check lets
// the call continue (nil) or refuses it: the refusal answers at once and
// the call never reaches upstream. A step reads and writes the call through
// its methods; it keeps no state of its own between calls.
type requestStep interface {
	check(ctx context.Context, c *call) *refusal
}

// answerStep is one step upstream's answer passes before the caller sees
// it. answer lets it continue (nil) or refuses it: the caller gets the
// refusal in place of the answer (a refusal never echoes the answer's
// content). Answer steps run only on an answer toolgate read whole (see
// answer).
type answerStep interface {
	answer(ctx context.Context, c *call, a *answer) *refusal
}

// callerGone is what a step returns when the caller went away while it
// waited (for the body, for its turn at a rate limit): the call is recorded
// as the caller's (client_closed), not refused.
var callerGone = &refusal{reason: reasonClientClosed}

// stepEntry is one place in the order: its name, and how a tool's step
// there is built, for a plain HTTP tool (build) and for an MCP route's
// tools/call (mcp); a nil builder, or one that returns nil, means the tool
// has no such step.
type stepEntry struct {
	name string
	// eval is true for the steps that decide a call from its arguments
	// and where it goes, with no effect of their own (schema, policies,
	// origin): what Evaluate runs, so that policy eval and policy test
	// cannot disagree with the sidecar.
	eval  bool
	build func(e *chainEnv) requestStep
	mcp   func(e *chainEnv) requestStep
}

// requestOrder is the order of a tool's request steps (the package doc's
// steps 2 to 6; steps 0 and 1, canonical form and routing, find the tool
// whose chain runs, and step 7 is dispatch):
//
//	extract → observe → schema → policies → origin → approval → budget
//
// Observe (observe.go) only records the arguments' shape, for a tool in
// observe mode; it never refuses.
//
// Origin runs before approval, so that a person is never asked to approve
// a call that could not go upstream anyway (its injected headers bound
// for another origin), and so that Evaluate, which stops before approval
// and reports the policies' request instead, decides as the sidecar does.
//
// An MCP route runs the same order with its own extraction: each
// tools/call's params (mcpCallStep), then the schema the server listed or
// the route configures (mcpSchemaStep), the policies, and its own approval
// (in band, mcpApprovalStep); it has no observe or origin step (an MCP
// call goes without injected headers), and its budget step runs once for
// the whole message, so that a batch is admitted all or nothing
// (admitMCP).
var requestOrder = []stepEntry{
	{name: "extract", build: buildExtract, mcp: buildMCPCall},
	{name: "observe", build: buildObserve},
	{name: "schema", eval: true, build: buildSchema, mcp: buildMCPSchema},
	{name: "policies", eval: true, build: buildPolicies, mcp: buildPolicies},
	{name: "origin", eval: true, build: buildOrigin},
	{name: "approval", build: buildApproval, mcp: buildMCPApproval},
	{name: "budget", build: buildBudget},
}

// chainEnv is what a tool's chain is compiled from.
type chainEnv struct {
	t        *tool
	snap     *Snapshot
	approver Approver // nil: no call needs approval
}

// checker is the tool's policy step, or nil.
func (e *chainEnv) checker() Checker { return e.snap.Checkers[e.t.cfg.Name] }

// link is one compiled step.
type link struct {
	name string
	eval bool
	step requestStep
}

// chain is one tool's compiled steps.
type chain struct {
	steps []link
	// answers are the answer steps (answer.go), in answerOrder; none on
	// an MCP route. answerLimit is the most of an answer they read;
	// answerPass is true when an answer larger than that goes on unchecked;
	// answerAll when a step reads answers of every status, not only 2xx.
	answers     []answerStep
	answerLimit int64
	answerPass  bool
	answerAll   bool
	// metrics are the tool's series in the server that put the chain in
	// force (Swap); nil in Evaluate.
	metrics *toolMetrics
}

// compileChain builds t's chain for a snapshot.
func compileChain(t *tool, snap *Snapshot, approver Approver) *chain {
	e := &chainEnv{t: t, snap: snap, approver: approver}
	ch := &chain{}
	for _, en := range requestOrder {
		build := en.build
		if t.mcp != nil {
			build = en.mcp
		}
		if build == nil {
			continue
		}
		if s := build(e); s != nil {
			ch.steps = append(ch.steps, link{name: en.name, eval: en.eval, step: s})
		}
	}
	if t.mcp == nil {
		ch.answers, ch.answerLimit, ch.answerPass, ch.answerAll = buildAnswerSteps(e)
	}
	return ch
}

// compileChains builds every tool's chain for a snapshot.
func compileChains(cfg *Config, snap *Snapshot, approver Approver) map[*tool]*chain {
	out := make(map[*tool]*chain, len(cfg.compiled))
	for _, t := range cfg.compiled {
		out[t] = compileChain(t, snap, approver)
	}
	return out
}

// run passes c through the steps in order; the first refusal stops it.
func (ch *chain) run(ctx context.Context, c *call) *refusal {
	for i := range ch.steps {
		if ref := ch.steps[i].step.check(ctx, c); ref != nil {
			return ref
		}
	}
	return nil
}

// runEval runs the steps Evaluate runs (schema, policies, origin): the
// chain without extraction, which Evaluate replaces with the arguments it
// is given, and without what only a call going upstream does (approval,
// which Evaluate reports instead, and budget, which counts).
func (ch *chain) runEval(ctx context.Context, c *call) *refusal {
	for i := range ch.steps {
		if !ch.steps[i].eval {
			continue
		}
		if ref := ch.steps[i].step.check(ctx, c); ref != nil {
			return ref
		}
	}
	return nil
}

// names lists the chain's steps, for tests and the docs.
func (ch *chain) names() string {
	ns := make([]string, len(ch.steps))
	for i, l := range ch.steps {
		ns[i] = l.name
	}
	return strings.Join(ns, " → ")
}

// dryRun wraps a step whose refusals are only recorded: the call goes on,
// and its event says what the step would have refused (dry_run_denied and
// one dry_run_violations line per violation, prefixed with label).
type dryRun struct {
	step  requestStep
	label string
}

func (d dryRun) check(ctx context.Context, c *call) *refusal {
	ref := d.step.check(ctx, c)
	if ref == nil || ref == callerGone {
		return ref
	}
	c.noteDryRun(d.label, ref)
	return nil
}

// noteDryRun records a refusal a dry-run step would have answered with.
func (c *call) noteDryRun(label string, ref *refusal) {
	if ref.dryRunNote != "" {
		c.noteWouldRefuse(label + ref.dryRunNote)
		return
	}
	for _, v := range ref.violations {
		c.noteWouldRefuse(label + pathOrArgs(v.Path) + ": " + v.Message)
	}
}

// noteWouldRefuse records one line of what a dry-run check would have
// refused (dry_run_denied, dry_run_violations).
func (c *call) noteWouldRefuse(line string) {
	c.ev.DryRunDenied = true
	c.ev.DryRunViolations = append(c.ev.DryRunViolations, line)
}
