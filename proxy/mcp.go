package proxy

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

// mcpHost is what a Server's MCP routes keep for its life.
type mcpHost struct {
	mcp         mcp.Schemas         // tool schemas learned from MCP servers
	mcpUnusable mcp.UnusableSchemas // listed schemas that could not check calls, for /status
	mcpKeywords mcp.KeywordFindings // listed schemas with unknown keywords, for /status (mcp_keywords.go)
	pins        *mcpPins            // pinned MCP tool definitions, for the server's life (mcp_pins.go)
	tasks       mcp.RefusedTasks    // refused task-augmented tools/call, for tasks/get and tasks/result (mcp_tasks.go)
}

// handle runs a call on an MCP route (handleMCP).
func (h *mcpHost) handle(c *call, r *http.Request, target *url.URL) *http.Response {
	return c.handleMCP(h, r, target)
}

// mcpCall is the MCP side of one exchange on an MCP route: what the
// request asked, and what is read from the answer as it streams past.
type mcpCall struct {
	c      *call
	h      *mcpHost
	route  *mcpRoute
	server string // host + path, for events and policies
	key    string // scheme://host/path, for the schema cache
	// pinKey keys the server's pins (mcppin.ServerKey), as the lock file
	// toolgate mcp pin writes does.
	pinKey string
	// privKey keys the lists the server marked cacheScope "private": key
	// and a hash of the caller's authorization context.
	privKey string
	srv     *mcp.ServerTools
	// stateless is true for a request of the 2026-07-28 era.
	stateless bool
	// batch is true when the request is a JSON-RPC batch.
	batch bool
	// ask is the in-band approval question the call is answered with;
	// strip is true when the call carries toolgate's own approval state,
	// removed before it goes upstream (approval_mcp.go).
	ask   *inBandAsk
	strip bool
	// listedOnly is true when the tools already learned are all there is
	// (an evaluation's recorded or fetched list): a tool they lack is not
	// fetched again.
	listedOnly bool

	// The tools/call the chain is checking (checkToolCall): its message,
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
	// (mcp_hold.go); nil when nothing holds it.
	hold *mcpHold
	// pinVerdicts are the verdicts of the last tools/list observed against
	// the pins (pinList); listFiltered is true once a held tools/list was
	// learned and filtered (mcp_pins.go), so the answer reader does not
	// learn it again.
	pinVerdicts  []mcppin.Verdict
	listFiltered bool
}

