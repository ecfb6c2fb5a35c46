package mcp

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestAnswerReaderRPCError: the JSON-RPC error answering ReqID is noted,
// whatever the method, in a JSON answer and in an event stream; a result,
// another id's error, and an answer past the bound note none.
func TestAnswerReaderRPCError(t *testing.T) {
	errAnswer := `{"jsonrpc":"2.0","id":"p-1","error":{"code":-32602,"message":"no prompt ARG"}}`
	tests := []struct {
		name, ctype, body string
		max               int
		want              int64 // 0: none
	}{
		{"json", "application/json", errAnswer, 1 << 10, -32602},
		{"event stream", "text/event-stream", "event: message\ndata: " + errAnswer + "\n\n", 1 << 10, -32602},
		{"result", "application/json", `{"jsonrpc":"2.0","id":"p-1","result":{}}`, 1 << 10, 0},
		{"another id", "application/json", `{"jsonrpc":"2.0","id":"p-2","error":{"code":-32601,"message":"x"}}`, 1 << 10, 0},
		{"past the bound", "application/json", errAnswer, 16, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := AnswerReader{ReqID: json.RawMessage(`"p-1"`)}
			a.Begin(http.Header{"Content-Type": {tc.ctype}}, -1, tc.max, &learned{})
			for i := 0; i < len(tc.body); i += 7 {
				a.Observe([]byte(tc.body[i:min(i+7, len(tc.body))]))
			}
			code, ok := a.RPCError()
			if ok != (tc.want != 0) || code != tc.want {
				t.Errorf("RPCError = %d %v, want %d", code, ok, tc.want)
			}
		})
	}
}

// TestDescribed: a listed tool's description is kept cut to
// maxDescription bytes at a character's end; an unlisted tool is not
// described.
func TestDescribed(t *testing.T) {
	var s Schemas
	st := s.Server("k")
	long := strings.Repeat("€", maxDescription) // three bytes each: cut inside one
	str := func(s string) json.RawMessage { b, _ := json.Marshal(s); return b }
	var res ToolsListResult
	// A description that is not a string is no description, and does not
	// make the list unreadable.
	if err := json.Unmarshal([]byte(`{"tools":[{"name":"d","description":5,"inputSchema":{"type":"object"}}]}`), &res); err != nil {
		t.Fatalf("a list with a numeric description: %v", err)
	}
	tools := append([]ListedTool{{Name: "a", Description: str("Adds")}, {Name: "b", Description: str(long)}, {Name: "c"}}, res.Tools...)
	st.Learn(tools, true, 10, 1<<10, nil)
	for _, tc := range []struct {
		name, want string
		listed     bool
	}{{"a", "Adds", true}, {"b", long[:maxDescription-maxDescription%3], true}, {"c", "", true}, {"d", "", true}, {"zz", "", false}} {
		d, listed := st.Described(tc.name)
		if d != tc.want || listed != tc.listed || !utf8.ValidString(d) || len(d) > maxDescription {
			t.Errorf("Described(%q) = %q (%d bytes) %v, want %q %v", tc.name, d, len(d), listed, tc.want, tc.listed)
		}
	}
}
