package proxy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"
)

// sseEvents feeds a stream to a reader in chunks of size n and returns the
// events' data.
func sseEvents(stream string, n, max int) ([]string, int) {
	var got []string
	r := newSSEReader(max, func(d []byte) { got = append(got, string(d)) })
	for b := []byte(stream); len(b) > 0; {
		k := min(n, len(b))
		r.feed(b[:k])
		b = b[k:]
	}
	return got, r.skipped
}

func TestSSEReader(t *testing.T) {
	for _, tc := range []struct {
		name    string
		stream  string
		max     int
		want    []string
		skipped int
	}{
		{"one event", "event: message\ndata: {\"a\":1}\n\n", 100, []string{`{"a":1}`}, 0},
		{"CRLF and CR line ends", "data: a\r\n\r\ndata: b\r\rdata: c\n\n", 100, []string{"a", "b", "c"}, 0},
		{"multi-line data joined", "data: a\ndata: b\ndata:c\n\n", 100, []string{"a\nb\nc"}, 0},
		{"comments, ids and retry ignored", ": ping\nid: 7\nretry: 100\ndata: x\n\n", 100, []string{"x"}, 0},
		{"no data, no event", "event: message\nid: 1\n\n", 100, nil, 0},
		{"unterminated event dropped", "data: x\n", 100, nil, 0},
		{"too large event skipped, next read", "data: " + strings.Repeat("x", 50) + "\n\ndata: y\n\n", 20, []string{"y"}, 1},
		{"too large over data lines", "data: 0123456789\ndata: 0123456789\ndata: 0123456789\n\ndata: ok\n\n", 25, []string{"ok"}, 1},
		{"field without colon", "data\n\n", 100, nil, 0},
	} {
		for _, n := range []int{1, 2, 3, 7, 1 << 20} {
			got, skipped := sseEvents(tc.stream, n, tc.max)
			if !reflect.DeepEqual(got, tc.want) || skipped != tc.skipped {
				t.Errorf("%s (chunks of %d): %q skipped %d, want %q skipped %d", tc.name, n, got, skipped, tc.want, tc.skipped)
			}
		}
	}
}

// FuzzSSEReader checks that the reader never panics, never hands on more
// than its bound, and reads the same events whatever the chunking.
func FuzzSSEReader(f *testing.F) {
	f.Add([]byte("event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n"), uint8(3))
	f.Add([]byte("data: a\r\n\r\ndata: b\r\r: c\ndata\n\n"), uint8(1))
	f.Add([]byte("data: "+strings.Repeat("z", 300)+"\n\ndata: y\n\n"), uint8(5))
	f.Fuzz(func(t *testing.T, stream []byte, chunk uint8) {
		n := int(chunk)%64 + 1
		const max = 256
		whole, _ := sseEvents(string(stream), len(stream)+1, max)
		parts, _ := sseEvents(string(stream), n, max)
		if !reflect.DeepEqual(whole, parts) {
			t.Fatalf("chunks of %d read %q, whole read %q", n, parts, whole)
		}
		for _, e := range whole {
			if len(e) > max {
				t.Fatalf("event of %d bytes past the bound", len(e))
			}
		}
	})
}

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
		msgs, batch, err := parseRPC([]byte(tc.body))
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
		call, ref := parseToolCall(json.RawMessage(tc.params))
		reason := ""
		if ref != nil {
			reason = ref.reason
		}
		if call.name != tc.name || reason != tc.reason {
			t.Errorf("%s: name %q reason %q, want %q %q", tc.params, call.name, reason, tc.name, tc.reason)
		}
		if ref == nil && call.args == nil {
			t.Errorf("%s: nil arguments", tc.params)
		}
	}
	call, _ := parseToolCall(json.RawMessage(`{"name":"a","arguments":{"n":12345678901234567890}}`))
	if n, ok := call.args["n"].(json.Number); !ok || n.String() != "12345678901234567890" {
		t.Errorf("number lost precision: %#v", call.args["n"])
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
		msgs, _, err := parseRPC(body)
		if err != nil {
			return
		}
		if len(msgs) == 0 || len(msgs) > maxBatch {
			t.Fatalf("%d messages", len(msgs))
		}
		for _, m := range msgs {
			if len(idText(m.ID)) > maxRPCID {
				t.Fatalf("id text of %d bytes", len(idText(m.ID)))
			}
			if m.Method != methodToolsCall {
				continue
			}
			call, ref := parseToolCall(m.Params)
			if ref == nil && (call.name == "" || call.args == nil) {
				t.Fatalf("accepted call without name or arguments: %q", m.Params)
			}
			if ref != nil && ref.detail == "" {
				t.Fatal("refusal without detail")
			}
		}
		_ = decodeMessages(body)
	})
}

