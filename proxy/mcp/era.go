package mcp

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
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

	// MetaProtocolVersion is the _meta key of a stateless-era request's
	// protocol version.
	MetaProtocolVersion = "io.modelcontextprotocol/protocolVersion"
	// MetaTraceparent is the _meta key of the W3C trace context.
	MetaTraceparent = "traceparent"
	// MetaClientCapabilities is the _meta key of a stateless-era request's
	// client capabilities.
	MetaClientCapabilities = "io.modelcontextprotocol/clientCapabilities"

	// RPCHeaderMismatch is the JSON-RPC error code of a request whose
	// headers disagree with its body (HeaderMismatch, 2026-07-28
	// streamable-http "Server Validation").
	RPCHeaderMismatch = -32020

	// base64 sentinel of Mcp-Name and Mcp-Param-* values (2026-07-28
	// streamable-http "Value Encoding").
	b64Prefix, b64Suffix = "=?base64?", "?="
)

// Headers of the MCP streamable HTTP transport toolgate reads or keeps.
const (
	// HeaderProtocol carries the protocol version of a request.
	HeaderProtocol = "Mcp-Protocol-Version"
	// HeaderSession carries a session-era request's session id.
	HeaderSession = "Mcp-Session-Id"
	// HeaderMethod mirrors a stateless-era request's method.
	HeaderMethod = "Mcp-Method"
	// HeaderName mirrors a stateless-era request's params.name or
	// params.uri.
	HeaderName = "Mcp-Name"
)

// Names of the params members of a 2026-07-28 Multi Round-Trip Request
// (a retry that answers the server's input requests).
const (
	// ParamRequestState is the state the client echoes.
	ParamRequestState = "requestState"
	// ParamInputResponses are the client's answers.
	ParamInputResponses = "inputResponses"
)

// IsStateless reports whether a protocol version is of the stateless era.
func IsStateless(version string) bool {
	return version >= firstStatelessVersion
}

// Envelope is what toolgate reads of a request's params for its era:
// the protocol version in _meta, and the name Mcp-Name mirrors.
type Envelope struct {
	// Version is params._meta["io.modelcontextprotocol/protocolVersion"],
	// "" when absent.
	Version string
	// Name is params.name or params.uri, for the methods Mcp-Name mirrors;
	// HasName is true for those methods.
	Name    string
	HasName bool
	// Traceparent is params._meta.traceparent, the W3C trace context MCP
	// carries in the message (2026-07-28 basic "_meta").
	Traceparent string
}

// ReadEnvelope reads a request's params with exact member names (as
// decodeRPC does), so toolgate and the server read the same members.
func ReadEnvelope(msg *Message) Envelope {
	var env Envelope
	var p map[string]json.RawMessage
	if len(msg.Params) == 0 || json.Unmarshal(msg.Params, &p) != nil {
		return env
	}
	if meta := p["_meta"]; len(meta) > 0 {
		var mm map[string]json.RawMessage
		if json.Unmarshal(meta, &mm) == nil {
			_ = unmarshalExact(mm[MetaProtocolVersion], &env.Version)
			_ = unmarshalExact(mm[MetaTraceparent], &env.Traceparent)
		}
	}
	var src json.RawMessage
	switch msg.Method {
	case MethodToolsCall, "prompts/get":
		src = p["name"]
	case "resources/read":
		src = p["uri"]
	default:
		return env
	}
	env.HasName = true
	_ = unmarshalExact(src, &env.Name)
	return env
}

// ProtocolOf is the protocol version a message speaks: its _meta's, else
// the MCP-Protocol-Version header, else an initialize's protocolVersion.
func ProtocolOf(r *http.Request, msg *Message, env Envelope) string {
	if env.Version != "" {
		return BoundedText(env.Version)
	}
	if v := r.Header.Get(HeaderProtocol); v != "" {
		return BoundedText(v)
	}
	if msg.Method == "initialize" {
		var p map[string]json.RawMessage
		var v string
		if json.Unmarshal(msg.Params, &p) == nil && unmarshalExact(p["protocolVersion"], &v) == nil {
			return BoundedText(v)
		}
	}
	return ""
}

