package mcpcall

import (
	"encoding/json"
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/toolgate/toolgate/bucketing"
	"github.com/toolgate/toolgate/proxy/internal/conf"
	"github.com/toolgate/toolgate/proxy/internal/pipe"
	"github.com/toolgate/toolgate/proxy/mcp"
	"github.com/toolgate/toolgate/sink"
)

// reasonHeaderMismatch is the refusal reason of a request whose headers
// disagree with its body (mcp.HeaderMismatch).
const reasonHeaderMismatch = "header_mismatch"

// mcpHeaderRefuse answers a request whose headers disagree with its body:
// HTTP 400 with the HeaderMismatch JSON-RPC error, as the specification
// asks of a server that reads the body. It never reaches upstream.
func mcpHeaderRefuse(c *pipe.Call, r *http.Request, msg *mcp.Message, env mcp.Envelope, why string) *http.Response {
	detail := "Header mismatch: " + why
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": msg.ID, "error": map[string]any{
		"code": mcp.RPCHeaderMismatch, "message": detail}})
	if msg.Method == mcp.MethodToolsCall {
		c.Event.Outcome = sink.OutcomeRefused
		if len(env.Name) <= 128 {
			c.Event.Tool = env.Name // the body's tool, which the server would have run
		}
	}
	c.Event.Refused = true
	c.Event.Detail = "MCP server " + ExchangeOf(c).Server + " got a request whose headers do not match its body: " + why
	c.Finish(bucketing.Result{Code: bucketing.CodeValidation, Class: bucketing.ClassUser, Reason: reasonHeaderMismatch}, 0, int64(len(body)))
	return mcpAnswer(r, http.StatusBadRequest, string(bucketing.CodeValidation), body)
}

// traceIDOf is the trace id of a W3C traceparent, when it is one.
func traceIDOf(tp string) (string, bool) {
	if len(tp) >= 55 && tp[2] == '-' && tp[35] == '-' {
		id := tp[3:35]
		if pipe.IsHex(id) && id != "00000000000000000000000000000000" {
			return id, true
		}
	}
	return "", false
}

// retryableByHints settles retryable in the envelope of a tools/call that
// failed in toolgate's hands (upstream unreachable, timed out, cut short)
// by the tool's annotations, when the server listed any: a failure after
// the request may have reached the server is retryable only for a tool the
// server calls idempotent or read-only, since repeating any other may do
// its work twice. A connection that was never made is retryable as before.
func (m *Exchange) retryableByHints(env []byte) []byte {
	h := m.Tools.Hints(m.Call.Event.Tool)
	if h == nil {
		return env
	}
	var e bucketing.Envelope
	if json.Unmarshal(env, &e) != nil || e.Error == nil || !e.Error.Retryable || e.Error.Reason == bucketing.ReasonConnect || h.SafeToRepeat() {
		return env
	}
	e.Error.Retryable = false
	e.Error.RetryAfterMS = nil
	if b, err := json.Marshal(e); err == nil {
		return b
	}
	return env
}

// reasonNotLocal is the refusal reason of a request to an MCP route on a
// loopback reverse listener whose Host or Origin names another host: the
// shape of a DNS rebinding attack from a web page.
const reasonNotLocal = "host_not_local"

// notLocal reports why a request to a loopback reverse listener must be
// refused as DNS rebinding (2026-07-28 streamable-http "Security &
// Endpoint": servers validate Origin; local servers must not answer pages
// of other sites), or "" when it may pass. toolgate rewrites Host for
// upstream, so the server behind it can no longer tell: the listener must.
func notLocal(r *http.Request, kind string) string {
	if kind != "reverse" {
		return ""
	}
	la, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if !ok {
		return ""
	}
	host, _, err := net.SplitHostPort(la.String())
	if err != nil || !conf.IsLoopback(strings.Trim(host, "[]")) {
		return ""
	}
	if h := hostOnly(r.Host); !conf.IsLoopback(h) {
		return "its Host names another host than this loopback listener"
	}
	if o := r.Header.Get("Origin"); o != "" {
		u, err := url.Parse(o)
		if err != nil || !conf.IsLoopback(hostOnly(u.Host)) {
			return "its Origin is not a loopback origin"
		}
	}
	return ""
}

// hostOnly is a Host header's host, without port or brackets, lower case.
func hostOnly(hp string) string {
	if h, _, err := net.SplitHostPort(hp); err == nil {
		hp = h
	}
	return strings.ToLower(strings.Trim(hp, "[]"))
}

// mcpNotLocalRefuse answers a request notLocal refused: HTTP 403 with a
// JSON-RPC error that has no id, as the specification allows.
func mcpNotLocalRefuse(c *pipe.Call, r *http.Request, why string) *http.Response {
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": nil, "error": map[string]any{
		"code": -32600, "message": "Forbidden: " + why}})
	c.Event.Refused = true
	c.Event.Detail = "MCP server " + ExchangeOf(c).Server + " refused a request through a loopback listener: " + why + " (DNS rebinding)"
	c.Finish(bucketing.Result{Code: bucketing.CodePolicy, Class: bucketing.ClassPolicy, Reason: reasonNotLocal}, 0, int64(len(body)))
	return mcpAnswer(r, http.StatusForbidden, string(bucketing.CodePolicy), body)
}