func TestLearnedSchemasBounded(t *testing.T) {
	var m mcpSchemas
	s := m.server("http://a/mcp")
	tools := make([]listedTool, 0, 12)
	for i := range 12 {
		tools = append(tools, listedTool{Name: fmt.Sprintf("t%02d", i), InputSchema: json.RawMessage(`{"type":"object","properties":{"a":{"type":"string"}}}`)})
	}
	tools = append(tools, listedTool{Name: "big", InputSchema: json.RawMessage(`{"type":"object","description":"` + strings.Repeat("d", 200) + `"}`)})
	s.learn(tools, true, 10, 100, nil)
	if s.size() != 10 {
		t.Errorf("kept %d tools, want the bound of 10", s.size())
	}
	if s.isListed() || !s.isCut() {
		t.Error("a list cut at the bound counts as complete: a dropped tool would be refused as unknown")
	}
	s.learn(tools[:1], true, 10, 100, nil)
	if got := s.names(); !reflect.DeepEqual(got, []string{"t00"}) || !s.isListed() {
		t.Errorf("a complete list keeps %v (listed %v), want [t00]", got, s.isListed())
	}
	s.learn([]listedTool{{Name: "big", InputSchema: tools[12].InputSchema}}, false, 10, 100, nil)
	if sch, known, why := s.lookup("big", true); !known || sch != nil || why != errSchemaTooLarge {
		t.Errorf("a schema past the bound: %v %v %v", sch, known, why)
	}
	sch, known, why := s.lookup("t00", true)
	if !known || sch == nil || why != nil {
		t.Fatalf("t00: %v %v %v", sch, known, why)
	}
	if vs := sch.Validate(map[string]any{"b": "x"}); len(vs) != 1 || vs[0].Path != "/b" {
		t.Errorf("learned schema not closed strictly: %+v", vs)
	}
	if again, _, _ := s.lookup("t00", true); again != sch {
		t.Error("an unchanged schema was compiled again")
	}
	// A different schema under the same name replaces the compiled one.
	s.learn([]listedTool{{Name: "t00", InputSchema: json.RawMessage(`{"type":"object","properties":{"b":{"type":"string"}}}`)}}, false, 10, 100, nil)
	if sch2, _, _ := s.lookup("t00", true); sch2 == sch || len(sch2.Validate(map[string]any{"b": "x"})) != 0 {
		t.Error("a changed schema was not refreshed")
	}
	for i := range maxMCPServers + 5 {
		m.server(fmt.Sprintf("http://s%d/mcp", i))
	}
	if len(m.servers) != maxMCPServers {
		t.Errorf("%d servers remembered, want the bound of %d", len(m.servers), maxMCPServers)
	}
	if !bytes.Equal(withoutProgressToken(json.RawMessage(`{"progressToken":1,"x":2}`)), []byte(`{"x":2}`)) {
		t.Error("progressToken kept")
	}
}

// TestLearnedSchemasHammer runs lookups, relearning with changing schemas
// and forgetting from many goroutines at once (run with -race): every
// lookup sees a whole schema, old or new, never a torn one.
func TestLearnedSchemasHammer(t *testing.T) {
	var m mcpSchemas
	schemas := []json.RawMessage{
		json.RawMessage(`{"type":"object","properties":{"a":{"type":"string"}}}`),
		json.RawMessage(`{"type":"object","properties":{"b":{"type":"string"}}}`),
	}
	const workers, rounds = 8, 200
	done := make(chan struct{})
	for w := range workers {
		go func() {
			defer func() { done <- struct{}{} }()
			for i := range rounds {
				s := m.server(fmt.Sprintf("http://s%d/mcp", i%3))
				switch (w + i) % 4 {
				case 0:
					s.learn([]listedTool{{Name: "t", InputSchema: schemas[i%2]}}, true, 10, 1<<10, nil)
				case 1:
					m.forget(fmt.Sprintf("http://s%d/mcp", i%3))
				default:
					sch, known, why := s.lookup("t", i%2 == 0)
					if why != nil {
						t.Errorf("lookup: %v", why)
						return
					}
					if known && sch == nil {
						t.Error("a known tool without a schema")
						return
					}
					if sch != nil {
						// Strict, exactly one of a and b is accepted.
						va, vb := len(sch.Validate(map[string]any{"a": "x"})), len(sch.Validate(map[string]any{"b": "x"}))
						strict := i%2 == 0
						if sch.Validate(map[string]any{}) != nil || (strict && (va == 0) == (vb == 0)) {
							t.Errorf("torn schema: a %d, b %d", va, vb)
							return
						}
					}
					_ = s.names()
					_ = s.isListed()
				}
			}
		}()
	}
	for range workers {
		<-done
	}
}

