package adversarial_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/internal/testutil"
	"github.com/toolgate/toolgate/policies"
	"github.com/toolgate/toolgate/sink"
)

// The MCP readers group: one JSON-RPC message, read by toolgate and by
// three real MCP servers behind it (the official Go SDK, the official
// TypeScript SDK v2 under node, and a hand-written Go server decoding with
// encoding/json into tagged structs, which matches member names up to case
// and reads a body on any HTTP method). Each server records the tool name
// and arguments its handler executed. The differential: everything a
// server executed is a call toolgate inspected as that tool and whose
// arguments pass toolgate's schema for it; otherwise toolgate refused the
// message and no server executed anything.

// readersNoteSchema is toolgate's schema for the servers' one tool, note:
// text of at most 8 characters. The servers' own schema is open, so a
// call toolgate did not check runs with whatever it carries.
const readersNoteSchema = `{"type":"object","properties":{"text":{"type":"string","maxLength":8}}}`

// readersConfig puts one MCP route in front of every server, each behind
// its own reverse listener; a call toolgate cannot check is refused. note
// has toolgate's default strict schema, open_note the same schema left
// open (strict: false): other arguments pass.
func readersConfig(origins []string) string {
	var b strings.Builder
	b.WriteString("listen:\n  reverse:\n")
	for _, o := range origins {
		fmt.Fprintf(&b, "    - {listen: \"127.0.0.1:0\", upstream: %q}\n", o)
	}
	b.WriteString("max_body_bytes: 65536\ntools:\n  - name: readers_mcp\n    protocol: mcp\n    match: {host: 127.0.0.1, path: /mcp}\n")
	b.WriteString("    mcp:\n      unchecked: refuse\n      tools:\n        note:\n          schema: " + readersNoteSchema + "\n")
	b.WriteString("        open_note:\n          strict: false\n          schema: " + readersNoteSchema + "\n")
	return b.String()
}

// readersTools are the servers' tools: both keep a note.
var readersTools = []string{"note", "open_note"}

// execution is one tool call a server's handler ran.
type execution struct {
	Name string         `json:"name"`
	Args map[string]any `json:"args"`
}

// readerServer is a real MCP server that records what its handler ran.
type readerServer struct {
	name   string
	origin string
	take   func() ([]execution, error)
}

// executions collects a Go server's executions.
type executions struct {
	mu  sync.Mutex
	got []execution
}

func (e *executions) add(name string, raw json.RawMessage) {
	args := map[string]any{}
	if raw = bytes.TrimSpace(raw); len(raw) > 0 && string(raw) != "null" {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		if dec.Decode(&args) != nil || args == nil {
			args = map[string]any{"(not an object)": string(raw)}
		}
	}
	e.mu.Lock()
	e.got = append(e.got, execution{Name: name, Args: args})
	e.mu.Unlock()
}

func (e *executions) take() ([]execution, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	got := e.got
	e.got = nil
	return got, nil
}

