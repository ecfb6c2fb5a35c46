package mcpcall

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/toolgate/toolgate/proxy/mcp"
)

// FuzzMCPEnvelope feeds request bodies and header values from outside to
// the 2026-07-28 readers: they never panic, and a name that matches its
// own plain header always agrees.
func FuzzMCPEnvelope(f *testing.F) {
	f.Add(`{"name":"get_weather","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","traceparent":"00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01"}}`, "=?base64?SGVsbG8=?=")
	f.Add(`{"uri":"file:///x","_meta":{"io.modelcontextprotocol/protocolVersion":7}}`, "plain")
	f.Add(`[]`, "=?base64??=")
	f.Fuzz(func(t *testing.T, params, header string) {
		for _, method := range []string{"tools/call", "resources/read", "tools/list"} {
			msg := &mcp.Message{JSONRPC: "2.0", ID: json.RawMessage("1"), Method: method, Params: json.RawMessage(params)}
			env := mcp.ReadEnvelope(msg)
			r, _ := http.NewRequest(http.MethodPost, "http://127.0.0.1/mcp", nil)
			r.Header["Mcp-Protocol-Version"] = []string{env.Version}
			r.Header["Mcp-Method"] = []string{method}
			r.Header["Mcp-Name"] = []string{header}
			why := mcp.HeaderMismatch(r, msg, env)
			if v, ok := mcp.DecodeHeaderValue(header); ok && env.HasName && v == env.Name && env.Version == mcp.BoundedText(env.Version) && why != "" && isASCIIHeader(env.Version) {
				t.Errorf("name %q from header %q agrees, yet: %s", v, header, why)
			}
			_, _ = traceIDOf(env.Traceparent)
			_ = mcp.ProtocolOf(r, msg, env)
		}
	})
}

func isASCIIHeader(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}