// TestHeaderMismatch covers the 2026-07-28 header/body rules: each header
// present once and equal to the body, Mcp-Name base64-decoded from its
// sentinel, and nothing asked of methods that carry no name.
func TestHeaderMismatch(t *testing.T) {
	body := func(method, params string) *rpcMessage {
		return &rpcMessage{JSONRPC: "2.0", ID: json.RawMessage("1"), Method: method, Params: json.RawMessage(params)}
	}
	const meta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}`
	for _, tc := range []struct {
		name    string
		headers map[string]string
		msg     *rpcMessage
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
			why := headerMismatch(r, tc.msg, readEnvelope(tc.msg))
			if (why == "") != tc.ok {
				t.Errorf("headerMismatch = %q, want ok=%v", why, tc.ok)
			}
		})
	}
}

// FuzzMCPEnvelope feeds request bodies and header values from outside to
// the 2026-07-28 readers: they never panic, and a name that matches its
// own plain header always agrees.
func FuzzMCPEnvelope(f *testing.F) {
	f.Add(`{"name":"get_weather","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","traceparent":"00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01"}}`, "=?base64?SGVsbG8=?=")
	f.Add(`{"uri":"file:///x","_meta":{"io.modelcontextprotocol/protocolVersion":7}}`, "plain")
	f.Add(`[]`, "=?base64??=")
	f.Fuzz(func(t *testing.T, params, header string) {
		for _, method := range []string{"tools/call", "resources/read", "tools/list"} {
			msg := &rpcMessage{JSONRPC: "2.0", ID: json.RawMessage("1"), Method: method, Params: json.RawMessage(params)}
			env := readEnvelope(msg)
			r, _ := http.NewRequest(http.MethodPost, "http://127.0.0.1/mcp", nil)
			r.Header["Mcp-Protocol-Version"] = []string{env.version}
			r.Header["Mcp-Method"] = []string{method}
			r.Header["Mcp-Name"] = []string{header}
			why := headerMismatch(r, msg, env)
			if v, ok := decodeHeaderValue(header); ok && env.hasName && v == env.name && env.version == boundedText(env.version) && why != "" && isASCIIHeader(env.version) {
				t.Errorf("name %q from header %q agrees, yet: %s", v, header, why)
			}
			_, _ = traceIDOf(env.traceparent)
			_ = protocolOf(r, msg, env)
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

// TestLearnedListFreshnessAndScope covers the 2026-07-28 caching hints: a
// list with ttlMs goes stale after it (at least minListTTL, so a ttlMs of 0
// does not cost a tools/list per call), one without stays fresh; a private
// list is found only by its authorization context; a list change forgets
// every context's list.
func TestLearnedListFreshnessAndScope(t *testing.T) {
	var m mcpSchemas
	tools := []listedTool{{Name: "t", InputSchema: json.RawMessage(`{"type":"object"}`)}}
	zero := int64(0)
	pub := m.server("k")
	pub.learn(tools, true, 10, 1<<10, &zero)
	if pub.stale() {
		t.Fatal("a list with ttlMs 0 is stale at once; want it used for minListTTL")
	}
	old := m.server("old")
	old.learn(tools, true, 10, 1<<10, nil)
	time.Sleep(minListTTL + 100*time.Millisecond)
	if !pub.stale() {
		t.Error("a list with ttlMs 0 is still fresh after minListTTL")
	}
	if old.stale() {
		t.Error("a list without ttlMs went stale; it should last until it changes")
	}
	priv := m.server("k|auth:abc")
	priv.learn([]listedTool{{Name: "mine", InputSchema: json.RawMessage(`{"type":"object"}`)}}, true, 10, 1<<10, nil)
	if got := m.resolve("k", "k|auth:abc"); got != priv {
		t.Error("the caller's private list was not found")
	}
	if got := m.resolve("k", "k|auth:def"); got != pub {
		t.Error("another caller got a private list")
	}
	m.forget("k")
	if got := m.resolve("k", "k|auth:abc"); got == priv || got == pub || got.size() != 0 {
		t.Error("a list change did not forget every context's list")
	}
}