// startGoSDKReader is the official Go SDK's streamable HTTP server,
// stateless, with note.
func startGoSDKReader(t *testing.T) readerServer {
	ex := &executions{}
	s := mcp.NewServer(&mcp.Implementation{Name: "readers-go", Version: "1.0.0"}, nil)
	for _, name := range readersTools {
		s.AddTool(&mcp.Tool{Name: name, InputSchema: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}}}`)},
			func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				ex.add(req.Params.Name, req.Params.Arguments)
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "noted"}}}, nil
			})
	}
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{Stateless: true}))
	t.Cleanup(srv.Close)
	return readerServer{name: "go-sdk", origin: srv.URL, take: ex.take}
}

// taggedRequest is a JSON-RPC request as a hand-written server declares
// it, for encoding/json.
type taggedRequest struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  string          `json:"method"`
	Params  struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	} `json:"params"`
}

// startTaggedReader is a hand-written MCP server of the kind many teams
// run: whatever the HTTP method, it decodes the body (one message or a
// batch) with a json.Decoder into tagged structs and runs each tools/call,
// whose tool decodes its arguments into its own tagged struct.
func startTaggedReader(t *testing.T) readerServer {
	ex := &executions{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		br := bufio.NewReader(r.Body)
		var reqs []taggedRequest
		if b, _ := br.Peek(1); len(b) == 1 && b[0] == '[' {
			_ = json.NewDecoder(br).Decode(&reqs)
		} else {
			var one taggedRequest
			if json.NewDecoder(br).Decode(&one) == nil {
				reqs = append(reqs, one)
			}
		}
		var out []string
		for _, q := range reqs {
			if q.Method != "tools/call" || (q.Params.Name != "note" && q.Params.Name != "open_note") {
				continue
			}
			// The tool reads its arguments as a Go tool does: into its
			// own tagged struct.
			var in struct {
				Text *string `json:"text"`
			}
			args := json.RawMessage(`{"(not an object)":null}`)
			if len(q.Params.Arguments) == 0 || json.Unmarshal(q.Params.Arguments, &in) == nil {
				args = json.RawMessage(`{}`)
				if in.Text != nil {
					args, _ = json.Marshal(map[string]string{"text": *in.Text})
				}
			}
			ex.add(q.Params.Name, args)
			out = append(out, fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"noted"}]}}`, orNull(q.ID)))
		}
		w.Header().Set("Content-Type", "application/json")
		switch len(out) {
		case 0:
			w.WriteHeader(http.StatusAccepted)
		case 1:
			io.WriteString(w, out[0])
		default:
			io.WriteString(w, "["+strings.Join(out, ",")+"]")
		}
	}))
	t.Cleanup(srv.Close)
	return readerServer{name: "encoding/json", origin: srv.URL, take: ex.take}
}

func orNull(id json.RawMessage) string {
	if len(id) == 0 {
		return "null"
	}
	return string(id)
}

// startTSReader is proxy/testdata/mcpts/readers.mjs under node: the
// official TypeScript SDK v2's handler, with note. ok is false (and the
// reason logged) when node or the SDK is not installed.
func startTSReader(t *testing.T) (readerServer, bool) {
	dir, err := filepath.Abs(filepath.Join("..", "testdata", "mcpts"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := exec.LookPath("node"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("node is not installed, and CI is set: every test dependency must be installed (scripts/testdeps.sh)")
		}
		t.Log("the TypeScript SDK server is left out: node is not installed (Node 20 or later; scripts/testdeps.sh installs the SDK)")
		return readerServer{}, false
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@modelcontextprotocol", "server", "package.json")); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("@modelcontextprotocol/server is not installed in %s, and CI is set: every test dependency must be installed (scripts/testdeps.sh)", dir)
		}
		t.Logf("the TypeScript SDK server is left out: @modelcontextprotocol/server is not installed in %s; run `bash scripts/testdeps.sh`", dir)
		return readerServer{}, false
	}
	origin := testutil.StartNodeServer(t, dir, "readers.mjs")
	take := func() ([]execution, error) {
		resp, err := http.Get(origin + "/control/executed")
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		var got []execution
		dec := json.NewDecoder(resp.Body)
		dec.UseNumber()
		return got, dec.Decode(&got)
	}
	return readerServer{name: "typescript-sdk", origin: origin, take: take}, true
}

// readersAttack is one HTTP request carrying JSON-RPC to an MCP route.
// Unless it is a control, the call toolgate could see is valid while the
// one a differing reader sees is not (text past 8 characters).
type readersAttack struct {
	name    string
	method  string // POST unless set
	body    string
	chunked bool // sent without a declared length
	control bool // every reader reads it as toolgate does: it must run
	// refusedBy names a server whose own checks refuse the control (the
	// TypeScript SDK's params schema refuses null arguments).
	refusedBy string
}

