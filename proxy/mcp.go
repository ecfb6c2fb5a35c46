package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/toolgate/toolgate/bucketing"
	"github.com/toolgate/toolgate/policies"
)

// Event outcomes of an MCP tools/call (sink.Event.Outcome).
const (
	OutcomeOK       = "ok"
	OutcomeToolErr  = "tool_error"
	OutcomeRPCError = "rpc_error"
	OutcomeRefused  = "refused"
	OutcomeNoAnswer = "no_answer"
	OutcomeUnread   = "unread"
)

// Reasons of MCP outcomes and refusals.
const (
	reasonUnknownTool = "unknown_tool"
	reasonToolError   = "tool_error"
)

// maxFetchPages bounds the pages of toolgate's own tools/list.
const maxFetchPages = 20

// Headers of the MCP streamable HTTP transport toolgate reads or keeps.
const (
	headerMCPSession = "Mcp-Session-Id"
	headerMCPMethod  = "Mcp-Method"
	headerMCPName    = "Mcp-Name"
)

// mcpCall is the MCP side of one exchange on an MCP route: what the
// request asked, and what is read from the answer as it streams past.
type mcpCall struct {
	c      *call
	route  *mcpRoute
	server string // host + path, for events and policies
	key    string // scheme://host/path, for the schema cache
	srv    *mcpServer

	callID     json.RawMessage // the tools/call whose outcome is recorded
	listID     json.RawMessage // a tools/list whose answer is learned
	listCursor bool            // that tools/list asked for a later page

	// The answer.
	sse      *sseReader
	capture  bool // a JSON answer is captured to be read at its end
	buf      []byte
	want     int64 // the JSON answer's declared length, or -1
	over     bool  // the JSON answer was larger than the limit
	read     bool  // the JSON answer was read
	found    bool  // the call's response was seen
	listed   bool  // the tools/list response was seen
	response rpcMessage
}

// handleMCP runs the pipeline for a call on an MCP route. Only POST bodies
// carry JSON-RPC messages; GET (the server's stream) and DELETE (the end
// of a session) pass through, watched for tools/list_changed.
func (c *call) handleMCP(r *http.Request, target *url.URL) *http.Response {
	t := c.t
	m := &mcpCall{c: c, route: t.mcp, server: target.Host + target.EscapedPath(),
		key: target.Scheme + "://" + target.Host + target.EscapedPath(), want: -1}
	m.srv = c.s.mcp.server(m.key)
	c.mcp = m
	c.ev.Tool = ""
	c.ev.MCPServer = m.server
	c.ev.Inspected = true
	if r.Method != http.MethodPost {
		return c.dispatch(r, target, r.Body, r.ContentLength, 0)
	}
	raw, err := readBody(r, c.st.cfg.MaxBodyBytes)
	switch {
	case errors.Is(err, errBodyTooLarge):
		return c.refuse(r, refuse(bucketing.CodeValidation, bucketing.ReasonBodyTooLarge,
			fmt.Sprintf("MCP server %s got a message larger than the %d-byte limit", m.server, c.st.cfg.MaxBodyBytes), nil))
	case err != nil:
		return c.clientGone(r)
	}
	c.ev.RequestBytes = int64(len(raw))
	msgs, batch, err := parseRPC(raw)
	if err != nil {
		// What toolgate cannot read is never sent: a lenient server could
		// find a tools/call in it that no check has seen.
		return c.refuse(r, refuse(bucketing.CodeValidation, bucketing.ReasonMalformedBody,
			fmt.Sprintf("MCP server %s got a message toolgate cannot read as JSON-RPC 2.0 (%s)", m.server, strings.TrimPrefix(err.Error(), errNotRPC.Error()+": ")), nil))
	}
	if batch {
		c.ev.RPCMethod = "batch"
	} else {
		c.ev.RPCMethod, c.ev.RPCID = msgs[0].Method, idText(msgs[0].ID)
	}
	refs := make([]*refusal, len(msgs))
	refused := -1
	for i := range msgs {
		msg := &msgs[i]
		switch msg.Method {
		case methodToolsCall:
			if m.callID == nil && c.ev.Tool == "" {
				m.callID = msg.ID
				c.ev.RPCID = idText(msg.ID)
				c.ev.Outcome = OutcomeNoAnswer
			}
			refs[i] = c.checkToolCall(r, target, msg)
			if refs[i] != nil && refused < 0 {
				refused = i
			}
		case methodToolsList:
			if msg.isRequest() && m.listID == nil {
				m.listID = msg.ID
				var p struct {
					Cursor *string `json:"cursor"`
				}
				_ = json.Unmarshal(msg.Params, &p)
				m.listCursor = p.Cursor != nil && *p.Cursor != ""
			}
		}
	}
	if refused >= 0 {
		return c.mcpRefuse(r, msgs, batch, refs, refused)
	}
	resp := c.dispatch(r, target, bytesBody(raw), int64(len(raw)), t.cfg.Timeout)
	if _, passed := resp.Body.(*passBody); !passed && m.callID != nil && !batch && resp.Header.Get(HeaderErrorCode) != "" {
		// toolgate's own failure (upstream unreachable, timed out): the
		// caller gets it as the tool's error, not as a transport error.
		env, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		text := "The call did not complete: " + c.ev.Detail
		return mcpAnswer(r, http.StatusOK, resp.Header.Get(HeaderErrorCode), rpcToolError(m.callID, text, env))
	}
	return resp
}

