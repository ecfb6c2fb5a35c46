package mcp

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func TestParseRPC(t *testing.T) {
	for _, tc := range []struct {
		body    string
		ok      bool
		batch   bool
		methods []string
	}{
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a"}}`, true, false, []string{"tools/call"}},
		{` [{"jsonrpc":"2.0","id":"x","method":"tools/list"},{"jsonrpc":"2.0","method":"notifications/initialized"}] `, true, true, []string{"tools/list", "notifications/initialized"}},
		{`{"jsonrpc":"2.0","id":1,"result":{}}`, true, false, []string{""}},
		{`{"jsonrpc":"1.0","id":1,"method":"x"}`, false, false, nil},
		{`{"jsonrpc":"2.0","id":{},"method":"x"}`, false, false, nil},
		{`[]`, false, true, nil},
		{`[1]`, false, true, nil},
		{`"str"`, false, false, nil},
		{`{"jsonrpc":"2.0"`, false, false, nil},
		{``, false, false, nil},
		{"[" + strings.Repeat(`{"jsonrpc":"2.0","method":"x"},`, maxBatch) + `{"jsonrpc":"2.0","method":"x"}]`, false, true, nil},
	} {
		msgs, batch, err := ParseRPC([]byte(tc.body))
		if (err == nil) != tc.ok || batch != tc.batch {
			t.Errorf("%.60s: err %v batch %v, want ok %v batch %v", tc.body, err, batch, tc.ok, tc.batch)
			continue
		}
		var methods []string
		for _, m := range msgs {
			methods = append(methods, m.Method)
		}
		if !reflect.DeepEqual(methods, tc.methods) {
			t.Errorf("%.60s: methods %q, want %q", tc.body, methods, tc.methods)
		}
	}
}

func TestParseToolCall(t *testing.T) {
	for _, tc := range []struct {
		params string
		name   string
		reason string
	}{
		{`{"name":"a","arguments":{"n":12345678901234567890}}`, "a", ""},
		{`{"name":"a"}`, "a", ""},
		{`{"name":"a","arguments":null}`, "a", ""},
		{`{"name":"a","arguments":[1]}`, "a", "wrong_type"},
		{`{"arguments":{}}`, "", "malformed_body"},
		{`{"name":""}`, "", "malformed_body"},
		{`[]`, "", "malformed_body"},
	} {
		call, ref := ParseToolCall(json.RawMessage(tc.params))
		reason := ""
		if ref != nil {
			reason = ref.Reason
		}
		if call.Name != tc.name || reason != tc.reason {
			t.Errorf("%s: name %q reason %q, want %q %q", tc.params, call.Name, reason, tc.name, tc.reason)
		}
		if ref == nil && call.Args == nil {
			t.Errorf("%s: nil arguments", tc.params)
		}
	}
	call, _ := ParseToolCall(json.RawMessage(`{"name":"a","arguments":{"n":12345678901234567890}}`))
	if n, ok := call.Args["n"].(json.Number); !ok || n.String() != "12345678901234567890" {
		t.Errorf("number lost precision: %#v", call.Args["n"])
	}
}

// FuzzParseRPC checks that the JSON-RPC reader never panics, keeps its
// bounds, and that a tools/call it accepts always yields a name and an
// argument object or a refusal.
func FuzzParseRPC(f *testing.F) {
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"create_issue","arguments":{"title":"x","steps":[{"count":1}]}}}`))
	f.Add([]byte(`[{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"x","arguments":7}},{"jsonrpc":"2.0","method":"n"}]`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":null,"method":"tools/list","params":{"cursor":"c"}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":3,"result":{"tools":[{"name":"a","inputSchema":{"type":"object"}}]}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		msgs, _, err := ParseRPC(body)
		if err != nil {
			return
		}
		if len(msgs) == 0 || len(msgs) > maxBatch {
			t.Fatalf("%d messages", len(msgs))
		}
		for _, m := range msgs {
			if len(IDText(m.ID)) > maxRPCID {
				t.Fatalf("id text of %d bytes", len(IDText(m.ID)))
			}
			if m.Method != MethodToolsCall {
				continue
			}
			call, ref := ParseToolCall(m.Params)
			if ref == nil && (call.Name == "" || call.Args == nil) {
				t.Fatalf("accepted call without name or arguments: %q", m.Params)
			}
			if ref != nil && ref.Detail == "" {
				t.Fatal("refusal without detail")
			}
		}
		_ = DecodeMessages(body)
	})
}