// BoundedText cuts a caller's string to what an event keeps.
func BoundedText(s string) string {
	if len(s) > 32 {
		s = s[:32]
	}
	return strings.ToValidUTF8(s, "")
}

// HeaderMismatch checks a stateless-era request's headers against its body
// (2026-07-28 streamable-http "Server Validation"): MCP-Protocol-Version
// must equal _meta's protocol version, Mcp-Method the method, and Mcp-Name
// (after base64 sentinel decoding) params.name or params.uri for the
// methods that carry one. It returns "" when they agree, else one sentence
// saying what disagrees; it never quotes argument values, only the
// headers' own names and the method and tool names.
func HeaderMismatch(r *http.Request, msg *Message, env Envelope) string {
	hv := r.Header.Values(HeaderProtocol)
	switch {
	case len(hv) != 1:
		return "the request must carry one MCP-Protocol-Version header"
	case hv[0] != env.Version:
		return fmt.Sprintf("MCP-Protocol-Version header %q does not match the body's %s %q", BoundedText(hv[0]), MetaProtocolVersion, BoundedText(env.Version))
	}
	mv := r.Header.Values(HeaderMethod)
	switch {
	case len(mv) != 1:
		return "the request must carry one Mcp-Method header"
	case mv[0] != msg.Method:
		return fmt.Sprintf("Mcp-Method header %q does not match the body's method %q", BoundedText(mv[0]), BoundedText(msg.Method))
	}
	if !env.HasName {
		return ""
	}
	nv := r.Header.Values(HeaderName)
	if len(nv) != 1 {
		return "a " + msg.Method + " request must carry one Mcp-Name header"
	}
	name, ok := DecodeHeaderValue(nv[0])
	if !ok {
		return "the Mcp-Name header is not a valid header value"
	}
	if name != env.Name {
		return fmt.Sprintf("Mcp-Name header does not match the body's %s", map[bool]string{true: "params.uri", false: "params.name"}[msg.Method == "resources/read"])
	}
	return ""
}

// DecodeHeaderValue decodes an Mcp-Name or Mcp-Param-* value: base64 in
// its sentinel, or plain visible ASCII as is.
func DecodeHeaderValue(v string) (string, bool) {
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

// IsInputRequired reports whether a result is an MRTR interim result.
func IsInputRequired(result json.RawMessage) bool {
	if !bytes.Contains(result, []byte("input_required")) {
		return false
	}
	var r map[string]json.RawMessage
	var rt string
	return json.Unmarshal(result, &r) == nil && unmarshalExact(r["resultType"], &rt) == nil && rt == "input_required"
}

// asMap is the annotations as policies see them (input.tool_annotations):
// only the hints the server gave.
func (h *ToolHints) AsMap() map[string]any {
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
func (h *ToolHints) SafeToRepeat() bool {
	return h != nil && (h.Idempotent != nil && *h.Idempotent || h.ReadOnly != nil && *h.ReadOnly)
}

// WithoutProgressToken drops progressToken from a request's _meta, so
// toolgate's own request asks for no progress.
func WithoutProgressToken(meta json.RawMessage) json.RawMessage {
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

// WithTraceparent adds a W3C traceparent to a request's _meta when it has
// none, so toolgate's own request joins the call's trace in the message as
// well as in its headers (2026-07-28 basic "_meta": trace context keys).
func WithTraceparent(meta json.RawMessage, tp string) json.RawMessage {
	mm := map[string]json.RawMessage{}
	if len(meta) > 0 && json.Unmarshal(meta, &mm) != nil {
		return meta
	}
	if _, ok := mm[MetaTraceparent]; ok {
		return meta
	}
	mm[MetaTraceparent], _ = json.Marshal(tp)
	b, _ := json.Marshal(mm)
	return b
}