// checkToolCall runs the checks of one tools/call: its params, the schema
// (configured, else learned, else fetched), then the route's policies. It
// records the tool name and whether the call was inspected.
func (c *call) checkToolCall(r *http.Request, target *url.URL, msg *rpcMessage) *refusal {
	m := c.mcp
	tc, ref := parseToolCall(msg.Params)
	first := c.ev.Tool == "" && (m.callID == nil || bytes.Equal(m.callID, msg.ID))
	if first && tc.name != "" {
		c.ev.Tool = tc.name
	}
	if ref != nil {
		return ref
	}
	rule := m.route.rule(tc.name)
	sch := rule.schema
	if sch == nil {
		s, known, why := m.srv.lookup(tc.name, rule.strict)
		if !known && m.route.cfg.UnknownTool == UnknownToolFetch {
			if err := c.fetchTools(r, target, tc.meta); err != nil {
				c.s.log.Warn("mcp: listing the server's tools failed; the call passes unchecked", "server", m.server, "tool", tc.name, "err", err)
			}
			s, known, why = m.srv.lookup(tc.name, rule.strict)
			if !known && m.srv.isListed() {
				names := m.srv.names()
				offers := strings.Join(names, ", ")
				if len(names) == 0 {
					offers = "(no tools)"
				}
				if !rule.dryRun {
					return refuse(bucketing.CodeValidation, reasonUnknownTool,
						fmt.Sprintf("Tool '%s' is not offered by MCP server %s; it offers: %s", tc.name, m.server, offers),
						[]policies.Violation{{Path: "", Reason: reasonUnknownTool, Message: "unknown tool", Expected: "one of: " + offers}})
				}
				c.ev.DryRunDenied = true
				c.ev.DryRunViolations = append(c.ev.DryRunViolations, "schema: (arguments): unknown tool")
			}
		}
		if why != nil {
			c.s.log.Warn("mcp: the listed schema cannot be used; the call passes unchecked", "server", m.server, "tool", tc.name, "err", why)
		}
		if s == nil {
			c.ev.Inspected = false
		}
		sch = s
	}
	if sch != nil {
		if vs := sch.Validate(tc.args); len(vs) > 0 {
			if !rule.dryRun {
				return schemaRefusal(tc.name, vs)
			}
			c.ev.DryRunDenied = true
			for _, v := range vs {
				c.ev.DryRunViolations = append(c.ev.DryRunViolations, "schema: "+pathOrArgs(v.Path)+": "+v.Message)
			}
		}
	}
	if chk := c.st.Checkers[c.t.cfg.Name]; chk != nil {
		in := c.input(r, target, nil, tc.args)
		in.Tool, in.Protocol, in.Server = tc.name, ProtocolMCP, m.server
		return c.policyOutcome(chk.Check(r.Context(), in))
	}
	return nil
}

