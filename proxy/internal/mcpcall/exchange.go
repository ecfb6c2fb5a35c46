package mcpcall

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/toolgate/toolgate/bucketing"
	"github.com/toolgate/toolgate/policies"
	"github.com/toolgate/toolgate/proxy/internal/conf"
	"github.com/toolgate/toolgate/proxy/internal/pipe"
	"github.com/toolgate/toolgate/proxy/internal/steps"
	"github.com/toolgate/toolgate/proxy/mcp"
	"github.com/toolgate/toolgate/proxy/mcppin"
	"github.com/toolgate/toolgate/sink"
)

// Reasons of MCP outcomes and refusals.
const (
	reasonUnknownTool = "unknown_tool"
	reasonUnchecked   = "unchecked"
	reasonToolError   = "tool_error"
)

// maxFetchPages bounds the pages of toolgate's own tools/list.
const maxFetchPages = 20

// MCPHost is what a Server's MCP routes keep for its life.
type MCPHost struct {
	Schemas     mcp.Schemas         // tool schemas learned from MCP servers
	MCPUnusable mcp.UnusableSchemas // listed schemas that could not check calls, for /status
	MCPKeywords mcp.KeywordFindings // listed schemas with unknown keywords, for /status (keywords.go)
	Pins        *mcpPins            // pinned MCP tool definitions, for the server's life (pins.go)
	tasks       mcp.RefusedTasks    // refused task-augmented tools/call, for tasks/get and tasks/result (tasks.go)
}

// Handle runs a call on an MCP route (handleMCP).
func (h *MCPHost) Handle(c *pipe.Call, r *http.Request, target *url.URL) *http.Response {
	return handleMCP(c, h, r, target)
}

// Exchange is the MCP side of one exchange on an MCP route: what the
// request asked, and what is read from the answer as it streams past.
type Exchange struct {
	Call   *pipe.Call
	h      *MCPHost
	Route  *conf.MCPRoute
	Server string // host + path, for events and policies
	Key    string // scheme://host/path, for the schema cache
	// PinKey keys the server's pins (mcppin.ServerKey), as the lock file
	// toolgate mcp pin writes does.
	PinKey string
	// PrivKey keys the lists the server marked cacheScope "private": key
	// and a hash of the caller's authorization context.
	PrivKey string
	Tools   *mcp.ServerTools
	// stateless is true for a request of the 2026-07-28 era.
	Stateless bool
	// batch is true when the request is a JSON-RPC batch.
	batch bool
	// ask is the in-band approval question the call is answered with;
	// strip is true when the call carries toolgate's own approval state,
	// removed before it goes upstream (approval.go).
	ask   *inBandAsk
	strip bool
	// ListedOnly is true when the tools already learned are all there is
	// (an evaluation's recorded or fetched list): a tool they lack is not
	// fetched again.
	ListedOnly bool

	// The tools/call the chain is checking (CheckToolCall): its message,
	// its params, and what mcpLookupStep found for it: the listed schema
	// (nil: none usable), why a listed one cannot be used, and whether
	// the server's whole list lacks the tool.
	msg     *mcp.Message
	tc      mcp.ToolCall
	sch     *policies.Schema
	why     error
	unknown bool
	// pinAsk is the approval mcpPinStep asks for a changed tool under
	// mcp.pin.on_change: approve; nil when none.
	pinAsk *policies.Approval

	// ans reads the answer: its CallID is the tools/call whose outcome
	// is recorded, its ListID a tools/list whose answer is learned.
	ans mcp.AnswerReader
	// hold holds the answer back for the route's answer checks
	// (hold.go); nil when nothing holds it.
	hold *mcpHold
	// pinVerdicts are the verdicts of the last tools/list observed against
	// the pins (pinList); listFiltered is true once a held tools/list was
	// learned and filtered (pins.go), so the answer reader does not
	// learn it again.
	pinVerdicts  []mcppin.Verdict
	listFiltered bool
}

