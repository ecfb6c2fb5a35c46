package pipe

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"reflect"
	"time"
	"unsafe"

	"github.com/toolgate/toolgate/bucketing"
	"github.com/toolgate/toolgate/policies"
	"github.com/toolgate/toolgate/proxy/internal/conf"
	"github.com/toolgate/toolgate/proxy/upstream"
	"github.com/toolgate/toolgate/sink"
)

// Call is one call's state from arrival to the end of its answer's body:
// what the caller sent (In), where it goes (Target, the canonical upstream
// URL; the upstream request is built from both at dispatch), the tool and
// its arguments, the event being built, and what the steps decided so far.
// Steps read and write it through its methods (SetBody, PolicyOutcome,
// NoteDryRun, NoteApproval, NotePolicyError) and the fields they own.
//
// Its fields are exported for the steps in proxy's other internal
// packages; it is no contract outside proxy (the package is internal).
type Call struct {
	Host     *Host // nil in Evaluate, which dispatches nothing
	State    *State
	Tool     *conf.Tool // nil when no tool matched
	Start    time.Time
	upStart  time.Time
	Event    sink.Event
	envelope bool // the caller asked for (or the tool forces) the envelope
	gone     bool // the caller went away before its answer was complete
	Lost     bool // its event was not kept, and an EventGate is set: the answer is withheld
	Client   context.Context
	Inject   map[string]string     // headers the policies asked for
	upCtx    *upstream.CallContext // the upstream call's context, when the tool has a timeout
	Canon    conf.Canon            // the call's canonical form (zero when refused before it had one)
	MCP      MCPExchange           // nil unless the tool's protocol is mcp (an *mcpcall.Exchange)
	Ask      *policies.Approval    // the policies' approval request, if any
	Budget   conf.BudgetTicket     // nil unless the snapshot has budgets and the call met them
	upHeader http.Header           // upstream's answer's header, kept for the budget step
	upProto  string                // upstream's answer's protocol (resp.Proto), for the span
	// Traceparent is the caller's W3C trace context, kept for the Tracer
	// only when there is one.
	Traceparent string

	// What the request steps read and write.

	// Chain is the tool's chain (nil when no tool matched).
	Chain *Chain
	// In is the caller's request, its method canonical and its context
	// carrying the host it was routed as.
	In *http.Request
	// Target is the canonical URL the call goes upstream to.
	Target *url.URL
	// Vars are the path template's variables.
	Vars map[string]string
	// Args are the call's arguments, once extracted (an MCP tools/call's
	// params.arguments).
	Args map[string]any
	// argsDepth is how deep Args nest as measured when they were made
	// (SetArgs), and argsInRange whether their numbers were all within
	// policies.NumberInRange, for the map argsOf points to; 0 and false
	// when not known.
	argsDepth   int
	argsInRange bool
	argsOf      unsafe.Pointer
	// body and size are what goes upstream as the body: the caller's
	// body unread, or the bytes toolgate read (SetBody).
	body io.Reader
	size int64
	// Unread is a body the tool forwards without reading it as its
	// arguments, read only for an approval to bind.
	Unread []byte

	// Storage the call's own values take, allocated with it: the reader
	// of a body toolgate read (SetBody, Dispatch), the upstream URL
	// (Handle), the values of the upstream request's header
	// (cloneRequest) and of the headers injected into it, the policies'
	// input, the context carrying the call's route (Handle) and the
	// upstream call's context (Dispatch). Each is handed out once
	// (take).
	heldBody   bytesBody
	targetURL  url.URL
	headerVals [callHeaderValues]string
	input      policies.Input
	routeCtx   conf.RouteCtx
	upCtxStore upstream.CallContext
	taken      ownStorage // which of them were handed out
}

// ownStorage names the parts of a Call's own storage.
type ownStorage uint8

const (
	ownHeldBody ownStorage = 1 << iota
	ownTargetURL
	ownHeaderVals
	ownInput
	ownRouteCtx
	ownUpCtx
)

// take reports whether part of the call's own storage is free, and marks
// it taken: a second use gets storage of its own, so nothing handed out
// is ever changed.
func (c *Call) take(part ownStorage) bool {
	free := c.taken&part == 0
	c.taken |= part
	return free
}

// callHeaderValues is how many header values the upstream request takes
// from the call's own array; a request with more gets an array of its own.
const callHeaderValues = 16

// holdBody returns a reader of raw, the call's own: a bytesBody, which
// Dispatch sends as it is (its own ReadCloser) and can send again.
func (c *Call) holdBody(raw []byte) *bytesBody {
	if !c.take(ownHeldBody) {
		return newBytesBody(raw)
	}
	c.heldBody.Reset(raw)
	return &c.heldBody
}