func pathOrArgs(p string) string {
	if p == "" {
		return "(arguments)"
	}
	return p
}

// fetchTools lists the server's tools with toolgate's own tools/list (every
// page), on the caller's session, and learns them. One fetch per server
// runs at a time; calls arriving meanwhile wait for it.
func (c *call) fetchTools(r *http.Request, target *url.URL, meta json.RawMessage) error {
	srv := c.mcp.srv
	ctx := r.Context()
	srv.mu.Lock()
	if ch := srv.fetching; ch != nil {
		srv.mu.Unlock()
		select {
		case <-ch:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	ch := make(chan struct{})
	srv.fetching = ch
	srv.mu.Unlock()
	defer func() {
		srv.mu.Lock()
		srv.fetching = nil
		srv.mu.Unlock()
		close(ch)
	}()
	ctx, cancel := context.WithTimeout(ctx, c.t.cfg.Timeout)
	defer cancel()
	meta = withoutProgressToken(meta)
	var all []listedTool
	cursor := ""
	for page := 0; ; page++ {
		if page == maxFetchPages {
			return fmt.Errorf("more than %d pages of tools", maxFetchPages)
		}
		res, err := c.listPage(ctx, r, target, page, cursor, meta)
		if err != nil {
			return err
		}
		all = append(all, res.Tools...)
		if res.NextCursor == "" {
			break
		}
		cursor = res.NextCursor
	}
	srv.learn(all, true, c.mcp.route.cfg.MaxTools, c.mcp.route.cfg.MaxSchemaBytes)
	return nil
}

// listPage sends one tools/list and reads its result.
func (c *call) listPage(ctx context.Context, r *http.Request, target *url.URL, page int, cursor string, meta json.RawMessage) (*toolsListResult, error) {
	params := map[string]any{}
	if cursor != "" {
		params["cursor"] = cursor
	}
	if len(meta) > 0 {
		params["_meta"] = meta
	}
	id := "toolgate-list-" + strconv.Itoa(page)
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": methodToolsList, "params": params})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target.String(), bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	for k, vs := range r.Header {
		if strings.HasPrefix(k, "Mcp-Param-") {
			continue
		}
		req.Header[k] = vs
	}
	cleanRequestHeaders(req.Header, true)
	for _, k := range []string{"Content-Length", "Content-Encoding", headerMCPName} {
		delete(req.Header, k)
	}
	if req.Header.Get(headerMCPMethod) != "" {
		req.Header.Set(headerMCPMethod, methodToolsList)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range c.t.inject {
		req.Header[k] = []string{v}
	}
	resp, err := c.s.transport.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("tools/list answered %s", resp.Status)
	}
	limit := c.mcp.route.cfg.MaxMessageBytes
	want := json.RawMessage(strconv.Quote(id))
	var found *rpcMessage
	take := func(data []byte) {
		for _, msg := range decodeMessages(data) {
			if msg.isResponse() && bytes.Equal(msg.ID, want) {
				found = &msg
			}
		}
	}
	if isEventStream(resp.Header.Get("Content-Type")) {
		sr := newSSEReader(limit, take)
		buf := make([]byte, 32<<10)
		for found == nil {
			n, err := resp.Body.Read(buf)
			sr.feed(buf[:n])
			if err != nil {
				break
			}
		}
	} else {
		b, err := io.ReadAll(io.LimitReader(resp.Body, int64(limit)+1))
		if err != nil {
			return nil, err
		}
		if len(b) > limit {
			return nil, fmt.Errorf("tools/list answer larger than %d bytes", limit)
		}
		take(b)
	}
	switch {
	case found == nil:
		return nil, errors.New("tools/list got no answer")
	case found.Error != nil:
		return nil, fmt.Errorf("tools/list answered error %d", found.Error.Code)
	}
	var res toolsListResult
	if err := json.Unmarshal(found.Result, &res); err != nil {
		return nil, fmt.Errorf("tools/list result: %w", err)
	}
	return &res, nil
}

// withoutProgressToken drops progressToken from a request's _meta, so
// toolgate's own request asks for no progress.
func withoutProgressToken(meta json.RawMessage) json.RawMessage {
	if len(meta) == 0 {
		return nil
	}
	var mm map[string]json.RawMessage
	if json.Unmarshal(meta, &mm) != nil {
		return nil
	}
	delete(mm, "progressToken")
	b, _ := json.Marshal(mm)
	return b
}

// decodeMessages decodes one message or a batch; what does not decode is
// skipped.
func decodeMessages(data []byte) []rpcMessage {
	data = bytes.TrimSpace(data)
	if len(data) == 0 {
		return nil
	}
	if data[0] == '[' {
		var raws []json.RawMessage
		if json.Unmarshal(data, &raws) != nil {
			return nil
		}
		out := make([]rpcMessage, 0, len(raws))
		for _, raw := range raws {
			var m rpcMessage
			if decodeRPC(raw, &m) == nil {
				out = append(out, m)
			}
		}
		return out
	}
	var m rpcMessage
	if decodeRPC(data, &m) != nil {
		return nil
	}
	return []rpcMessage{m}
}

func isEventStream(ct string) bool {
	mt, _, _ := mime.ParseMediaType(ct)
	return mt == "text/event-stream"
}

// begin is told the answer's headers before its body passes.
func (m *mcpCall) begin(resp *http.Response) {
	if isEventStream(resp.Header.Get("Content-Type")) {
		m.sse = newSSEReader(m.route.cfg.MaxMessageBytes, m.onMessage)
		return
	}
	if m.callID != nil || m.listID != nil {
		m.capture, m.want = true, resp.ContentLength
	}
}

// observe sees each chunk of the answer before the caller does.
func (m *mcpCall) observe(p []byte) {
	switch {
	case m.sse != nil:
		m.sse.feed(p)
	case m.capture && !m.over && !m.read:
		if len(m.buf)+len(p) > m.route.cfg.MaxMessageBytes {
			m.over, m.buf = true, nil
			return
		}
		m.buf = append(m.buf, p...)
		if m.want >= 0 && int64(len(m.buf)) == m.want {
			m.readJSON()
		}
	}
}

func (m *mcpCall) readJSON() {
	m.read = true
	m.onMessage(m.buf)
	m.buf = nil
}

// onMessage reads one JSON-RPC message (or batch) from the answer: the
// call's response, a tools/list result to learn, or a notice that the
// server's tools changed.
func (m *mcpCall) onMessage(data []byte) {
	if m.callID == nil && m.listID == nil && !bytes.Contains(data, []byte(methodToolsListChanged)) {
		return
	}
	for _, msg := range decodeMessages(data) {
		switch {
		case msg.Method == methodToolsListChanged:
			m.c.s.mcp.forget(m.key)
			m.srv = m.c.s.mcp.server(m.key)
		case !msg.isResponse():
		case m.callID != nil && bytes.Equal(msg.ID, m.callID):
			m.found, m.response = true, msg
		case m.listID != nil && bytes.Equal(msg.ID, m.listID) && msg.Result != nil:
			m.listed = true
			var res toolsListResult
			if json.Unmarshal(msg.Result, &res) == nil {
				m.srv.learn(res.Tools, !m.listCursor && res.NextCursor == "", m.route.cfg.MaxTools, m.route.cfg.MaxSchemaBytes)
			}
		}
	}
}

// answered reports whether the answer held the response the request
// waited for, so the caller closing the stream afterwards is not a caller
// that went away.
func (m *mcpCall) answered() bool {
	return (m.callID != nil && m.found) || (m.callID == nil && m.listID != nil && m.listed)
}

// settle completes the bucketed result of an answer with what its
// JSON-RPC messages said, and records the call's outcome.
func (m *mcpCall) settle(res bucketing.Result) bucketing.Result {
	if m.capture && !m.read && !m.over {
		m.readJSON()
	}
	if m.callID == nil {
		return res
	}
	ev := &m.c.ev
	switch {
	case !m.found && (m.over || (m.sse != nil && m.sse.skipped > 0)):
		ev.Outcome = OutcomeUnread
	case !m.found && m.capture:
		ev.Outcome = OutcomeUnread // a JSON answer that held no response to the call
	case !m.found:
		ev.Outcome = OutcomeNoAnswer
	case m.response.Error != nil:
		ev.Outcome = OutcomeRPCError
		if res.OK() {
			res = rpcErrorResult(m.response.Error.Code)
		}
	default:
		var cr callResult
		_ = json.Unmarshal(m.response.Result, &cr)
		if !cr.IsError {
			ev.Outcome = OutcomeOK
			break
		}
		ev.Outcome = OutcomeToolErr
		if res.OK() {
			res = bucketing.Result{Code: bucketing.CodeUpstream, Class: bucketing.ClassTerminal, Reason: reasonToolError,
				Detail: "the tool answered with an error result (isError)"}
		}
	}
	return res
}

// rpcErrorResult buckets a JSON-RPC error code: the standard request
// errors are the caller's (validation), internal and server errors
// upstream's.
func rpcErrorResult(code int64) bucketing.Result {
	detail := "the server answered JSON-RPC error " + strconv.FormatInt(code, 10)
	user := func(reason string) bucketing.Result {
		return bucketing.Result{Code: bucketing.CodeValidation, Class: bucketing.ClassUser, Reason: reason, Detail: detail}
	}
	switch code {
	case -32700:
		return user("rpc_parse_error")
	case -32600:
		return user("rpc_invalid_request")
	case -32601:
		return user("rpc_method_not_found")
	case -32602:
		return user("rpc_invalid_params")
	case -32002:
		return user("rpc_not_found")
	case -32603:
		return bucketing.Result{Code: bucketing.CodeUpstream, Class: bucketing.ClassTransient, Retryable: true, Reason: "rpc_internal_error", Detail: detail}
	}
	return bucketing.Result{Code: bucketing.CodeUpstream, Class: bucketing.ClassTransient, Retryable: true, Reason: "rpc_error", Detail: detail}
}

// mcpRefuse answers refused tools/call the way MCP asks for input errors:
// a JSON-RPC result with isError true, the detail and every violation as
// text, the envelope as structuredContent, over HTTP 200, with the
// request's id. In a batch, every request is answered and none is sent:
// the refused calls with their results, the others with a JSON-RPC error
// saying why. A refused tools/call without an id (which no response can
// answer) gets the plain refusal.
func (c *call) mcpRefuse(r *http.Request, msgs []rpcMessage, batch bool, refs []*refusal, first int) *http.Response {
	ref := refs[first]
	c.ev.Outcome = OutcomeRefused
	if batch {
		// The event is the refused call's.
		tc, _ := parseToolCall(msgs[first].Params)
		c.ev.Tool, c.ev.RPCID = tc.name, idText(msgs[first].ID)
	}
	if !batch && !msgs[0].isRequest() {
		return c.refuse(r, ref)
	}
	var body []byte
	if !batch {
		body = rpcToolError(msgs[0].ID, refusalText(ref), ref.envelope())
	} else {
		var out []json.RawMessage
		for i := range msgs {
			if !msgs[i].isRequest() {
				continue
			}
			if refs[i] != nil {
				out = append(out, rpcToolError(msgs[i].ID, refusalText(refs[i]), refs[i].envelope()))
				continue
			}
			e, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": msgs[i].ID, "error": map[string]any{
				"code": -32000, "message": "not sent: toolgate refused a tools/call in the same batch"}})
			out = append(out, e)
		}
		body, _ = json.Marshal(out)
	}
	paths := make([]string, len(ref.violations))
	for i, v := range ref.violations {
		paths[i] = v.Path
	}
	c.ev.Refused = true
	c.ev.Detail = ref.detail
	c.ev.ViolationPaths = paths
	c.finish(bucketing.Result{Code: ref.code, Class: bucketing.ClassOf(ref.code), Reason: ref.reason}, 0, int64(len(body)))
	resp := mcpAnswer(r, http.StatusOK, string(ref.code), body)
	if sid := r.Header.Get(headerMCPSession); sid != "" {
		resp.Header[headerMCPSession] = []string{sid}
	}
	return resp
}

