package mcpcall

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/toolgate/toolgate/bucketing"
	"github.com/toolgate/toolgate/proxy/internal/conf"
	"github.com/toolgate/toolgate/proxy/internal/pipe"
	"github.com/toolgate/toolgate/proxy/mcp"
	"github.com/toolgate/toolgate/sink"
)

// mcpRefuse answers refused tools/call the way MCP asks for input errors:
// a JSON-RPC result with isError true, the detail and every violation as
// text, the envelope in _meta (and as structuredContent for a tool listed
// without an outputSchema: mcp.ToolError), over HTTP 200, with the
// request's id; a call that asked to run as a task (2025-11-25) gets a
// task that has already failed (tasks.go). In a batch, every request
// is answered and none is sent:
// the refused calls with their results, the others with a JSON-RPC error
// saying why. A refused tools/call without an id (which no response can
// answer) gets the plain refusal.
func mcpRefuse(c *pipe.Call, r *http.Request, msgs []mcp.Message, batch bool, refs []*conf.Refusal, first int) *http.Response {
	ref := refs[first]
	c.Event.Outcome = sink.OutcomeRefused
	if batch {
		// The event is the refused call's.
		tc, _ := mcp.ParseToolCall(msgs[first].Params)
		c.Event.Tool, c.Event.RPCID = tc.Name, mcp.IDText(msgs[first].ID)
	}
	if !batch && !msgs[0].IsRequest() {
		return c.Refuse(r, ref)
	}
	m := ExchangeOf(c)
	if !batch && m.ask != nil {
		return mcpAskInBand(c, r, &msgs[0], ref)
	}
	var body []byte
	if !batch {
		var asTask bool
		if body, asTask = refusedTaskAnswer(c, r, &msgs[0], ref); !asTask {
			body = mcp.ToolError(msgs[0].ID, RefusalText(ref), ref.Envelope(), m.Stateless, m.Tools.PlainResult(c.Event.Tool))
		}
	} else {
		var out []json.RawMessage
		for i := range msgs {
			if !msgs[i].IsRequest() {
				continue
			}
			if refs[i] != nil {
				tc, _ := mcp.ParseToolCall(msgs[i].Params)
				out = append(out, mcp.ToolError(msgs[i].ID, RefusalText(refs[i]), refs[i].Envelope(), m.Stateless, m.Tools.PlainResult(tc.Name)))
				continue
			}
			e, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": msgs[i].ID, "error": map[string]any{
				"code": -32000, "message": "not sent: toolgate refused a tools/call in the same batch"}})
			out = append(out, e)
		}
		body, _ = json.Marshal(out)
	}
	paths := make([]string, len(ref.Violations))
	for i, v := range ref.Violations {
		paths[i] = v.Path
	}
	c.Event.Refused = true
	c.Event.Detail = ref.Detail
	c.Event.ViolationPaths = paths
	c.Finish(bucketing.Result{Code: ref.Code, Class: bucketing.ClassOf(ref.Code), Reason: ref.Reason, RetryAfterMS: ref.RetryAfterMS}, 0, int64(len(body)))
	resp := mcpAnswer(r, http.StatusOK, string(ref.Code), body)
	if sid := r.Header.Get(mcp.HeaderSession); sid != "" {
		resp.Header[mcp.HeaderSession] = []string{sid}
	}
	return resp
}

// RefusalText is the human text of a refusal: the detail, then one line
// per violation with its path, message, and what was expected and got.
func RefusalText(ref *conf.Refusal) string {
	var b strings.Builder
	b.WriteString(ref.Detail)
	for _, v := range ref.Violations {
		b.WriteString("\n- ")
		b.WriteString(conf.PathOrArgs(v.Path))
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

// mcpAnswer builds an answer toolgate makes itself on an MCP route:
// application/json, which the streamable HTTP transport allows for the
// answer to any POST, unless the caller accepts only text/event-stream, in
// which case the message is sent as one event.
func mcpAnswer(r *http.Request, status int, code string, body []byte) *http.Response {
	resp := pipe.EnvelopeResponse(r, status, code, nil, body)
	if mcp.AcceptsOnlySSE(r) {
		sse := mcp.EventMessage(body)
		resp.Header["Content-Type"] = []string{"text/event-stream"}
		resp.Header["Content-Length"] = []string{strconv.Itoa(len(sse))}
		resp.Body, resp.ContentLength = io.NopCloser(bytes.NewReader(sse)), int64(len(sse))
	}
	return resp
}
