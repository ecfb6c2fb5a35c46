package mcp

import (
	"errors"
	"strings"
	"testing"
)

// TestMCPParseToolsList reads the forms a recorded tools/list takes (the
// result, the JSON-RPC response, an event stream holding it) and refuses
// what is not one whole list.
func TestMCPParseToolsList(t *testing.T) {
	const result = `{"tools":[{"name":"a","inputSchema":{"type":"object"}},{"name":"b","inputSchema":{"type":"object"}}]}`
	for name, in := range map[string]string{
		"result":       result,
		"response":     `{"jsonrpc":"2.0","id":3,"result":` + result + `}`,
		"event stream": "event: message\nid: 1\ndata: {\"jsonrpc\":\"2.0\",\"id\":3,\"result\":" + result + "}\n\n",
	} {
		res, err := ParseToolsList([]byte(in), 1<<20)
		if err != nil || len(res.Tools) != 2 || res.Tools[1].Name != "b" {
			t.Errorf("%s: %+v, %v", name, res, err)
		}
	}
	for name, c := range map[string]struct{ in, want string }{
		"error":       {`{"jsonrpc":"2.0","id":3,"error":{"code":-32601,"message":"no"}}`, "JSON-RPC error -32601"},
		"no tools":    {`{"jsonrpc":"2.0","id":3,"result":{"prompts":[]}}`, "expected a result with a tools array"},
		"not JSON":    {`tools: [a]`, "expected a result"},
		"a page":      {`{"tools":[],"nextCursor":"p2"}`, "one page of several"},
		"over limit":  {result, "larger than the route's 10-byte"},
		"tools not [": {`{"tools":{"name":"a"}}`, "tools array"},
	} {
		limit := 1 << 20
		if name == "over limit" {
			limit = 10
		}
		_, err := ParseToolsList([]byte(c.in), limit)
		if !errors.Is(err, ErrNotToolsList) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", name, err, c.want)
		}
	}
}

// FuzzParseToolsList feeds recorded-list parsing arbitrary bytes: it never
// panics, and a list it accepts is whole and within the limit.
func FuzzParseToolsList(f *testing.F) {
	f.Add([]byte(`{"tools":[{"name":"a","inputSchema":{"type":"object"}}]}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"result":{"tools":[],"ttlMs":5,"cacheScope":"private"}}`))
	f.Add([]byte("data: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"tools\":[]}}\n\n"))
	f.Add([]byte(`[{"jsonrpc":"2.0","id":1,"result":{"tools":[]}}]`))
	f.Add([]byte(`{"tools":[],"nextCursor":"x"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		res, err := ParseToolsList(data, 4096)
		if err != nil {
			return
		}
		if len(data) > 4096 || res.NextCursor != "" {
			t.Fatalf("accepted %d bytes with nextCursor %q", len(data), res.NextCursor)
		}
	})
}
