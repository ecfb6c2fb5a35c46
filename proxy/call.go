package proxy

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"time"

	"github.com/toolgate/toolgate/bucketing"
	"github.com/toolgate/toolgate/policies"
	"github.com/toolgate/toolgate/proxy/upstream"
	"github.com/toolgate/toolgate/sink"
)

// call is one call's state from arrival to the end of its answer's body:
// what the caller sent (in), where it goes (target, the canonical upstream
// URL; out is built from both at dispatch), the tool and its arguments, the
// event being built, and what the steps decided so far. Steps read and
// write it through its methods (setBody, policyOutcome, noteDryRun,
// approve, admitBudget, refuse).
//
// It stays unexported: the steps live in this package, and a call's
// fields (an http.Request, sink.Event) are not a contract others should
// build against before the package is split.
type call struct {
	s        *host // nil in Evaluate, which dispatches nothing
	st       *state
	t        *tool // nil when no tool matched
	start    time.Time
	upStart  time.Time
	ev       sink.Event
	envelope bool // the caller asked for (or the tool forces) the envelope
	gone     bool // the caller went away before its answer was complete
	lost     bool // its event was not kept, and an EventGate is set: the answer is withheld
	client   context.Context
	inject   map[string]string // headers the policies asked for
	cancel   context.CancelFunc
	cn       canon              // the call's canonical form (zero when refused before it had one)
	mcp      mcpExchange        // nil unless the tool's protocol is mcp (an *mcpCall)
	ask      *policies.Approval // the policies' approval request, if any
	bud      BudgetTicket       // nil unless the snapshot has budgets and the call met them
	upHeader http.Header        // upstream's answer's header, kept for the budget step
	upProto  string             // upstream's answer's protocol (resp.Proto), for the span
	// traceparent is the caller's W3C trace context, kept for the Tracer
	// only when there is one.
	traceparent string

	// What the request steps read and write.

	// ch is the tool's chain (nil when no tool matched).
	ch *chain
	// in is the caller's request, its method canonical and its context
	// carrying the host it was routed as.
	in *http.Request
	// target is the canonical URL the call goes upstream to.
	target *url.URL
	// vars are the path template's variables.
	vars map[string]string
	// args are the call's arguments, once extracted (an MCP tools/call's
	// params.arguments).
	args map[string]any
	// body and size are what goes upstream as the body: the caller's
	// body unread, or the bytes toolgate read (setBody).
	body io.Reader
	size int64
	// unread is a body the tool forwards without reading it as its
	// arguments, read only for an approval to bind.
	unread []byte
}

// host is what a call uses of the Server that runs it (nil in Evaluate,
// which dispatches nothing): where its event goes, its span, the log,
// the transport to upstream, the metrics, the event gate, and how a call
// on an MCP route is run.
type host struct {
	rec        Recorder
	tracer     Tracer // nil when tracing is off
	log        *slog.Logger
	sidecar    string
	transport  *http.Transport     // HTTPS, HTTP/2, streamed bodies, CONNECT (goproxy), MCP fetches
	upstream   *upstream.Transport // the pipeline's calls: plain HTTP/1.1 on the caller's goroutine, else transport
	metrics    *metrics
	events     EventGate      // nil under events.on_write_failure: answer
	eventsLost *eventsCounter // toolgate_proxy_events_unavailable_total
	eventsLog  logLimit
	// mcpHandle runs a call on an MCP route (mcpHost.handle).
	mcpHandle func(c *call, r *http.Request, target *url.URL) *http.Response
}

// logLimited logs one line through lim's limit.
func (h *host) logLimited(lim *logLimit, level slog.Level, msg string, args ...any) {
	if lim.allow() {
		h.log.Log(context.Background(), level, msg, args...)
	}
}

// mcpExchange is the MCP side of a call on an MCP route (mcpCall), as the
// pipeline's answer handling, the policies' input and the span see it.
type mcpExchange interface {
	// holds reports whether the route's answer checks hold the answer
	// back until it is read whole.
	holds() bool
	// holdAnswer returns the caller's answer when the held answer is
	// replaced whole, or nil when resp goes on.
	holdAnswer(r *http.Request, resp *http.Response) *http.Response
	// begin is told the answer's headers; it reports whether it streams.
	begin(resp *http.Response) bool
	// observe sees each chunk of the answer before the caller does.
	observe(p []byte)
	// answered reports whether the answer held the response the request
	// waited for.
	answered() bool
	// settle gives the outcome the exchange's messages decide.
	settle(res bucketing.Result) bucketing.Result
	// policyInput puts the tools/call being checked in the policies' input.
	policyInput(in *policies.Input)
	// spanFacts fills in what the span says of the exchange.
	spanFacts(f *sink.SpanFacts)
}

// mcpOf is a call's MCP side, or nil off an MCP route.
func mcpOf(c *call) *mcpCall {
	m, _ := c.mcp.(*mcpCall)
	return m
}

// setBody records that the body was read: raw is what goes upstream.
func (c *call) setBody(raw []byte) {
	c.ev.RequestBytes = int64(len(raw))
	c.body, c.size = bytesBody(raw), int64(len(raw))
}

// notePolicyError records a check that failed open (a policy that
// failed, a listed schema that cannot be used), for the event.
func (c *call) notePolicyError(what string) {
	c.ev.PolicyError = joinNonEmpty(c.ev.PolicyError, what)
}

// noteApproval records the approval step's state.
func (c *call) noteApproval(state string, ref *refusal) {
	c.ev.Approval = state
	if ref != nil && ref.retryAfterMS != nil {
		c.ev.RetryAfterMS = *ref.retryAfterMS
	}
}

// nameTool records the tool a call is of: an MCP message's first
// tools/call names it.
func (c *call) nameTool(name string) { c.ev.Tool = name }

// noteUninspected records that no schema checked the call's arguments.
func (c *call) noteUninspected() { c.ev.Inspected = false }

// noteBudget records the budget or limiter that refused the call.
func (c *call) noteBudget(name string) { c.ev.Budget = name }

// noteLimitScope records which scope's counters decided the call's
// budgets: fleet (the shared store) or local; "" keeps what is there.
func (c *call) noteLimitScope(scope string) {
	if scope != "" {
		c.ev.LimitScope = scope
	}
}