// handleMCP runs the pipeline for a call on an MCP route. Only POST bodies
// carry JSON-RPC messages; GET (the server's stream) and DELETE (the end
// of a session) pass through without a body, watched for
// tools/list_changed, and any method but POST with a body is refused.
func (c *call) handleMCP(h *mcpHost, r *http.Request, target *url.URL) *http.Response {
	t := c.t
	m := &mcpCall{c: c, h: h, route: t.mcp, server: target.Host + target.EscapedPath(),
		key: target.Scheme + "://" + target.Host + target.EscapedPath(), pinKey: mcppin.ServerKey(target)}
	m.privKey = m.key + "|auth:" + mcp.AuthContext(r)
	m.srv = h.mcp.Resolve(m.key, m.privKey)
	c.mcp = m
	c.in, c.target = r, target
	c.ev.Tool = ""
	c.ev.MCPServer = m.server
	c.ev.Inspected = true
	if why := notLocal(r, c.ev.Listener); why != "" {
		return c.mcpNotLocalRefuse(r, why)
	}
	if r.Method != http.MethodPost {
		c.ev.MCPProtocol = mcp.BoundedText(r.Header.Get(mcp.HeaderProtocol))
		body, ok, err := mcp.Bodyless(r)
		switch {
		case err != nil:
			return c.clientGone(r)
		case !ok:
			// The SDKs ignore such a body; a hand-written server that
			// decodes whatever comes would run a tools/call in it that no
			// check has seen.
			return c.refuse(r, refuse(bucketing.CodeValidation, bucketing.ReasonMalformedBody,
				fmt.Sprintf("MCP server %s got a %s request with a body; JSON-RPC messages are read only from POST", m.server, mcp.BoundedText(r.Method)), nil))
		}
		return c.dispatch(r, target, body, 0, 0)
	}
	raw, err := readBody(r, c.st.cfg.MaxBodyBytes)
	switch {
	case errors.Is(err, errBodyTooLarge):
		return c.refuse(r, refuse(bucketing.CodeValidation, bucketing.ReasonBodyTooLarge,
			fmt.Sprintf("MCP server %s got a message larger than the %d-byte limit", m.server, c.st.cfg.MaxBodyBytes), nil))
	case errors.Is(err, errBodyTimeout):
		return c.refuse(r, bodyTimeoutRefusal("MCP server "+m.server, c.st.cfg.Limits.BodyTimeout))
	case err != nil:
		return c.clientGone(r)
	}
	c.ev.RequestBytes = int64(len(raw))
	if ref := checkJSONNames("MCP server "+m.server, raw, c.st.cfg.Limits.MaxJSONDepth); ref != nil {
		return c.refuse(r, ref)
	}
	msgs, batch, err := mcp.ParseRPC(raw)
	if err != nil {
		// What toolgate cannot read is never sent: a lenient server could
		// find a tools/call in it that no check has seen.
		return c.refuse(r, refuse(bucketing.CodeValidation, bucketing.ReasonMalformedBody,
			fmt.Sprintf("MCP server %s got a message toolgate cannot read as JSON-RPC 2.0 (%s)", m.server, strings.TrimPrefix(err.Error(), mcp.ErrNotRPC.Error()+": ")), nil))
	}
	m.batch = batch
	if batch {
		c.ev.RPCMethod = "batch"
	} else {
		c.ev.RPCMethod, c.ev.RPCID = msgs[0].Method, mcp.IDText(msgs[0].ID)
		env := mcp.ReadEnvelope(&msgs[0])
		c.ev.MCPProtocol = mcp.ProtocolOf(r, &msgs[0], env)
		if id, ok := traceIDOf(env.Traceparent); ok {
			c.ev.TraceID, c.traceparent = id, env.Traceparent
		}
		if msgs[0].IsRequest() && (mcp.IsStateless(env.Version) || mcp.IsStateless(r.Header.Get(mcp.HeaderProtocol))) {
			m.stateless = true
			if why := mcp.HeaderMismatch(r, &msgs[0], env); why != "" {
				return c.mcpHeaderRefuse(r, &msgs[0], env, why)
			}
		}
	}
	if !batch {
		if resp := c.answerOwnTask(r, &msgs[0]); resp != nil {
			return resp
		}
	}
	refs := make([]*refusal, len(msgs))
	refused := -1
	for i := range msgs {
		msg := &msgs[i]
		switch msg.Method {
		case mcp.MethodToolsCall:
			if m.ans.CallID == nil && c.ev.Tool == "" {
				m.ans.CallID = msg.ID
				c.ev.RPCID = mcp.IDText(msg.ID)
				c.ev.Outcome = sink.OutcomeNoAnswer
			}
			refs[i] = c.checkToolCall(r.Context(), msg)
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
	if refused < 0 && c.st.Budgets != nil {
		var ok bool
		if refused, ok = c.admitMCP(r, msgs, refs); !ok {
			return c.clientGone(r)
		}
	}
	if refused >= 0 {
		return c.mcpRefuse(r, msgs, batch, refs, refused)
	}
	if m.strip {
		// Only a single request gets here with toolgate's state.
		if raw, err = stripOwnState(msgs[0]); err != nil {
			return c.refuse(r, refuse(bucketing.CodeValidation, bucketing.ReasonMalformedBody,
				"MCP server "+m.server+" got a tools/call whose params toolgate cannot rewrite", nil))
		}
	}
	if c.s.tracer != nil && !batch && msgs[0].IsRequest() && msgs[0].Method != mcp.MethodToolsCall {
		m.ans.ReqID = msgs[0].ID // its JSON-RPC error goes in the span
	}
	m.armAnswerChecks(msgs)
	m.armListFilter()
	resp := c.dispatch(r, target, bytesBody(raw), int64(len(raw)), t.cfg.Timeout)
	if _, passed := resp.Body.(*passBody); !passed && m.ans.CallID != nil && !batch && resp.Header.Get(HeaderErrorCode) != "" {
		// toolgate's own failure (upstream unreachable, timed out): the
		// caller gets it as the tool's error, not as a transport error.
		env, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		env = m.retryableByHints(env)
		text := "The call did not complete: " + c.ev.Detail
		return mcpAnswer(r, http.StatusOK, resp.Header.Get(HeaderErrorCode), mcp.ToolError(m.ans.CallID, text, env, m.stateless, m.srv.PlainResult(c.ev.Tool)))
	}
	return resp
}

func pathOrArgs(p string) string {
	if p == "" {
		return "(arguments)"
	}
	return p
}

// begin is told the answer's headers before its body passes; it reports
// whether the answer streams (mcp.AnswerReader.Streaming).
func (m *mcpCall) begin(resp *http.Response) bool {
	m.ans.Begin(resp.Header, resp.ContentLength, m.route.cfg.MaxMessageBytes, m)
	return m.ans.Streaming()
}

// policyInput puts the tools/call being checked in the policies' input.
func (m *mcpCall) policyInput(in *policies.Input) {
	in.Tool, in.Protocol, in.Server = m.tc.Name, ProtocolMCP, m.server
	in.ToolAnnotations = m.srv.Hints(m.tc.Name).AsMap()
}

// holds reports whether the route's answer checks hold the answer back.
func (m *mcpCall) holds() bool { return m.hold != nil }

// observe sees each chunk of the answer before the caller does.
func (m *mcpCall) observe(p []byte) { m.ans.Observe(p) }

// answered reports whether the answer held the response the request
// waited for (mcp.AnswerReader.Answered).
func (m *mcpCall) answered() bool { return m.ans.Answered() }

// ListChanged forgets the server's tools when it says they changed.
func (m *mcpCall) ListChanged() {
	m.h.mcp.Forget(m.key)
	m.srv = m.h.mcp.Resolve(m.key, m.privKey)
}

// Listed learns the tools/list result the answer held; the call's event
// names the definitions that differ from their pins.
func (m *mcpCall) Listed(res *mcp.ToolsListResult, complete bool) {
	if m.listFiltered {
		return // learned from what the server sent, before it was filtered
	}
	changes := m.learnList(res, readPinDefs(res.Raw), complete)
	m.c.ev.DefinitionChanges = append(m.c.ev.DefinitionChanges, changes...)
}

// settle completes the bucketed result of an answer with what its
// JSON-RPC messages said, and records the call's outcome.
func (m *mcpCall) settle(res bucketing.Result) bucketing.Result {
	resp, unread := m.ans.Response()
	if m.ans.CallID == nil {
		return res
	}
	if withheld, ok := m.settleAnswer(); ok {
		return withheld
	}
	ev := &m.c.ev
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

// learnList stores a tools/list answer where its cacheScope says: lists
// marked "private" under the caller's authorization context, others under
// the server. Its definitions (defs) are observed against the pins first
// (pinList): a tool whose change the route does not follow is learned as
// pinned, and a list that cannot be read alike by every reader is not
// learned at all. It returns the definition changes to record.
func (m *mcpCall) learnList(res *mcp.ToolsListResult, defs pinDefs, complete bool) []string {
	tools, changes, ok := m.pinList(res.Tools, defs, complete)
	if !ok {
		return changes
	}
	srv := m.h.mcp.Server(m.key)
	if res.CacheScope == mcp.CacheScopePrivate {
		srv = m.h.mcp.Server(m.privKey)
	}
	srv.Learn(tools, complete, m.route.cfg.MaxTools, m.route.cfg.MaxSchemaBytes, res.TTLMs)
	if complete {
		m.c.st.names.Observe(m.c.t.cfg.Name, res.Tools, m.c.s.log)
	}
	m.srv = m.h.mcp.Resolve(m.key, m.privKey)
	return changes
}
