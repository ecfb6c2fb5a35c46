package mcpcall

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
	segjson "github.com/segmentio/encoding/json"
	"github.com/toolgate/toolgate/proxy/internal/steps"
	"github.com/toolgate/toolgate/proxy/mcp"
)

// readerVariants are JSON-RPC request bodies that some mainstream server
// reads differently from toolgate, each refused by toolgate's reading
// (mcp.ParseRPC after CheckJSONNames, as handleMCP runs them). They seed
// FuzzRPCReaders and are the single-message rows of the adversarial
// group TestMCPReaders.
var readerVariants = []struct {
	name, body, why string
}{
	{"Method", `{"jsonrpc":"2.0","id":1,"Method":"tools/call","params":{"name":"note","arguments":{"text":"x"}}}`, `"Method"`},
	{"METHOD", `{"jsonrpc":"2.0","id":1,"METHOD":"tools/call","params":{"name":"note"}}`, `"METHOD"`},
	{"method and Method", `{"jsonrpc":"2.0","id":1,"method":"ping","Method":"tools/call","params":{"name":"note"}}`, "more than once"},
	{"Params", `{"jsonrpc":"2.0","id":1,"method":"tools/call","Params":{"name":"note"}}`, `"Params"`},
	{"params and Params", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"note"},"Params":{"name":"write"}}`, "more than once"},
	{"paramſ (long s folds to s)", `{"jsonrpc":"2.0","id":1,"method":"tools/call","paramſ":{"name":"note"}}`, `"paramſ"`},
	{"ID", `{"jsonrpc":"2.0","ID":1,"method":"tools/call","params":{"name":"note"}}`, `"ID"`},
	{"JSONRPC", `{"JSONRPC":"2.0","jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"note"}}`, "more than once"},
	{"Jsonrpc alone", `{"Jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"note"}}`, `jsonrpc is not`},
	{"escaped Method", `{"jsonrpc":"2.0","id":1,"\u004dethod":"tools/call","params":{"name":"note"}}`, `"Method"`},
	{"escaped method twice", `{"jsonrpc":"2.0","id":1,"method":"ping","\u006dethod":"tools/call","params":{"name":"note"}}`, "more than once"},
	{"Name", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"Name":"note","arguments":{}}}`, `"Name"`},
	{"name and Name", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"note","Name":"write"}}`, "more than once"},
	{"Arguments", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"note","Arguments":{"text":"far too long for the schema"}}}`, `"Arguments"`},
	{"arguments and Arguments", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"note","arguments":{},"Arguments":{"text":"far too long"}}}`, "more than once"},
	{"ARGUMENTſ", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"note","ARGUMENTſ":{"text":"far too long"}}}`, `"ARGUMENTſ"`},
	{"_Meta", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"note","_Meta":{"traceparent":"x"}}}`, `"_Meta"`},
	{"meta (pydantic's field name)", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"note","meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`, `"meta"`},
	{"RequestState", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"note","RequestState":"s"}}`, `"RequestState"`},
	{"request_state (pydantic's field name)", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"note","request_state":"s"}}`, `"request_state"`},
	{"input_responses", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"note","input_responses":{}}}`, `"input_responses"`},
	{"InputResponses", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"note","InputResponses":{}}}`, `"InputResponses"`},
	{"inputResponses' Action", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"note","inputResponses":{"toolgate.approval":{"Action":"accept"}}}}`, `"Action"`},
	{"Task", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"note","Task":{"ttl":1}}}`, `"Task"`},
	{"tasK (Kelvin sign folds to k)", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"note","tas` + "\u212a" + `":{"ttl":1}}}`, "task"},
	{"_meta's Traceparent", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"note","_meta":{"Traceparent":"x"}}}`, `"Traceparent"`},
	{"_meta's protocol version in capitals", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"note","_meta":{"IO.MODELCONTEXTPROTOCOL/PROTOCOLVERSION":"2026-07-28"}}}`, "PROTOCOLVERSION"},
	{"Cursor", `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"Cursor":"c"}}`, `"Cursor"`},
	{"ProtocolVersion", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"ProtocolVersion":"2025-11-25"}}`, `"ProtocolVersion"`},
	{"error's Code", `{"jsonrpc":"2.0","id":1,"error":{"Code":1,"message":"m"}}`, `"Code"`},
	{"Tools/Call", `{"jsonrpc":"2.0","id":1,"method":"Tools/Call","params":{"name":"note"}}`, "another letter case"},
	{"duplicate argument", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"note","arguments":{"text":"x","text":"far too long"}}}`, "more than once"},
	{"folded argument pair", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"note","arguments":{"text":"x","Text":"far too long"}}}`, "more than once"},
	{"batch with Method", `[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":2,"Method":"tools/call","params":{"name":"note"}}]`, "message 2 of the batch"},
	{"batch with Arguments", `[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"note","Arguments":{"text":"far too long"}}}]`, `"Arguments"`},
	{"invalid UTF-8 in a name", "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"no\xfft\"}}", "UTF-8"},
	{"invalid UTF-8 in an argument name", "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"note\",\"arguments\":{\"te\xc0xt\":\"x\"}}}", "UTF-8"},
	{"lone high surrogate", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"note","arguments":{"text":"\ud800"}}}`, "surrogate"},
	{"lone low surrogate in a name", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"note","arguments":{"\udc00text":"x"}}}`, "surrogate"},
	{"byte-order mark", "\xef\xbb\xbf" + `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"note"}}`, "not an object"},
	{"no-break space before", "\u00a0" + `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"note"}}`, "not an object"},
	{"NEL after", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"note"}}` + "\u0085", "invalid character"},
	{"second message after", `{"jsonrpc":"2.0","id":1,"method":"ping"}{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"note","arguments":{"text":"far too long"}}}`, "invalid character"},
	{"id 1.0", `{"jsonrpc":"2.0","id":1.0,"method":"tools/call","params":{"name":"note"}}`, "id 1.0"},
	{"id 1e0", `{"jsonrpc":"2.0","id":1e0,"method":"tools/call","params":{"name":"note"}}`, "id 1e0"},
	{"id past 2^53", `{"jsonrpc":"2.0","id":9007199254740993,"method":"tools/call","params":{"name":"note"}}`, "id 9007199254740993"},
	{"id -0", `{"jsonrpc":"2.0","id":-0,"method":"tools/call","params":{"name":"note"}}`, "id -0"},
}

// readerControls are requests every reader reads as toolgate does: they
// must pass toolgate's reading.
var readerControls = []string{
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"note","arguments":{"text":"x"}}}`,
	`{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"note","arguments":{"text":"x"},"_meta":{"progressToken":1,"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`,
	`{"jsonrpc":"2.0","id":1,"\u006dethod":"tools/call","params":{"name":"n\u006fte","arguments":{"te\u0078t":"x"}}}`,
	`{"jsonrpc":"2.0","id":-7,"method":"tools/call","params":{"name":"note","arguments":null}}`,
	`{"jsonrpc":"2.0","id":9007199254740991,"method":"tools/call","params":{"name":"note","arguments":{"text":"\ud83d\ude00 \\ud800"}}}`,
	`{"jsonrpc":"2.0","id":null,"method":"tools/call","params":{"name":"note","requestState":"s","inputResponses":{"who":{"action":"accept","content":{"Name":"x"}}}}}`,
	`{"jsonrpc":"2.0","method":"notifications/initialized","params":{"Anything":1}}`,
	`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`,
	"\r\n\t " + `[{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"cursor":"c"}},{"jsonrpc":"2.0","id":2,"result":{}}]` + " \n",
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"Note","arguments":{"Text":"x"}}}`,
}

// readRequest is toolgate's reading of a request body, as handleMCP runs
// it: the duplicate-name check, then mcp.ParseRPC.
func readRequest(body []byte) ([]mcp.Message, error) {
	if ref := steps.CheckJSONNames("MCP server s", body, 64); ref != nil {
		return nil, errMore(ref.Detail)
	}
	msgs, _, err := mcp.ParseRPC(body)
	return msgs, err
}

type errMore string

func (e errMore) Error() string { return string(e) }

func TestRPCReading(t *testing.T) {
	for _, v := range readerVariants {
		_, err := readRequest([]byte(v.body))
		if err == nil {
			t.Errorf("%s: read, want it refused", v.name)
			continue
		}
		if !strings.Contains(err.Error(), v.why) {
			t.Errorf("%s: refused with %q, want it to say %q", v.name, err, v.why)
		}
	}
	for _, body := range readerControls {
		if _, err := readRequest([]byte(body)); err != nil {
			t.Errorf("%s: %v", body, err)
		}
	}
}

// taggedMessage is a JSON-RPC message as a hand-written Go server decodes
// it with encoding/json: tagged structs, names matched up to case.
type taggedMessage struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params"`
}

