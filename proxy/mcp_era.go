package proxy

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/toolgate/toolgate/bucketing"
	"github.com/toolgate/toolgate/sink"
)

// The MCP protocol eras toolgate tells apart per request (MCP
// specification 2026-07-28, basic/transports/streamable-http "Backward
// Compatibility"): the session era (2025-11-25 and earlier: initialize,
// Mcp-Session-Id) and the stateless era (2026-07-28 and later: every request
// carries its protocol version, client info and capabilities in _meta, and
// mirrors method and name into headers).
const (
	// firstStatelessVersion is the first protocol revision without
	// sessions. Versions are dates, so later ones sort after it.
	firstStatelessVersion = "2026-07-28"

	metaProtocolVersion = "io.modelcontextprotocol/protocolVersion"
	metaTraceparent     = "traceparent"
	headerMCPProtocol   = "Mcp-Protocol-Version"

	// rpcHeaderMismatch is the JSON-RPC error code of a request whose
	// headers disagree with its body (HeaderMismatch, 2026-07-28
	// streamable-http "Server Validation").
	rpcHeaderMismatch = -32020

	// reasonHeaderMismatch is the refusal reason of such a request.
	reasonHeaderMismatch = "header_mismatch"

	// base64 sentinel of Mcp-Name and Mcp-Param-* values (2026-07-28
	// streamable-http "Value Encoding").
	b64Prefix, b64Suffix = "=?base64?", "?="
)

// isStateless reports whether a protocol version is of the stateless era.
func isStateless(version string) bool {
	return version >= firstStatelessVersion
}

// rpcEnvelope is what toolgate reads of a request's params for its era:
// the protocol version in _meta, and the name Mcp-Name mirrors.
type rpcEnvelope struct {
	version string // params._meta["io.modelcontextprotocol/protocolVersion"], "" when absent
	name    string // params.name or params.uri, for the methods Mcp-Name mirrors
	hasName bool
	// traceparent is params._meta.traceparent, the W3C trace context MCP
	// carries in the message (2026-07-28 basic "_meta").
	traceparent string
}

// readEnvelope reads a request's params with exact member names (as
// decodeRPC does), so toolgate and the server read the same members.
func readEnvelope(msg *rpcMessage) rpcEnvelope {
	var env rpcEnvelope
	var p map[string]json.RawMessage
	if len(msg.Params) == 0 || json.Unmarshal(msg.Params, &p) != nil {
		return env
	}
	if meta := p["_meta"]; len(meta) > 0 {
		var mm map[string]json.RawMessage
		if json.Unmarshal(meta, &mm) == nil {
			_ = unmarshalExact(mm[metaProtocolVersion], &env.version)
			_ = unmarshalExact(mm[metaTraceparent], &env.traceparent)
		}
	}
	var src json.RawMessage
	switch msg.Method {
	case methodToolsCall, "prompts/get":
		src = p["name"]
	case "resources/read":
		src = p["uri"]
	default:
		return env
	}
	env.hasName = true
	_ = unmarshalExact(src, &env.name)
	return env
}

// protocolOf is the protocol version a message speaks: its _meta's, else
// the MCP-Protocol-Version header, else an initialize's protocolVersion.
func protocolOf(r *http.Request, msg *rpcMessage, env rpcEnvelope) string {
	if env.version != "" {
		return boundedText(env.version)
	}
	if v := r.Header.Get(headerMCPProtocol); v != "" {
		return boundedText(v)
	}
	if msg.Method == "initialize" {
		var p map[string]json.RawMessage
		var v string
		if json.Unmarshal(msg.Params, &p) == nil && unmarshalExact(p["protocolVersion"], &v) == nil {
			return boundedText(v)
		}
	}
	return ""
}

// boundedText cuts a caller's string to what an event keeps.
func boundedText(s string) string {
	if len(s) > 32 {
		s = s[:32]
	}
	return strings.ToValidUTF8(s, "")
}

// headerMismatch checks a stateless-era request's headers against its body
// (2026-07-28 streamable-http "Server Validation"): MCP-Protocol-Version
// must equal _meta's protocol version, Mcp-Method the method, and Mcp-Name
// (after base64 sentinel decoding) params.name or params.uri for the
// methods that carry one. It returns "" when they agree, else one sentence
// saying what disagrees; it never quotes argument values, only the
// headers' own names and the method and tool names.
func headerMismatch(r *http.Request, msg *rpcMessage, env rpcEnvelope) string {
	hv := r.Header.Values(headerMCPProtocol)
	switch {
	case len(hv) != 1:
		return "the request must carry one MCP-Protocol-Version header"
	case hv[0] != env.version:
		return fmt.Sprintf("MCP-Protocol-Version header %q does not match the body's %s %q", boundedText(hv[0]), metaProtocolVersion, boundedText(env.version))
	}
	mv := r.Header.Values(headerMCPMethod)
	switch {
	case len(mv) != 1:
		return "the request must carry one Mcp-Method header"
	case mv[0] != msg.Method:
		return fmt.Sprintf("Mcp-Method header %q does not match the body's method %q", boundedText(mv[0]), boundedText(msg.Method))
	}
	if !env.hasName {
		return ""
	}
	nv := r.Header.Values(headerMCPName)
	if len(nv) != 1 {
		return "a " + msg.Method + " request must carry one Mcp-Name header"
	}
	name, ok := decodeHeaderValue(nv[0])
	if !ok {
		return "the Mcp-Name header is not a valid header value"
	}
	if name != env.name {
		return fmt.Sprintf("Mcp-Name header does not match the body's %s", map[bool]string{true: "params.uri", false: "params.name"}[msg.Method == "resources/read"])
	}
	return ""
}