// refusalText is the human text of a refusal: the detail, then one line
// per violation with its path, message, and what was expected and got.
func refusalText(ref *refusal) string {
	var b strings.Builder
	b.WriteString(ref.detail)
	for _, v := range ref.violations {
		b.WriteString("\n- ")
		b.WriteString(pathOrArgs(v.Path))
		b.WriteString(": ")
		b.WriteString(v.Message)
		switch {
		case v.Expected != "" && v.Got != "":
			fmt.Fprintf(&b, " (expected %s, got %s)", v.Expected, v.Got)
		case v.Expected != "" && v.Expected != "absent":
			fmt.Fprintf(&b, " (expected %s)", v.Expected)
		}
	}
	return b.String()
}

// rpcToolError is a JSON-RPC response holding a tool result with isError
// true: text for the model, the envelope as structured content.
func rpcToolError(id json.RawMessage, text string, envelope []byte) []byte {
	type content struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	type result struct {
		Content           []content       `json:"content"`
		StructuredContent json.RawMessage `json:"structuredContent"`
		IsError           bool            `json:"isError"`
	}
	b, _ := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Result  result          `json:"result"`
	}{"2.0", id, result{Content: []content{{Type: "text", Text: text}}, StructuredContent: envelope, IsError: true}})
	return b
}