// taggedCall is a tools/call's params as that server decodes them.
type taggedCall struct {
	Name           string          `json:"name"`
	Arguments      json.RawMessage `json:"arguments"`
	Meta           map[string]any  `json:"_meta"`
	RequestState   string          `json:"requestState"`
	InputResponses json.RawMessage `json:"inputResponses"`
}

// argsOf decodes arguments as a server would hand them to the tool,
// numbers kept exact; absent and null are no arguments. ok is false when
// they are not an object: no server runs the tool then.
func argsOf(raw json.RawMessage) (args map[string]any, ok bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return map[string]any{}, true
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if dec.Decode(&args) != nil || args == nil {
		return nil, false
	}
	return args, true
}

// sameReading fails t when a message toolgate read (m, from raw) is read
// otherwise by a hand-written encoding/json server or by the Go SDK's
// reader (jsonrpc.DecodeMessage, then the tools/call params decoded
// case-sensitively as the SDK does). A reader that refuses the message
// runs nothing, and agrees.
func sameReading(t *testing.T, raw []byte, m *mcp.Message) {
	t.Helper()
	var tc mcp.ToolCall
	var ref *mcp.Problem
	if m.Method == mcp.MethodToolsCall {
		tc, ref = mcp.ParseToolCall(m.Params)
	}
	check := func(reader, method, name string, rawArgs json.RawMessage) {
		t.Helper()
		if method != m.Method {
			t.Fatalf("%s reads method %q, toolgate %q: %q", reader, method, m.Method, raw)
		}
		if method != mcp.MethodToolsCall || ref != nil {
			return
		}
		args, ok := argsOf(rawArgs)
		if !ok {
			return
		}
		if name != tc.Name || !reflect.DeepEqual(args, tc.Args) {
			t.Fatalf("%s runs %q %v, toolgate checked %q %v: %q", reader, name, args, tc.Name, tc.Args, raw)
		}
	}

	var tm taggedMessage
	if json.Unmarshal(raw, &tm) == nil {
		if !bytes.Equal(tm.ID, m.ID) {
			t.Fatalf("encoding/json reads id %s, toolgate %s: %q", tm.ID, m.ID, raw)
		}
		var p taggedCall
		if tm.Method != mcp.MethodToolsCall || json.Unmarshal(tm.Params, &p) == nil {
			check("encoding/json", tm.Method, p.Name, p.Arguments)
		}
	}

	if msg, err := jsonrpc.DecodeMessage(raw); err == nil {
		req, isReq := msg.(*jsonrpc.Request)
		method := ""
		if isReq {
			method = req.Method
		}
		var p mcpsdk.CallToolParamsRaw
		if method != mcp.MethodToolsCall {
			check("the Go SDK", method, "", nil)
		} else if sdkUnmarshal(req.Params, &p) == nil {
			check("the Go SDK", method, p.Name, p.Arguments)
		}
	}
}

