// Package mcp holds the MCP protocol as toolgate reads, writes and
// remembers it, apart from the per-call pipeline: JSON-RPC parsing and the
// one reading of a request every mainstream server shares (jsonrpc.go,
// readers.go), the protocol eras and their headers (era.go), server-sent
// events (sse.go), a server's answer and the tools learned from its
// tools/list answers (answer.go, toolslist.go, schemas.go), what /status
// shows of them (unusable.go, names.go), the tasks made for refused calls
// and the isError results (tasks.go, results.go), and a route's mcp
// section (config.go). Package proxy runs each tools/call through its
// chain of steps and calls into this package; this package never imports
// proxy.
package mcp

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"mime"
	"net/http"
	"strconv"

	"github.com/toolgate/toolgate/bucketing"
)

// DecodeMessages decodes one message or a batch from a server's answer;
// what does not decode is skipped.
func DecodeMessages(data []byte) []Message {
	data = bytes.TrimSpace(data)
	if len(data) == 0 {
		return nil
	}
	if data[0] == '[' {
		var raws []json.RawMessage
		if json.Unmarshal(data, &raws) != nil {
			return nil
		}
		out := make([]Message, 0, len(raws))
		for _, raw := range raws {
			var m Message
			if decodeRPC(raw, &m) == nil {
				out = append(out, m)
			}
		}
		return out
	}
	var m Message
	if decodeRPC(data, &m) != nil {
		return nil
	}
	return []Message{m}
}

// IsEventStream reports whether a Content-Type is text/event-stream.
func IsEventStream(ct string) bool {
	mt, _, _ := mime.ParseMediaType(ct)
	return mt == "text/event-stream"
}

// RPCErrorResult buckets a JSON-RPC error code: the standard request
// errors are the caller's (validation), internal and server errors
// upstream's.
func RPCErrorResult(code int64) bucketing.Result {
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

// AuthContext names the caller's authorization context (its Authorization
// and Cookie headers) by a hash, so lists a server marks private are
// shared only between calls that present the same credentials.
func AuthContext(r *http.Request) string {
	a, ck := r.Header.Values("Authorization"), r.Header.Values("Cookie")
	if len(a) == 0 && len(ck) == 0 {
		return "none"
	}
	h := sha256.New()
	for _, v := range a {
		h.Write([]byte(v))
		h.Write([]byte{0})
	}
	h.Write([]byte{1})
	for _, v := range ck {
		h.Write([]byte(v))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}
