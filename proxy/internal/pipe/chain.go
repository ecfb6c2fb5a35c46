package pipe

import (
	"context"
	"strings"

	"github.com/toolgate/toolgate/proxy/internal/conf"
)

// A tool's chain: its request steps in order, and its answer steps,
// compiled once when a snapshot is put in force (Swap; Evaluate compiles
// the one tool it evaluates), so that a tool without a schema, policies,
// approval, injected headers, budgets or answer checks has no such step
// and pays nothing for it. The order is requestOrder below and answerOrder
// (answer.go); the package doc numbers it.

// RequestStep is one step a call passes before it goes upstream. check lets
// the call continue (nil) or refuses it: the refusal answers at once and
// the call never reaches upstream. A step reads and writes the call through
// its methods; it keeps no state of its own between calls.
type RequestStep interface {
	Check(ctx context.Context, c *Call) *conf.Refusal
}

// AnswerStep is one step upstream's answer passes before the caller sees
// it. answer lets it continue (nil) or refuses it: the caller gets the
// refusal in place of the answer (a refusal never echoes the answer's
// content). Answer steps run only on an answer toolgate read whole (see
// answer).
type AnswerStep interface {
	Answer(ctx context.Context, c *Call, a *Answer) *conf.Refusal
}

// CallerGone is what a step returns when the caller went away while it
// waited (for the body, for its turn at a rate limit): the call is recorded
// as the caller's (client_closed), not refused.
var CallerGone = &conf.Refusal{Reason: reasonClientClosed}

// ChainEnv is what a tool's chain is compiled from.
type ChainEnv struct {
	Tool     *conf.Tool
	Snap     *Snapshot
	Approver conf.Approver // nil: no call needs approval
}

// Checker is the tool's policy step, or nil.
func (e *ChainEnv) Checker() Checker { return e.Snap.Checkers[e.Tool.Cfg.Name] }

// Link is one compiled step.
type Link struct {
	Name string
	Eval bool
	Step RequestStep
}

// Chain is one tool's compiled steps.
type Chain struct {
	Steps []Link
	// answers are the answer steps (answer.go), in answerOrder; none on
	// an MCP route. AnswerLimit is the most of an answer they read;
	// AnswerPass is true when an answer larger than that goes on unchecked;
	// AnswerAll when a step reads answers of every status, not only 2xx.
	Answers     []AnswerStep
	AnswerLimit int64
	AnswerPass  bool
	AnswerAll   bool
	// metrics are the tool's series in the server that put the chain in
	// force (Swap); nil in Evaluate.
	Metrics *toolMetrics
}

// Run passes c through the steps in order; the first refusal stops it.
func (ch *Chain) Run(ctx context.Context, c *Call) *conf.Refusal {
	for i := range ch.Steps {
		if ref := ch.Steps[i].Step.Check(ctx, c); ref != nil {
			return ref
		}
	}
	return nil
}

// RunEval runs the steps Evaluate runs (schema, policies, origin): the
// chain without extraction, which Evaluate replaces with the arguments it
// is given, and without what only a call going upstream does (approval,
// which Evaluate reports instead, and budget, which counts).
func (ch *Chain) RunEval(ctx context.Context, c *Call) *conf.Refusal {
	for i := range ch.Steps {
		if !ch.Steps[i].Eval {
			continue
		}
		if ref := ch.Steps[i].Step.Check(ctx, c); ref != nil {
			return ref
		}
	}
	return nil
}

// Names lists the chain's steps, for tests and the docs.
func (ch *Chain) Names() string {
	ns := make([]string, len(ch.Steps))
	for i, l := range ch.Steps {
		ns[i] = l.Name
	}
	return strings.Join(ns, " → ")
}

// DryRun wraps a step whose refusals are only recorded: the call goes on,
// and its event says what the step would have refused (dry_run_denied and
// one dry_run_violations line per violation, prefixed with label).
type DryRun struct {
	Step  RequestStep
	Label string
}

func (d DryRun) Check(ctx context.Context, c *Call) *conf.Refusal {
	ref := d.Step.Check(ctx, c)
	if ref == nil || ref == CallerGone {
		return ref
	}
	c.noteDryRun(d.Label, ref)
	return nil
}

// noteDryRun records a refusal a dry-run step would have answered with.
func (c *Call) noteDryRun(label string, ref *conf.Refusal) {
	if ref.DryRunNote != "" {
		c.noteWouldRefuse(label + ref.DryRunNote)
		return
	}
	for _, v := range ref.Violations {
		c.noteWouldRefuse(label + conf.PathOrArgs(v.Path) + ": " + v.Message)
	}
}

// noteWouldRefuse records one line of what a dry-run check would have
// refused (dry_run_denied, dry_run_violations).
func (c *Call) noteWouldRefuse(line string) {
	c.Event.DryRunDenied = true
	c.Event.DryRunViolations = append(c.Event.DryRunViolations, line)
}