// mcpAnswer builds an answer toolgate makes itself on an MCP route:
// application/json, which the streamable HTTP transport allows for the
// answer to any POST, unless the caller accepts only text/event-stream, in
// which case the message is sent as one event.
func mcpAnswer(r *http.Request, status int, code string, body []byte) *http.Response {
	resp := envelopeResponse(r, status, code, nil, body)
	if acceptsOnlySSE(r) {
		sse := make([]byte, 0, len(body)+24)
		sse = append(sse, "event: message\ndata: "...)
		sse = append(sse, body...)
		sse = append(sse, "\n\n"...)
		resp.Header["Content-Type"] = []string{"text/event-stream"}
		resp.Header["Content-Length"] = []string{strconv.Itoa(len(sse))}
		resp.Body, resp.ContentLength = io.NopCloser(bytes.NewReader(sse)), int64(len(sse))
	}
	return resp
}

// acceptsOnlySSE reports whether the caller's Accept names
// text/event-stream and no JSON.
func acceptsOnlySSE(r *http.Request) bool {
	sse, js := false, false
	for _, v := range r.Header.Values("Accept") {
		for _, part := range strings.Split(v, ",") {
			mt, _, _ := mime.ParseMediaType(strings.TrimSpace(part))
			switch mt {
			case "text/event-stream":
				sse = true
			case "application/json", "*/*", "application/*":
				js = true
			}
		}
	}
	return sse && !js
}