// wantReason is the reason toolgate refuses a with: a name given twice
// (or two folding together) is a duplicate argument, an argument in
// another case than the schema's an unknown one, arguments toolgate reads
// and its schema refuses a schema refusal, anything else a message toolgate
// does not read.
func (a readersAttack) wantReason() string {
	switch {
	case strings.Contains(a.name, "twice") || strings.Contains(a.name, " and ") || strings.Contains(a.name, "duplicate") || strings.HasPrefix(a.name, "method ping"):
		return "duplicate_argument"
	case a.name == "argument Text" || strings.HasPrefix(a.name, "open schema:"):
		return "unknown_field"
	case a.name == "schema refuses" || a.name == "lower-case post" || a.name == "id null":
		// post is POST in toolgate's canonical form, and is sent as POST.
		return "schema"
	}
	return "malformed_body"
}

// Message parts the attacks are built from.
const (
	rpcHead  = `{"jsonrpc":"2.0","id":1,`
	goodArgs = `{"text":"ok"}`
	badArgs  = `{"text":"far too long for a note"}`
	goodCall = rpcHead + `"method":"tools/call","params":{"name":"note","arguments":` + goodArgs + `}}`
	badCall  = rpcHead + `"method":"tools/call","params":{"name":"note","arguments":` + badArgs + `}}`
)