// handleMCP runs the pipeline for a call on an MCP route. Only POST bodies
// carry JSON-RPC messages; GET (the server's stream) and DELETE (the end
// of a session) pass through without a body, watched for
// tools/list_changed, and any method but POST with a body is refused.
// NewCall starts the MCP side of c, a request r to the MCP server at
// target on c's route, with what the server learned of it so far.
func NewCall(c *pipe.Call, h *MCPHost, r *http.Request, target *url.URL) *Exchange {
	m := &Exchange{Call: c, h: h, Route: c.Tool.MCP, Server: target.Host + target.EscapedPath(),
		Key: target.Scheme + "://" + target.Host + target.EscapedPath(), PinKey: mcppin.ServerKey(target)}
	m.PrivKey = m.Key + "|auth:" + mcp.AuthContext(r)
	m.Tools = h.Schemas.Resolve(m.Key, m.PrivKey)
	c.MCP = m
	return m
}

func handleMCP(c *pipe.Call, h *MCPHost, r *http.Request, target *url.URL) *http.Response {
	t := c.Tool
	m := NewCall(c, h, r, target)
	c.In, c.Target = r, target
	c.Event.Tool = ""
	c.Event.MCPServer = m.Server
	c.Event.Inspected = true
	if why := notLocal(r, c.Event.Listener); why != "" {
		return mcpNotLocalRefuse(c, r, why)
	}
	if r.Method != http.MethodPost {
		c.Event.MCPProtocol = mcp.BoundedText(r.Header.Get(mcp.HeaderProtocol))
		body, ok, err := mcp.Bodyless(r)
		switch {
		case err != nil:
			return c.ClientGone(r)
		case !ok:
			// The SDKs ignore such a body; a hand-written server that
			// decodes whatever comes would run a tools/call in it that no
			// check has seen.
			return c.Refuse(r, conf.Refuse(bucketing.CodeValidation, bucketing.ReasonMalformedBody,
				fmt.Sprintf("MCP server %s got a %s request with a body; JSON-RPC messages are read only from POST", m.Server, mcp.BoundedText(r.Method)), nil))
		}
		return c.Dispatch(r, target, body, 0, 0)
	}
	raw, err := conf.ReadBody(r, c.State.Cfg.MaxBodyBytes)
	switch {
	case errors.Is(err, conf.ErrBodyTooLarge):
		return c.Refuse(r, conf.Refuse(bucketing.CodeValidation, bucketing.ReasonBodyTooLarge,
			fmt.Sprintf("MCP server %s got a message larger than the %d-byte limit", m.Server, c.State.Cfg.MaxBodyBytes), nil))
	case errors.Is(err, conf.ErrBodyTimeout):
		return c.Refuse(r, conf.BodyTimeoutRefusal("MCP server "+m.Server, c.State.Cfg.Limits.BodyTimeout))
	case err != nil:
		return c.ClientGone(r)
	}
	c.Event.RequestBytes = int64(len(raw))
	if ref := steps.CheckJSONNames("MCP server "+m.Server, raw, c.State.Cfg.Limits.MaxJSONDepth); ref != nil {
		return c.Refuse(r, ref)
	}
	msgs, batch, err := mcp.ParseRPC(raw)
	if err != nil {
		// What toolgate cannot read is never sent: a lenient server could
		// find a tools/call in it that no check has seen.
		return c.Refuse(r, conf.Refuse(bucketing.CodeValidation, bucketing.ReasonMalformedBody,
			fmt.Sprintf("MCP server %s got a message toolgate cannot read as JSON-RPC 2.0 (%s)", m.Server, strings.TrimPrefix(err.Error(), mcp.ErrNotRPC.Error()+": ")), nil))
	}
	m.batch = batch
	if batch {
		c.Event.RPCMethod = "batch"
	} else {
		c.Event.RPCMethod, c.Event.RPCID = msgs[0].Method, mcp.IDText(msgs[0].ID)
		env := mcp.ReadEnvelope(&msgs[0])
		c.Event.MCPProtocol = mcp.ProtocolOf(r, &msgs[0], env)
		if id, ok := traceIDOf(env.Traceparent); ok {
			c.Event.TraceID, c.Traceparent = id, env.Traceparent
		}
		if msgs[0].IsRequest() && (mcp.IsStateless(env.Version) || mcp.IsStateless(r.Header.Get(mcp.HeaderProtocol))) {
			m.Stateless = true
			if why := mcp.HeaderMismatch(r, &msgs[0], env); why != "" {
				return mcpHeaderRefuse(c, r, &msgs[0], env, why)
			}
		}
	}
	if !batch {
		if resp := answerOwnTask(c, r, &msgs[0]); resp != nil {
			return resp
		}
	}
	refs := make([]*conf.Refusal, len(msgs))
	refused := -1
	for i := range msgs {
		msg := &msgs[i]
		switch msg.Method {
		case mcp.MethodToolsCall:
			if m.ans.CallID == nil && c.Event.Tool == "" {
				m.ans.CallID = msg.ID
				c.Event.RPCID = mcp.IDText(msg.ID)
				c.Event.Outcome = sink.OutcomeNoAnswer
			}
			refs[i] = CheckToolCall(c, r.Context(), msg)
			if refs[i] != nil && refused < 0 {
				refused = i
			}
		case mcp.MethodToolsList:
			if msg.IsRequest() && m.ans.ListID == nil {
				m.ans.ListID = msg.ID
				var p struct {
					Cursor *string `json:"cursor"`
				}
				_ = json.Unmarshal(msg.Params, &p)
				m.ans.ListCursor = p.Cursor != nil && *p.Cursor != ""
			}
		}
	}
	if refused < 0 && c.State.Budgets != nil {
		var ok bool
		if refused, ok = steps.AdmitMCP(c, r, msgs, refs); !ok {
			return c.ClientGone(r)
		}
	}
	if refused >= 0 {
		return mcpRefuse(c, r, msgs, batch, refs, refused)
	}
	if m.strip {
		// Only a single request gets here with toolgate's state.
		if raw, err = stripOwnState(msgs[0]); err != nil {
			return c.Refuse(r, conf.Refuse(bucketing.CodeValidation, bucketing.ReasonMalformedBody,
				"MCP server "+m.Server+" got a tools/call whose params toolgate cannot rewrite", nil))
		}
	}
	if c.Host.Tracer != nil && !batch && msgs[0].IsRequest() && msgs[0].Method != mcp.MethodToolsCall {
		m.ans.ReqID = msgs[0].ID // its JSON-RPC error goes in the span
	}
	m.armAnswerChecks(msgs)
	m.armListFilter()
	resp := c.Dispatch(r, target, pipe.BytesBody(raw), int64(len(raw)), t.Cfg.Timeout)
	if _, passed := resp.Body.(*pipe.PassBody); !passed && m.ans.CallID != nil && !batch && resp.Header.Get(conf.HeaderErrorCode) != "" {
		// toolgate's own failure (upstream unreachable, timed out): the
		// caller gets it as the tool's error, not as a transport error.
		env, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		env = m.retryableByHints(env)
		text := "The call did not complete: " + c.Event.Detail
		return mcpAnswer(r, http.StatusOK, resp.Header.Get(conf.HeaderErrorCode), mcp.ToolError(m.ans.CallID, text, env, m.Stateless, m.Tools.PlainResult(c.Event.Tool)))
	}
	return resp
}

