package mcp

import (
	"encoding/json"
	"net/http"
	"testing"
)

// TestHeaderMismatch covers the 2026-07-28 header/body rules: each header
// present once and equal to the body, Mcp-Name base64-decoded from its
// sentinel, and nothing asked of methods that carry no name.
func TestHeaderMismatch(t *testing.T) {
	body := func(method, params string) *Message {
		return &Message{JSONRPC: "2.0", ID: json.RawMessage("1"), Method: method, Params: json.RawMessage(params)}
	}
	const meta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}`
	for _, tc := range []struct {
		name    string
		headers map[string]string
		msg     *Message
		ok      bool
	}{
		{"agree", map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "get_weather"},
			body("tools/call", `{"name":"get_weather",`+meta+`}`), true},
		{"base64 name", map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "=?base64?SGVsbG8sIOS4lueVjA==?="},
			body("tools/call", `{"name":"Hello, 世界",`+meta+`}`), true},
		{"uri of resources/read", map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "resources/read", "Mcp-Name": "file:///a.json"},
			body("resources/read", `{"uri":"file:///a.json",`+meta+`}`), true},
		{"tools/list needs no name", map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/list"},
			body("tools/list", `{`+meta+`}`), true},
		{"name differs", map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "other"},
			body("tools/call", `{"name":"get_weather",`+meta+`}`), false},
		{"name missing", map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call"},
			body("tools/call", `{"name":"get_weather",`+meta+`}`), false},
		{"method differs", map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/list", "Mcp-Name": "get_weather"},
			body("tools/call", `{"name":"get_weather",`+meta+`}`), false},
		{"version differs", map[string]string{"Mcp-Protocol-Version": "2025-11-25", "Mcp-Method": "tools/call", "Mcp-Name": "get_weather"},
			body("tools/call", `{"name":"get_weather",`+meta+`}`), false},
		{"version only in the header", map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "get_weather"},
			body("tools/call", `{"name":"get_weather"}`), false},
		{"bad base64", map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "=?base64?***?="},
			body("tools/call", `{"name":"get_weather",`+meta+`}`), false},
		{"meta name differs in case is not the version", map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/list"},
			body("tools/list", `{"_meta":{"IO.modelcontextprotocol/protocolVersion":"2026-07-28"}}`), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, _ := http.NewRequest(http.MethodPost, "http://127.0.0.1/mcp", nil)
			for k, v := range tc.headers {
				r.Header.Set(k, v)
			}
			why := HeaderMismatch(r, tc.msg, ReadEnvelope(tc.msg))
			if (why == "") != tc.ok {
				t.Errorf("HeaderMismatch = %q, want ok=%v", why, tc.ok)
			}
		})
	}
}