// decodeHeaderValue decodes an Mcp-Name or Mcp-Param-* value: base64 in
// its sentinel, or plain visible ASCII as is.
func decodeHeaderValue(v string) (string, bool) {
	if strings.HasPrefix(v, b64Prefix) && strings.HasSuffix(v, b64Suffix) && len(v) >= len(b64Prefix)+len(b64Suffix) {
		b, err := base64.StdEncoding.DecodeString(v[len(b64Prefix) : len(v)-len(b64Suffix)])
		if err != nil {
			return "", false
		}
		return string(b), true
	}
	for i := 0; i < len(v); i++ {
		if c := v[i]; c != '\t' && (c < 0x20 || c > 0x7e) {
			return "", false
		}
	}
	return v, true
}

// mcpHeaderRefuse answers a request whose headers disagree with its body:
// HTTP 400 with the HeaderMismatch JSON-RPC error, as the specification
// asks of a server that reads the body. It never reaches upstream.
func (c *call) mcpHeaderRefuse(r *http.Request, msg *rpcMessage, env rpcEnvelope, why string) *http.Response {
	detail := "Header mismatch: " + why
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": msg.ID, "error": map[string]any{
		"code": rpcHeaderMismatch, "message": detail}})
	if msg.Method == methodToolsCall {
		c.ev.Outcome = sink.OutcomeRefused
		if len(env.name) <= 128 {
			c.ev.Tool = env.name // the body's tool, which the server would have run
		}
	}
	c.ev.Refused = true
	c.ev.Detail = "MCP server " + c.mcp.server + " got a request whose headers do not match its body: " + why
	c.finish(bucketing.Result{Code: bucketing.CodeValidation, Class: bucketing.ClassUser, Reason: reasonHeaderMismatch}, 0, int64(len(body)))
	return mcpAnswer(r, http.StatusBadRequest, string(bucketing.CodeValidation), body)
}

// resultTypeComplete marks a result toolgate makes itself as final, as
// 2026-07-28 asks of every result.
var resultTypeComplete = []byte(`"complete"`)

// isInputRequired reports whether a result is an MRTR interim result.
func isInputRequired(result json.RawMessage) bool {
	if !bytes.Contains(result, []byte("input_required")) {
		return false
	}
	var r map[string]json.RawMessage
	var rt string
	return json.Unmarshal(result, &r) == nil && unmarshalExact(r["resultType"], &rt) == nil && rt == "input_required"
}

// traceIDOf is the trace id of a W3C traceparent, when it is one.
func traceIDOf(tp string) (string, bool) {
	if len(tp) >= 55 && tp[2] == '-' && tp[35] == '-' {
		id := tp[3:35]
		if isHex(id) && id != "00000000000000000000000000000000" {
			return id, true
		}
	}
	return "", false
}

// asMap is the annotations as policies see them (input.tool_annotations):
// only the hints the server gave.
func (h *toolHints) asMap() map[string]any {
	if h == nil {
		return nil
	}
	m := make(map[string]any, 4)
	for _, f := range []struct {
		k string
		v *bool
	}{{"readOnlyHint", h.ReadOnly}, {"destructiveHint", h.Destructive}, {"idempotentHint", h.Idempotent}, {"openWorldHint", h.OpenWorld}} {
		if f.v != nil {
			m[f.k] = *f.v
		}
	}
	return m
}

// safeToRepeat reports whether the server says calling the tool again has
// no further effect: idempotentHint or readOnlyHint true. Hints default to
// false (2026-07-28 server/tools ToolAnnotations).
func (h *toolHints) safeToRepeat() bool {
	return h != nil && (h.Idempotent != nil && *h.Idempotent || h.ReadOnly != nil && *h.ReadOnly)
}

// retryableByHints settles retryable in the envelope of a tools/call that
// failed in toolgate's hands (upstream unreachable, timed out, cut short)
// by the tool's annotations, when the server listed any: a failure after
// the request may have reached the server is retryable only for a tool the
// server calls idempotent or read-only, since repeating any other may do
// its work twice. A connection that was never made is retryable as before.
func (m *mcpCall) retryableByHints(env []byte) []byte {
	h := m.srv.hints(m.c.ev.Tool)
	if h == nil {
		return env
	}
	var e bucketing.Envelope
	if json.Unmarshal(env, &e) != nil || e.Error == nil || !e.Error.Retryable || e.Error.Reason == bucketing.ReasonConnect || h.safeToRepeat() {
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
	if err != nil || !isLoopback(strings.Trim(host, "[]")) {
		return ""
	}
	if h := hostOnly(r.Host); !isLoopback(h) {
		return "its Host names another host than this loopback listener"
	}
	if o := r.Header.Get("Origin"); o != "" {
		u, err := url.Parse(o)
		if err != nil || !isLoopback(hostOnly(u.Host)) {
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
func (c *call) mcpNotLocalRefuse(r *http.Request, why string) *http.Response {
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": nil, "error": map[string]any{
		"code": -32600, "message": "Forbidden: " + why}})
	c.ev.Refused = true
	c.ev.Detail = "MCP server " + c.mcp.server + " refused a request through a loopback listener: " + why + " (DNS rebinding)"
	c.finish(bucketing.Result{Code: bucketing.CodePolicy, Class: bucketing.ClassPolicy, Reason: reasonNotLocal}, 0, int64(len(body)))
	return mcpAnswer(r, http.StatusForbidden, string(bucketing.CodePolicy), body)
}