var readersAttacks = []readersAttack{
	{name: "control", body: goodCall, control: true},
	{name: "control with escaped names", body: rpcHead + `"\u006dethod":"tools/call","params":{"n\u0061me":"note","\u0061rguments":{"te\u0078t":"ok"}}}`, control: true},
	{name: "control batch", body: "[" + goodCall + "]", control: true},
	{name: "control with an open schema", body: rpcHead + `"method":"tools/call","params":{"name":"open_note","arguments":{"text":"ok","other":"anything"}}}`, control: true},
	{name: "control with null arguments", body: rpcHead + `"method":"tools/call","params":{"name":"note","arguments":null}}`, control: true, refusedBy: "typescript-sdk"},
	{name: "schema refuses", body: badCall},

	// Members spelt in another letter case.
	{name: "Method", body: `{"jsonrpc":"2.0","id":1,"Method":"tools/call","params":{"name":"note","arguments":` + badArgs + `}}`},
	{name: "METHOD", body: `{"jsonrpc":"2.0","id":1,"METHOD":"tools/call","params":{"name":"note","arguments":` + badArgs + `}}`},
	{name: "method ping, Method tools/call", body: rpcHead + `"method":"ping","Method":"tools/call","params":{"name":"note","arguments":` + badArgs + `}}`},
	{name: "escaped Method", body: rpcHead + `"\u004dethod":"tools/call","params":{"name":"note","arguments":` + badArgs + `}}`},
	{name: "escaped method twice", body: rpcHead + `"method":"ping","\u006dethod":"tools/call","params":{"name":"note","arguments":` + badArgs + `}}`},
	{name: "Params", body: rpcHead + `"method":"tools/call","Params":{"name":"note","arguments":` + badArgs + `}}`},
	{name: "params and Params", body: rpcHead + `"method":"tools/call","params":{"name":"note","arguments":` + goodArgs + `},"Params":{"name":"note","arguments":` + badArgs + `}}`},
	{name: "paramſ (long s)", body: rpcHead + `"method":"tools/call","paramſ":{"name":"note","arguments":` + badArgs + `}}`},
	{name: "Name", body: rpcHead + `"method":"tools/call","params":{"Name":"note","arguments":` + badArgs + `}}`},
	{name: "Arguments", body: rpcHead + `"method":"tools/call","params":{"name":"note","Arguments":` + badArgs + `}}`},
	{name: "arguments and Arguments", body: rpcHead + `"method":"tools/call","params":{"name":"note","arguments":` + goodArgs + `,"Arguments":` + badArgs + `}}`},
	{name: "ARGUMENTS", body: rpcHead + `"method":"tools/call","params":{"name":"note","ARGUMENTS":` + badArgs + `}}`},
	{name: "argumentſ", body: rpcHead + `"method":"tools/call","params":{"name":"note","argumentſ":` + badArgs + `}}`},
	{name: "ID", body: `{"jsonrpc":"2.0","ID":1,"method":"tools/call","params":{"name":"note","arguments":` + badArgs + `}}`},
	{name: "JSONRPC", body: `{"JSONRPC":"2.0","id":1,"method":"tools/call","params":{"name":"note","arguments":` + badArgs + `}}`},
	{name: "_Meta, meta", body: rpcHead + `"method":"tools/call","params":{"name":"note","arguments":` + goodArgs + `,"_Meta":{},"meta":{}}}`},
	{name: "RequestState", body: rpcHead + `"method":"tools/call","params":{"name":"note","arguments":` + goodArgs + `,"RequestState":"s"}}`},
	{name: "request_state", body: rpcHead + `"method":"tools/call","params":{"name":"note","arguments":` + goodArgs + `,"request_state":"s"}}`},
	{name: "InputResponses", body: rpcHead + `"method":"tools/call","params":{"name":"note","arguments":` + goodArgs + `,"InputResponses":{}}}`},
	{name: "Task", body: rpcHead + `"method":"tools/call","params":{"name":"note","arguments":` + goodArgs + `,"Task":{"ttl":1}}}`},
	{name: "Tools/Call", body: rpcHead + `"method":"Tools/Call","params":{"name":"note","arguments":` + badArgs + `}}`},
	{name: "argument Text", body: rpcHead + `"method":"tools/call","params":{"name":"note","arguments":{"Text":"far too long for a note"}}}`},
	{name: "open schema: argument Text", body: rpcHead + `"method":"tools/call","params":{"name":"open_note","arguments":{"Text":"far too long for a note"}}}`},
	{name: "open schema: argument TEXT", body: rpcHead + `"method":"tools/call","params":{"name":"open_note","arguments":{"TEXT":"far too long for a note"}}}`},
	{name: "open schema: argument teXt, escaped", body: rpcHead + `"method":"tools/call","params":{"name":"open_note","arguments":{"te\u0058t":"far too long for a note"}}}`},
	{name: "argument text and Text", body: rpcHead + `"method":"tools/call","params":{"name":"note","arguments":{"text":"ok","Text":"far too long for a note"}}}`},

	// Duplicates.
	{name: "arguments twice", body: rpcHead + `"method":"tools/call","params":{"name":"note","arguments":` + goodArgs + `,"arguments":` + badArgs + `}}`},
	{name: "argument text twice", body: rpcHead + `"method":"tools/call","params":{"name":"note","arguments":{"text":"ok","text":"far too long for a note"}}}`},
	{name: "params twice", body: rpcHead + `"method":"tools/call","params":{"name":"note","arguments":` + goodArgs + `},"params":{"name":"note","arguments":` + badArgs + `}}`},

	// Batches.
	{name: "batch with Method", body: "[" + goodCall + `,{"jsonrpc":"2.0","id":2,"Method":"tools/call","params":{"name":"note","arguments":` + badArgs + `}}]`},
	{name: "batch with Arguments", body: `[{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"note","Arguments":` + badArgs + `}}]`},
	{name: "batch with a duplicate", body: `[{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"note","arguments":` + goodArgs + `,"arguments":` + badArgs + `}}]`},

	// Text.
	{name: "byte-order mark", body: "\xef\xbb\xbf" + badCall},
	{name: "no-break space before", body: "\u00a0" + badCall},
	{name: "second message after", body: `{"jsonrpc":"2.0","id":1,"method":"ping"}` + badCall},
	{name: "garbage after", body: badCall + `x`},
	{name: "invalid UTF-8 in an argument name", body: rpcHead + "\"method\":\"tools/call\",\"params\":{\"name\":\"note\",\"arguments\":{\"te\xffxt\":\"far too long for a note\"}}}"},
	{name: "lone surrogate in an argument name", body: rpcHead + `"method":"tools/call","params":{"name":"note","arguments":{"\ud800text":"far too long for a note"}}}`},
	{name: "id 1.0", body: `{"jsonrpc":"2.0","id":1.0,"method":"tools/call","params":{"name":"note","arguments":` + goodArgs + `}}`},
	{name: "id past 2^53", body: `{"jsonrpc":"2.0","id":9007199254740993,"method":"tools/call","params":{"name":"note","arguments":` + goodArgs + `}}`},

	// Null where a member is expected.
	{name: "method null", body: rpcHead + `"method":null,"params":{"name":"note","arguments":` + badArgs + `}}`},
	{name: "params null", body: rpcHead + `"method":"tools/call","params":null}`},
	{name: "name null", body: rpcHead + `"method":"tools/call","params":{"name":null,"arguments":` + badArgs + `}}`},
	{name: "id null", body: `{"jsonrpc":"2.0","id":null,"method":"tools/call","params":{"name":"note","arguments":` + badArgs + `}}`},

	// A body on another HTTP method.
	{name: "PUT", method: "PUT", body: badCall},
	{name: "PATCH", method: "PATCH", body: badCall},
	{name: "DELETE with a body", method: "DELETE", body: badCall},
	{name: "GET with a body", method: "GET", body: badCall},
	{name: "GET with a chunked body", method: "GET", body: badCall, chunked: true},
	{name: "OPTIONS with a body", method: "OPTIONS", body: badCall},
	{name: "lower-case post", method: "post", body: badCall},
	{name: "PUT chunked", method: "PUT", body: badCall, chunked: true},
}