// Begin is told the answer's headers before its body passes; it reports
// whether the answer streams (mcp.AnswerReader.Streaming).
func (m *Exchange) Begin(resp *http.Response) bool {
	m.ans.Begin(resp.Header, resp.ContentLength, m.Route.Cfg.MaxMessageBytes, m)
	return m.ans.Streaming()
}

// PolicyInput puts the tools/call being checked in the policies' input.
func (m *Exchange) PolicyInput(in *policies.Input) {
	in.Tool, in.Protocol, in.Server = m.tc.Name, conf.ProtocolMCP, m.Server
	in.ToolAnnotations = m.Tools.Hints(m.tc.Name).AsMap()
}

// Holds reports whether the route's answer checks hold the answer back.
func (m *Exchange) Holds() bool { return m.hold != nil }

// Observe sees each chunk of the answer before the caller does.
func (m *Exchange) Observe(p []byte) { m.ans.Observe(p) }

// Answered reports whether the answer held the response the request
// waited for (mcp.AnswerReader.Answered).
func (m *Exchange) Answered() bool { return m.ans.Answered() }

// ListChanged forgets the server's tools when it says they changed.
func (m *Exchange) ListChanged() {
	m.h.Schemas.Forget(m.Key)
	m.Tools = m.h.Schemas.Resolve(m.Key, m.PrivKey)
}