// sdkUnmarshal decodes as the Go SDK's internal/json does: segmentio's
// decoder with case-insensitive matching off.
func sdkUnmarshal(data []byte, v any) error {
	dec := segjson.NewDecoder(bytes.NewReader(data))
	dec.DontMatchCaseInsensitiveStructFields()
	return dec.Decode(v)
}

// FuzzRPCReaders is the reader differential: any request toolgate reads
// (CheckJSONNames, mcp.ParseRPC, mcp.ParseToolCall) is read the same way by a
// hand-written encoding/json server and by the Go SDK: the same method and
// id, and for a tools/call the same tool name and arguments. A message
// they could read differently must be refused. The seeds are every
// variant of readerVariants and readerControls.
func FuzzRPCReaders(f *testing.F) {
	for _, v := range readerVariants {
		f.Add([]byte(v.body))
	}
	for _, c := range readerControls {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		msgs, err := readRequest(body)
		if err != nil {
			return
		}
		raws := []json.RawMessage{mcp.TrimJSONSpace(body)}
		if raws[0][0] == '[' {
			raws = nil
			if err := json.Unmarshal(body, &raws); err != nil || len(raws) != len(msgs) {
				t.Fatalf("toolgate read a batch encoding/json does not: %v", err)
			}
		}
		for i := range msgs {
			sameReading(t, raws[i], &msgs[i])
		}
	})
}