// TestMCPReaders runs readersAttacks through toolgate to each server and
// fails on any call a server executed that toolgate did not inspect as
// that tool with arguments its schema accepts. Controls must run on every
// server that reads them (the SDKs leave batches out: protocol 2025-06-18
// dropped them). It logs the tally: attacks tried, refused, and reached a
// server unchecked (must be 0).
func TestMCPReaders(t *testing.T) {
	servers := []readerServer{startGoSDKReader(t), startTaggedReader(t)}
	if ts, ok := startTSReader(t); ok {
		servers = append(servers, ts)
	}
	origins := make([]string, len(servers))
	for i, s := range servers {
		origins[i] = s.origin
	}
	g, err := startGate(t, readersConfig(origins))
	if err != nil {
		t.Fatal(err)
	}
	schemas := map[string]*policies.Schema{}
	for _, name := range readersTools {
		sch, err := policies.CompileSchema([]byte(readersNoteSchema), policies.SchemaOptions{Tool: name, Strict: name == "note"})
		if err != nil {
			t.Fatal(err)
		}
		schemas[name] = sch
	}
	tried, refused, unchecked, inert := 0, 0, 0, 0
	for _, a := range readersAttacks {
		t.Run(a.name, func(t *testing.T) {
			for i, s := range servers {
				ev, ran := readersSend(t, g, g.srv.Addr("reverse", i), s, a)
				if !a.control {
					tried++
					if ev.Refused {
						refused++
					} else if len(ran) == 0 {
						inert++ // forwarded, and no server ran a tool
					}
					if want := a.wantReason(); ev.Refused && ev.Reason != want {
						t.Errorf("%s: refused as %s (%s), want %s", s.name, ev.Reason, ev.Detail, want)
					}
				}
				for _, e := range ran {
					var vs []policies.Violation
					if sch := schemas[e.Name]; sch != nil {
						vs = sch.Validate(e.Args)
					}
					if e.Name != ev.Tool || !ev.Inspected || ev.Refused || len(vs) > 0 {
						unchecked++
						t.Errorf("%s executed %s %v; toolgate's event: tool %q inspected %v refused %v (%s)", s.name, e.Name, e.Args, ev.Tool, ev.Inspected, ev.Refused, ev.Detail)
					}
				}
				if ev.Refused && len(ran) > 0 {
					t.Errorf("%s executed %d calls of a message toolgate refused", s.name, len(ran))
				}
				batch := strings.HasPrefix(a.body, "[")
				if a.control && (len(ran) != 1 || ev.Refused) && (!batch || s.name == "encoding/json") && s.name != a.refusedBy {
					t.Errorf("control: %s executed %v, toolgate refused %v (%s)", s.name, ran, ev.Refused, ev.Detail)
				}
			}
		})
	}
	tally := fmt.Sprintf("MCP readers: %d attacks tried (%d messages x %d servers), %d refused by toolgate, %d forwarded with no tool run, %d reached a server unchecked",
		tried, tried/len(servers), len(servers), refused, inert, unchecked)
	t.Log(tally)
	if len(servers) == 3 {
		doc, err := os.ReadFile("../../docs/security.md")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(doc), "\n"+tally+"\n") {
			t.Errorf("docs/security.md should show TestMCPReaders' tally:\n%s", tally)
		}
	}
	if unchecked > 0 {
		t.Errorf("%d calls reached a server unchecked", unchecked)
	}
}