// Host is what a call uses of the Server that runs it (nil in Evaluate,
// which dispatches nothing): where its event goes, its span, the log,
// the transport to upstream, the metrics, the event gate, and how a call
// on an MCP route is run.
type Host struct {
	Rec        Recorder
	Tracer     Tracer // nil when tracing is off
	Log        *slog.Logger
	Sidecar    string
	Transport  *http.Transport     // HTTPS, HTTP/2, streamed bodies, CONNECT (goproxy), MCP fetches
	Upstream   *upstream.Transport // the pipeline's calls: plain HTTP/1.1 on the caller's goroutine, else transport
	Metrics    *metrics
	Events     EventGate      // nil under events.on_write_failure: answer
	EventsLost *eventsCounter // toolgate_proxy_events_unavailable_total
	eventsLog  LogLimit
	// MCPHandle runs a call on an MCP route (mcpcall.MCPHost's handle).
	MCPHandle func(c *Call, r *http.Request, target *url.URL) *http.Response
}

// LogLimited logs one line through lim's limit.
func (h *Host) LogLimited(lim *LogLimit, level slog.Level, msg string, args ...any) {
	if lim.allow() {
		h.Log.Log(context.Background(), level, msg, args...)
	}
}

// MCPExchange is the MCP side of a call on an MCP route (mcpcall.Exchange), as the
// pipeline's answer handling, the policies' input and the span see it.
type MCPExchange interface {
	// holds reports whether the route's answer checks hold the answer
	// back until it is read whole.
	Holds() bool
	// holdAnswer returns the caller's answer when the held answer is
	// replaced whole, or nil when resp goes on.
	HoldAnswer(r *http.Request, resp *http.Response) *http.Response
	// begin is told the answer's headers; it reports whether it streams.
	Begin(resp *http.Response) bool
	// observe sees each chunk of the answer before the caller does.
	Observe(p []byte)
	// answered reports whether the answer held the response the request
	// waited for.
	Answered() bool
	// settle gives the outcome the exchange's messages decide.
	Settle(res bucketing.Result) bucketing.Result
	// policyInput puts the tools/call being checked in the policies' input.
	PolicyInput(in *policies.Input)
	// spanFacts fills in what the span says of the exchange.
	SpanFacts(f *sink.SpanFacts)
}

// SetBody records that the body was read: raw is what goes upstream.
func (c *Call) SetBody(raw []byte) {
	c.Event.RequestBytes = int64(len(raw))
	c.body, c.size = c.holdBody(raw), int64(len(raw))
}

// SetArgs sets the call's arguments, how deep they nest (the object
// itself 1; 0 when not known) and whether every number in them is within
// policies.NumberInRange, as whatever made them measured them.
func (c *Call) SetArgs(args map[string]any, depth int, inRange bool) {
	c.Args, c.argsDepth, c.argsInRange, c.argsOf = args, depth, inRange, mapPointer(args)
}

// NumbersInRange is SetArgs's inRange while Args is still the map it was
// given with, and false (not known) once Args was set otherwise.
func (c *Call) NumbersInRange() bool {
	return c.argsInRange && c.Args != nil && mapPointer(c.Args) == c.argsOf
}

// ArgsDepth is SetArgs's depth while Args is still the map it was given
// with, and 0 (not known) once Args was set otherwise.
func (c *Call) ArgsDepth() int {
	if c.argsDepth > 0 && c.Args != nil && mapPointer(c.Args) == c.argsOf {
		return c.argsDepth
	}
	return 0
}

// mapPointer is what identifies a map value: the map it refers to.
func mapPointer(m map[string]any) unsafe.Pointer {
	return reflect.ValueOf(m).UnsafePointer()
}

// NotePolicyError records a check that failed open (a policy that
// failed, a listed schema that cannot be used), for the event.
func (c *Call) NotePolicyError(what string) {
	c.Event.PolicyError = conf.JoinNonEmpty(c.Event.PolicyError, what)
}

// NoteApproval records the approval step's state.
func (c *Call) NoteApproval(state string, ref *conf.Refusal) {
	c.Event.Approval = state
	if ref != nil && ref.RetryAfterMS != nil {
		c.Event.RetryAfterMS = *ref.RetryAfterMS
	}
}

// NameTool records the tool a call is of: an MCP message's first
// tools/call names it.
func (c *Call) NameTool(name string) { c.Event.Tool = name }

// NoteUninspected records that no schema checked the call's arguments.
func (c *Call) NoteUninspected() { c.Event.Inspected = false }

// NoteBudget records the budget or limiter that refused the call.
func (c *Call) NoteBudget(name string) { c.Event.Budget = name }

// NoteLimitScope records which scope's counters decided the call's
// budgets: fleet (the shared store) or local; "" keeps what is there.
func (c *Call) NoteLimitScope(scope string) {
	if scope != "" {
		c.Event.LimitScope = scope
	}
}

// Cancel ends the upstream call's context when it has a timer of its own
// (upstream.CallContext); calls without a timeout have nothing to end.
func (c *Call) Cancel() { c.upCtx.Cancel() }