// Listed learns the tools/list result the answer held; the call's event
// names the definitions that differ from their pins.
func (m *Exchange) Listed(res *mcp.ToolsListResult, complete bool) {
	if m.listFiltered {
		return // learned from what the server sent, before it was filtered
	}
	changes := m.LearnList(res, ReadPinDefs(res.Raw), complete)
	m.Call.Event.DefinitionChanges = append(m.Call.Event.DefinitionChanges, changes...)
}

// Settle completes the bucketed result of an answer with what its
// JSON-RPC messages said, and records the call's outcome.
func (m *Exchange) Settle(res bucketing.Result) bucketing.Result {
	resp, unread := m.ans.Response()
	if m.ans.CallID == nil {
		return res
	}
	if withheld, ok := m.settleAnswer(); ok {
		return withheld
	}
	ev := &m.Call.Event
	switch {
	case resp == nil && unread:
		// Past the bound, or a JSON answer that held no response to the
		// call.
		ev.Outcome = sink.OutcomeUnread
	case resp == nil:
		ev.Outcome = sink.OutcomeNoAnswer
	case resp.Error != nil:
		ev.Outcome = sink.OutcomeRPCError
		if res.OK() {
			res = mcp.RPCErrorResult(resp.Error.Code)
		}
	default:
		var cr mcp.CallResult
		_ = json.Unmarshal(resp.Result, &cr)
		if mcp.IsInputRequired(resp.Result) {
			ev.Outcome = sink.OutcomeInputRequired
			break
		}
		if !cr.IsError {
			ev.Outcome = sink.OutcomeOK
			break
		}
		ev.Outcome = sink.OutcomeToolErr
		if res.OK() {
			res = bucketing.Result{Code: bucketing.CodeUpstream, Class: bucketing.ClassTerminal, Reason: reasonToolError,
				Detail: "the tool answered with an error result (isError)"}
		}
	}
	return res
}

// LearnList stores a tools/list answer where its cacheScope says: lists
// marked "private" under the caller's authorization context, others under
// the server. Its definitions (defs) are observed against the pins first
// (pinList): a tool whose change the route does not follow is learned as
// pinned, and a list that cannot be read alike by every reader is not
// learned at all. It returns the definition changes to record.
func (m *Exchange) LearnList(res *mcp.ToolsListResult, defs pinDefs, complete bool) []string {
	tools, changes, ok := m.pinList(res.Tools, defs, complete)
	if !ok {
		return changes
	}
	srv := m.h.Schemas.Server(m.Key)
	if res.CacheScope == mcp.CacheScopePrivate {
		srv = m.h.Schemas.Server(m.PrivKey)
	}
	srv.Learn(tools, complete, m.Route.Cfg.MaxTools, m.Route.Cfg.MaxSchemaBytes, res.TTLMs)
	if complete {
		m.Call.State.Names.Observe(m.Call.Tool.Cfg.Name, res.Tools, m.Call.Host.Log)
	}
	m.Tools = m.h.Schemas.Resolve(m.Key, m.PrivKey)
	return changes
}

// ExchangeOf is a call's MCP side, or nil off an MCP route.
func ExchangeOf(c *pipe.Call) *Exchange {
	m, _ := c.MCP.(*Exchange)
	return m
}

// SpanFacts fills in what an MCP call's span says: the tools/call's tool
// when the server listed it (with its description) or the route
// configures it by name, and the JSON-RPC error that answered the
// request.
func (m *Exchange) SpanFacts(f *sink.SpanFacts) {
	if name := m.Call.Event.Tool; name != "" && m.Tools != nil {
		desc, listed := m.Tools.Described(name)
		if listed || m.Route.Tools[name] != nil {
			f.KnownTool, f.ToolDescription = name, desc
		}
	}
	if resp, _ := m.ans.Response(); resp != nil && resp.Error != nil {
		f.RPCError, f.RPCErrorCode = true, resp.Error.Code
	} else if code, ok := m.ans.RPCError(); ok {
		f.RPCError, f.RPCErrorCode = true, code
	}
}