// readersSend sends one attack to toolgate's reverse listener at addr, in
// front of s, and returns toolgate's one event of it and what s executed.
func readersSend(t *testing.T, g *gate, addr string, s readerServer, a readersAttack) (sink.Event, []execution) {
	t.Helper()
	trace, tp := newTrace()
	method := a.method
	if method == "" {
		method = http.MethodPost
	}
	var body io.Reader = strings.NewReader(a.body)
	if a.chunked {
		body = io.MultiReader(body) // no declared length: sent chunked
	}
	req, err := http.NewRequest(method, "http://"+addr+"/mcp", body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	req.Header.Set("Traceparent", tp)
	c := &http.Client{Timeout: 30 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s: %v", s.name, err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	ran, err := s.take()
	if err != nil {
		t.Fatalf("%s: executions: %v", s.name, err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		g.read(t)
		if evs := g.byTrace(trace); len(evs) > 0 {
			// A forwarded call's event is finished just after its answer:
			// wait a little for a second one, which must not come.
			time.Sleep(20 * time.Millisecond)
			g.read(t)
			if evs = g.byTrace(trace); len(evs) != 1 {
				t.Errorf("%s: %d events for one call, want 1", s.name, len(evs))
			}
			return evs[0], ran
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: no event for the call within 10s", s.name)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestMCPReadersDocNamesRealTests checks that every test and row the
// "MCP messages: one reading" table of docs/security.md names exists: a
// test function of this package, proxy (and its internal packages),
// proxy/mcp or policies, or a row
// of readersAttacks.
func TestMCPReadersDocNamesRealTests(t *testing.T) {
	doc, err := os.ReadFile("../../docs/security.md")
	if err != nil {
		t.Fatal(err)
	}
	var src strings.Builder
	for _, pattern := range []string{"*_test.go", "../*_test.go", "../mcp/*_test.go", "../internal/*/*_test.go", "../../policies/*_test.go"} {
		files, _ := filepath.Glob(pattern)
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			src.Write(b)
		}
	}
	rows := map[string]bool{}
	for _, a := range readersAttacks {
		rows[a.name] = true
	}
	_, section, ok := strings.Cut(string(doc), "\n## MCP messages: one reading\n")
	if !ok {
		t.Fatal("docs/security.md has no section \"MCP messages: one reading\"")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	checked := 0
	for _, line := range strings.Split(section, "\n") {
		if !strings.HasPrefix(line, "| ") || strings.HasPrefix(line, "| guarantee") {
			continue
		}
		cols := strings.Split(line, " | ")
		for _, m := range regexp.MustCompile("`([^`]+)`").FindAllStringSubmatch(cols[len(cols)-1], -1) {
			name := m[1]
			checked++
			switch {
			case strings.HasPrefix(name, "Test") || strings.HasPrefix(name, "Fuzz"):
				if !strings.Contains(src.String(), "func "+name+"(") {
					t.Errorf("docs/security.md names %s, which is not a test of proxy, its internal packages, proxy/mcp, proxy/adversarial or policies", name)
				}
			case !rows[name]:
				t.Errorf("docs/security.md names the row %q, which is not one of readersAttacks", name)
			}
		}
	}
	if checked < 30 {
		t.Fatalf("found only %d names in the section's table; has its header changed?", checked)
	}
}
