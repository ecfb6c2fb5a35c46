package proxy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/policies/approval"
	"github.com/toolgate/toolgate/policies/approval/audit"
	"github.com/toolgate/toolgate/proxy"
	"github.com/toolgate/toolgate/sink"
)

// inbandUpstream is a real MCP server (Go SDK, stateless, 2026-07-28)
// behind a handler that keeps every tools/call body it received, so a
// test can count what reached the server and read exactly what it got.
type inbandUpstream struct {
	srv   *httptest.Server
	mu    sync.Mutex
	calls map[string][]string // tool -> raw bodies, in order
}

func (u *inbandUpstream) got(tool string) []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.calls[tool]...)
}

// startInbandUpstream serves:
//
//	charge   destructiveHint: true (approvals.tools: require destructive)
//	confirm  its own MRTR round: a form elicitation and requestState
//	         "server-state/+=", checked on the retry
//	transfer both: needs approval (require always) and has its own round
func startInbandUpstream(t *testing.T) *inbandUpstream {
	t.Helper()
	yes := true
	s := mcp.NewServer(&mcp.Implementation{Name: "payments", Version: "1.0.0"}, nil)
	text := func(s string) *mcp.CallToolResult {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
	}
	s.AddTool(&mcp.Tool{Name: "charge", InputSchema: json.RawMessage(`{"type":"object","properties":{"amount":{"type":"integer"}}}`),
		Annotations: &mcp.ToolAnnotations{DestructiveHint: &yes}}, func(ctx context.Context, r *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return text("charged"), nil
	})
	ownRound := func(done string) mcp.ToolHandler {
		return func(ctx context.Context, r *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			if r.Params.RequestState == "" {
				return &mcp.CallToolResult{
					InputRequests: mcp.InputRequestMap{"who": &mcp.ElicitParams{Message: "Who confirms?",
						RequestedSchema: json.RawMessage(`{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}`)}},
					RequestState: "server-state/+=",
				}, nil
			}
			if r.Params.RequestState != "server-state/+=" {
				return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "bad state " + r.Params.RequestState}}}, nil
			}
			er, _ := r.Params.InputResponses["who"].(*mcp.ElicitResult)
			if er == nil || er.Action != "accept" {
				return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "no answer"}}}, nil
			}
			return text(fmt.Sprintf("%s by %v", done, er.Content["name"])), nil
		}
	}
	obj := json.RawMessage(`{"type":"object","properties":{"ticket":{"type":"string"}}}`)
	s.AddTool(&mcp.Tool{Name: "confirm", InputSchema: obj}, ownRound("confirmed"))
	s.AddTool(&mcp.Tool{Name: "transfer", InputSchema: obj}, ownRound("transferred"))
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{Stateless: true})
	u := &inbandUpstream{calls: map[string][]string{}}
	u.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			b, _ := io.ReadAll(r.Body)
			var m struct {
				Method string `json:"method"`
				Params struct {
					Name string `json:"name"`
				} `json:"params"`
			}
			if json.Unmarshal(b, &m) == nil && m.Method == "tools/call" {
				u.mu.Lock()
				u.calls[m.Params.Name] = append(u.calls[m.Params.Name], string(b))
				u.mu.Unlock()
			}
			r.Body = io.NopCloser(bytes.NewReader(b))
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(u.srv.Close)
	return u
}

// inbandApprovals is the approvals section of the in-band tests.
func inbandApprovals(inBand string) approval.Config {
	return approval.Config{URL: "http://127.0.0.1:18091/approvals", InBand: inBand, Tools: map[string]approval.ToolRule{
		"charge":   {Require: approval.RequireDestructive},
		"transfer": {Require: approval.RequireAlways, Uses: 2},
	}}
}

// cliGate is a second gate over the sidecar's file store, as `toolgate
// approvals` opens it: the person's decisions go through it.
func cliGate(t *testing.T, g *approval.Gate) *approval.Gate {
	t.Helper()
	cfg := g.Config()
	store, err := approval.OpenFileStore(cfg.FilePath(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	return approval.New(cfg, store, "cli")
}

// idFromURL is the approval id in an Approvals page URL.
func idFromURL(t *testing.T, s string) string {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil || u.Query().Get("id") == "" {
		t.Fatalf("approval URL %q", s)
	}
	return u.Query().Get("id")
}

// inbandEnvelope reads toolgate's envelope from a complete result.
type inbandEnvelope struct {
	Error struct {
		Reason   string `json:"reason"`
		Approval struct {
			ID   string `json:"id"`
			URL  string `json:"url"`
			Note string `json:"note"`
		} `json:"approval"`
	} `json:"error"`
}

func envelopeOf(t *testing.T, res *mcp.CallToolResult) inbandEnvelope {
	t.Helper()
	var env inbandEnvelope
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, &env); err != nil {
		t.Fatalf("structuredContent %s: %v", b, err)
	}
	return env
}

// TestApprovalMCPInBand drives the official Go SDK client (2026-07-28,
// URL-mode elicitation declared; the SDK runs the Multi Round-Trip loop
// itself) through toolgate's forward proxy to a real stateless server:
//
//   - a destructive call gets toolgate's input_required with a URL-mode
//     elicitation of the Approvals page; answered while still pending, it
//     gets another round with the same approval; approved through a second
//     gate on the same store (as `toolgate approvals approve` does), the
//     retry goes upstream exactly once, without toolgate's requestState or
//     input responses in what the server received;
//   - the same call again needs a new approval, which is denied:
//     approval_denied; a revision request reaches the caller with its note;
//     a user who declines the elicitation gets the approval_pending
//     envelope;
//   - a tool's own MRTR round passes untouched, and a tool that both needs
//     approval and asks its own round (uses: 2) completes after one
//     approval;
//   - events record the rounds: outcome input_required with approval
//     pending, then the forwarded call.
func TestApprovalMCPInBand(t *testing.T) {
	up := startInbandUpstream(t)
	e, gate := newApprovalEnvConfig(t, inbandApprovals(""), true, strings.ReplaceAll(mcpConfig, "MCPUP", up.srv.URL), map[string]proxy.Checker{})
	cli := cliGate(t, gate)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	// decide is what the person does on a round of toolgate's elicitation;
	// it returns the elicitation's answer.
	type round struct {
		mode, url, message string
	}
	var mu sync.Mutex
	var rounds []round
	var decide func(r round) (string, error)
	handler := func(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		r := round{mode: req.Params.Mode, url: req.Params.URL, message: req.Params.Message}
		mu.Lock()
		rounds = append(rounds, r)
		mu.Unlock()
		if r.mode != "url" {
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": "ada"}}, nil
		}
		action, err := decide(r)
		return &mcp.ElicitResult{Action: action}, err
	}
	proxyURL := &url.URL{Scheme: "http", Host: e.srv.Addr("forward", 0)}
	c := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1.0.0"}, &mcp.ClientOptions{
		ElicitationHandler: handler,
		Capabilities:       &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{Form: &mcp.FormElicitationCapabilities{}, URL: &mcp.URLElicitationCapabilities{}}},
	})
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: up.srv.URL + "/mcp",
		HTTPClient: &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(proxyURL)}}}, &mcp.ClientSessionOptions{ProtocolVersion: "2026-07-28"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	takeRounds := func() []round {
		mu.Lock()
		defer mu.Unlock()
		out := rounds
		rounds = nil
		return out
	}

	// Pending, then approved on the second round.
	var firstID string
	n := 0
	decide = func(r round) (string, error) {
		n++
		id := idFromURL(t, r.url)
		if len(up.got("charge")) != 0 {
			t.Errorf("round %d: the server was called before approval", n)
		}
		if n == 1 {
			firstID = id
			return "accept", nil // not approved yet: toolgate asks again
		}
		if id != firstID {
			t.Errorf("round %d named approval %s, want the pending %s", n, id, firstID)
		}
		if _, err := cli.Decide(ctx, id, audit.VerdictApproved, "cli:dana", ""); err != nil {
			t.Errorf("approve: %v", err)
		}
		return "accept", nil
	}
	charge := &mcp.CallToolParams{Name: "charge", Arguments: map[string]any{"amount": 250}}
	res, err := cs.CallTool(ctx, charge)
	if err != nil || res.IsError || resultText(res) != "charged" {
		t.Fatalf("approved call: %v %+v", err, res)
	}
	if rs := takeRounds(); len(rs) != 2 || !strings.Contains(rs[0].message, firstID) {
		t.Fatalf("rounds %+v, want two URL elicitations naming %s", rs, firstID)
	}
	got := up.got("charge")
	if len(got) != 1 {
		t.Fatalf("the server got charge %d times, want once", len(got))
	}
	for _, bad := range []string{"toolgate-approval", "requestState", "inputResponses", approvalKeyInBody} {
		if strings.Contains(strings.ToLower(got[0]), strings.ToLower(bad)) {
			t.Errorf("the server received %q: %s", bad, got[0])
		}
	}
	var fwd struct {
		Params map[string]json.RawMessage `json:"params"`
	}
	if err := json.Unmarshal([]byte(got[0]), &fwd); err != nil || string(fwd.Params["arguments"]) != `{"amount":250}` {
		t.Errorf("the server received %s, want the call's own arguments", got[0])
	}

	// The same call again needs a new approval: denied.
	decide = func(r round) (string, error) {
		id := idFromURL(t, r.url)
		if id == firstID {
			t.Errorf("a used grant was offered again")
		}
		_, err := cli.Decide(ctx, id, audit.VerdictDenied, "cli:dana", "not today")
		return "accept", err
	}
	res, err = cs.CallTool(ctx, charge)
	if err != nil || !res.IsError || envelopeOf(t, res).Error.Reason != "approval_denied" {
		t.Fatalf("denied call: %v %+v", err, res)
	}
	// Revision requested, with its note.
	decide = func(r round) (string, error) {
		_, err := cli.Decide(ctx, idFromURL(t, r.url), audit.VerdictRevised, "cli:dana", "charge 200 at most")
		return "accept", err
	}
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "charge", Arguments: map[string]any{"amount": 900}})
	if env := envelopeOf(t, res); err != nil || !res.IsError || env.Error.Reason != "revision_requested" || env.Error.Approval.Note != "charge 200 at most" ||
		!strings.Contains(resultText(res), "charge 200 at most") {
		t.Fatalf("revision: %v %+v", err, res)
	}
	// The user declines to open the page: the call ends pending.
	decide = func(round) (string, error) { return "decline", nil }
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "charge", Arguments: map[string]any{"amount": 5}})
	if err != nil || !res.IsError || envelopeOf(t, res).Error.Reason != "approval_pending" {
		t.Fatalf("declined: %v %+v", err, res)
	}
	if n := len(up.got("charge")); n != 1 {
		t.Fatalf("the server got charge %d times, want once", n)
	}
	takeRounds()

	// A tool's own round passes untouched.
	decide = func(round) (string, error) {
		t.Error("toolgate asked approval for a tool that needs none")
		return "cancel", nil
	}
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "confirm", Arguments: map[string]any{"ticket": "T-1"}})
	if err != nil || res.IsError || resultText(res) != "confirmed by ada" {
		t.Fatalf("the server's own round: %v %+v", err, res)
	}
	if got := up.got("confirm"); len(got) != 2 || !strings.Contains(got[1], `"requestState":"server-state/+="`) {
		t.Fatalf("the server's own round: it got %q", got)
	}
	if rs := takeRounds(); len(rs) != 1 || rs[0].mode == "url" {
		t.Fatalf("confirm rounds %+v, want the server's form only", rs)
	}

	// Approval and the server's own round on one call (uses: 2).
	decide = func(r round) (string, error) {
		_, err := cli.Decide(ctx, idFromURL(t, r.url), audit.VerdictApproved, "cli:dana", "")
		return "accept", err
	}
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "transfer", Arguments: map[string]any{"ticket": "T-2"}})
	if err != nil || res.IsError || resultText(res) != "transferred by ada" {
		t.Fatalf("approval then the server's round: %v %+v", err, res)
	}
	got = up.got("transfer")
	if len(got) != 2 || strings.Contains(got[0], "toolgate-approval") || strings.Contains(got[0], "requestState") ||
		!strings.Contains(got[1], `"requestState":"server-state/+="`) || strings.Contains(got[1], "toolgate") {
		t.Fatalf("transfer: the server got %q", got)
	}
	if rs := takeRounds(); len(rs) != 2 || rs[0].mode != "url" || rs[1].mode == "url" {
		t.Fatalf("transfer rounds %+v, want toolgate's URL round then the server's form", rs)
	}

	// Events: each round one event.
	evs := e.waitEventsWhere(t, func(evs []sink.Event) bool { return countTool(evs, "transfer") >= 3 })
	var trail []string
	for _, ev := range evs {
		if ev.Tool == "charge" {
			trail = append(trail, ev.Outcome+"/"+ev.Approval+"/"+ev.Reason)
		}
	}
	want := []string{
		"input_required/pending/approval_pending", "input_required/pending/approval_pending", "ok/approved/",
		"input_required/pending/approval_pending", "refused/denied/approval_denied",
		"input_required/pending/approval_pending", "refused/revised/revision_requested",
		"input_required/pending/approval_pending", "refused/pending/approval_pending",
	}
	if strings.Join(trail, " ") != strings.Join(want, " ") {
		t.Errorf("charge events:\n got %v\nwant %v", trail, want)
	}
}

// approvalKeyInBody is toolgate's inputRequests key, which the server must
// never see.
const approvalKeyInBody = "toolgate.approval"

// rawMCP sends one 2026-07-28 tools/call through the forward proxy as
// plain JSON-RPC over HTTP, with params beyond name and arguments given
// in extra, and returns the JSON-RPC result. caps is the client's
// declared capabilities; version "" sends a session-era request (no
// _meta protocol version, MCP-Protocol-Version 2025-11-25).
func rawMCP(t *testing.T, e *env, endpoint, version string, caps any, tool string, args, extra map[string]any) map[string]json.RawMessage {
	t.Helper()
	params := map[string]any{"name": tool, "arguments": args}
	for k, v := range extra {
		params[k] = v
	}
	hv := "2025-11-25"
	if version != "" {
		hv = version
		params["_meta"] = map[string]any{
			"io.modelcontextprotocol/protocolVersion":    version,
			"io.modelcontextprotocol/clientInfo":         map[string]any{"name": "raw", "version": "1"},
			"io.modelcontextprotocol/clientCapabilities": caps,
		}
	}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": params})
	req, _ := http.NewRequest(http.MethodPost, endpoint, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", hv)
	req.Header.Set("Mcp-Method", "tools/call")
	req.Header.Set("Mcp-Name", tool)
	resp, err := e.viaHTTP.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if i := bytes.Index(b, []byte("data: ")); i >= 0 && strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		b = b[i+len("data: "):]
		b = b[:bytes.IndexByte(b, '\n')]
	}
	var m struct {
		Result map[string]json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal(b, &m); err != nil || m.Result == nil {
		t.Fatalf("status %d, answer %s", resp.StatusCode, b)
	}
	return m.Result
}

// rawReason is the envelope reason of a complete isError result, or the
// result type when it is not one.
func rawReason(res map[string]json.RawMessage) string {
	var rt string
	_ = json.Unmarshal(res["resultType"], &rt)
	if rt == "input_required" {
		return rt
	}
	var env inbandEnvelope
	if json.Unmarshal(res["structuredContent"], &env) != nil || env.Error.Reason == "" {
		return "ok"
	}
	return env.Error.Reason
}

// rawAsk reads toolgate's input_required result: the approval id of its
// URL-mode elicitation, and its requestState.
func rawAsk(t *testing.T, res map[string]json.RawMessage) (id, state string) {
	t.Helper()
	var ir map[string]struct {
		Method string `json:"method"`
		Params struct {
			Mode string `json:"mode"`
			URL  string `json:"url"`
		} `json:"params"`
	}
	if err := json.Unmarshal(res["inputRequests"], &ir); err != nil || len(ir) != 1 {
		t.Fatalf("inputRequests %s", res["inputRequests"])
	}
	a := ir["toolgate.approval"]
	if a.Method != "elicitation/create" || a.Params.Mode != "url" {
		t.Fatalf("input request %+v", a)
	}
	if err := json.Unmarshal(res["requestState"], &state); err != nil || !strings.HasPrefix(state, approval.TokenPrefix) || len(state) > approval.MaxTokenBytes {
		t.Fatalf("requestState %s", res["requestState"])
	}
	return idFromURL(t, a.Params.URL), state
}

// TestApprovalMCPInBandAttacks drives the in-band protocol with plain
// JSON-RPC over a real HTTP client, as a hostile or careless client would
// (the SDKs only echo what they got): a forged requestState, an altered
// one, one cut short or padded past its bound, arguments changed under an
// approval, toolgate's state replayed after its grant was used, and case
// variants of the stripped members. None of these reach the server, and
// the one approved call does, once, with none of toolgate's state in it.
// Older clients and clients without URL-mode elicitation get the isError
// envelope.
func TestApprovalMCPInBandAttacks(t *testing.T) {
	up := startInbandUpstream(t)
	e, gate := newApprovalEnvConfig(t, inbandApprovals(""), true, strings.ReplaceAll(mcpConfig, "MCPUP", up.srv.URL), map[string]proxy.Checker{})
	cli := cliGate(t, gate)
	ctx := context.Background()
	endpoint := up.srv.URL + "/mcp"
	urlCaps := map[string]any{"elicitation": map[string]any{"url": map[string]any{}}}
	call := func(args map[string]any, extra map[string]any) map[string]json.RawMessage {
		return rawMCP(t, e, endpoint, "2026-07-28", urlCaps, "charge", args, extra)
	}
	accept := map[string]any{"toolgate.approval": map[string]any{"action": "accept"}}
	retry := func(state string) map[string]any {
		return map[string]any{"requestState": state, "inputResponses": accept}
	}

	id, state := rawAsk(t, call(map[string]any{"amount": 10}, nil))
	if _, err := cli.Decide(ctx, id, audit.VerdictApproved, "cli:dana", ""); err != nil {
		t.Fatal(err)
	}
	dot := strings.LastIndexByte(state, '.')
	flip := func(s string, i int) string {
		b := []byte(s)
		b[i] ^= 1
		return string(b)
	}
	for _, tc := range []struct {
		name   string
		args   map[string]any
		extra  map[string]any
		reason string
	}{
		{"forged", map[string]any{"amount": 10}, retry(approval.TokenPrefix + "eyJpIjoiMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAiLCJrIjoiIiwiZSI6OTk5OTk5OTk5OX0.AAAA"), "approval_state_invalid"},
		{"altered claims", map[string]any{"amount": 10}, retry(flip(state, len(approval.TokenPrefix)+3)), "approval_state_invalid"},
		{"altered tag", map[string]any{"amount": 10}, retry(flip(state, dot+2)), "approval_state_invalid"},
		{"cut", map[string]any{"amount": 10}, retry(state[:dot]), "approval_state_invalid"},
		{"too long", map[string]any{"amount": 10}, retry(state + strings.Repeat("A", approval.MaxTokenBytes)), "approval_state_invalid"},
		{"arguments changed", map[string]any{"amount": 9999}, retry(state), "approval_mismatch"},
		{"another tool's schema-valid call", map[string]any{}, retry(state), "approval_mismatch"},
	} {
		if got := rawReason(call(tc.args, tc.extra)); got != tc.reason {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.reason)
		}
	}
	if n := len(up.got("charge")); n != 0 {
		t.Fatalf("the server got %d calls from forged, altered or mismatched state", n)
	}

	// The approved retry. (A case variant of requestState or
	// inputResponses is refused before approval: TestMCPReaders.)
	extra := map[string]any{"requestState": state, "inputResponses": accept}
	if got := rawReason(call(map[string]any{"amount": 10}, extra)); got != "ok" {
		t.Fatalf("approved retry: %s", got)
	}
	got := up.got("charge")
	if len(got) != 1 {
		t.Fatalf("the server got %d calls, want 1", len(got))
	}
	var fwd struct {
		Params map[string]json.RawMessage `json:"params"`
	}
	if err := json.Unmarshal([]byte(got[0]), &fwd); err != nil {
		t.Fatal(err)
	}
	for k := range fwd.Params {
		if k != "name" && k != "arguments" && k != "_meta" {
			t.Errorf("the server received params.%s", k)
		}
	}
	if strings.Contains(got[0], "toolgate") {
		t.Errorf("the server received toolgate's state: %s", got[0])
	}

	// Replayed after its grant was used: a new approval is asked, nothing
	// is sent.
	res := call(map[string]any{"amount": 10}, retry(state))
	if id2, _ := rawAsk(t, res); id2 == id {
		t.Errorf("the used approval %s was offered again", id)
	}
	if n := len(up.got("charge")); n != 1 {
		t.Fatalf("the replayed state reached the server: %d calls", n)
	}

	// Clients that cannot be asked in-band get the isError envelope.
	for _, tc := range []struct {
		name    string
		version string
		caps    any
	}{
		{"session era with url elicitation", "", urlCaps},
		{"2026-07-28 without elicitation", "2026-07-28", map[string]any{}},
		{"2026-07-28 with form elicitation only", "2026-07-28", map[string]any{"elicitation": map[string]any{}}},
	} {
		if got := rawReason(rawMCP(t, e, endpoint, tc.version, tc.caps, "charge", map[string]any{"amount": 3}, nil)); got != "approval_pending" {
			t.Errorf("%s: %s, want the approval_pending envelope", tc.name, got)
		}
	}
	// A continuation of the server's own round is never asked in-band: its
	// requestState is the server's, and the client can echo only one.
	if got := rawReason(call(map[string]any{"amount": 4}, map[string]any{"requestState": "server-state/+="})); got != "approval_pending" {
		t.Errorf("the server's continuation: %s, want the approval_pending envelope", got)
	}
	if n := len(up.got("charge")); n != 1 {
		t.Fatalf("the server got %d calls, want 1", n)
	}

	// toolgate's state in a batch (which toolgate never asks in) is refused
	// and nothing of the batch is sent.
	batch, _ := json.Marshal([]map[string]any{{"jsonrpc": "2.0", "id": 1, "method": "tools/call",
		"params": map[string]any{"name": "charge", "arguments": map[string]any{"amount": 10}, "requestState": state}}})
	req, _ := http.NewRequest(http.MethodPost, endpoint, bytes.NewReader(batch))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := e.viaHTTP.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !bytes.Contains(b, []byte(`"reason":"approval_state_invalid"`)) {
		t.Errorf("toolgate's state in a batch: %d %s", resp.StatusCode, b)
	}
	if n := len(up.got("charge")); n != 1 {
		t.Fatalf("the server got %d calls, want 1", n)
	}

	// Events: the forged and mismatched retries are refused with their
	// approval state.
	evs := e.waitEventsWhere(t, func(evs []sink.Event) bool { return countTool(evs, "charge") >= 15 })
	states := map[string]int{}
	for _, ev := range evs {
		if ev.Tool == "charge" && ev.Refused {
			states[ev.Approval+"/"+ev.Reason]++
		}
	}
	if states["invalid/approval_state_invalid"] != 6 || states["mismatch/approval_mismatch"] != 2 {
		t.Errorf("refusal events %v", states)
	}
}

// TestApprovalMCPInBandOff checks approvals.in_band: off, and a tool's
// own in_band: off under the default: every client gets the isError
// envelope.
func TestApprovalMCPInBandOff(t *testing.T) {
	up := startInbandUpstream(t)
	urlCaps := map[string]any{"elicitation": map[string]any{"url": map[string]any{}}}
	for _, tc := range []struct {
		name string
		cfg  approval.Config
	}{
		{"section", inbandApprovals(approval.InBandOff)},
		{"tool", func() approval.Config {
			c := inbandApprovals("")
			c.Tools["charge"] = approval.ToolRule{Require: approval.RequireDestructive, InBand: approval.InBandOff}
			return c
		}()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, _ := newApprovalEnvConfig(t, tc.cfg, true, strings.ReplaceAll(mcpConfig, "MCPUP", up.srv.URL), map[string]proxy.Checker{})
			if got := rawReason(rawMCP(t, e, up.srv.URL+"/mcp", "2026-07-28", urlCaps, "charge", map[string]any{"amount": 1}, nil)); got != "approval_pending" {
				t.Errorf("in_band off: %s, want the approval_pending envelope", got)
			}
		})
	}
}

// TestApprovalMCPInBandDocExample checks the input_required example in
// docs/approvals.md against a real answer: equal once the approval id and
// the requestState (which differ per request) are the example's.
func TestApprovalMCPInBandDocExample(t *testing.T) {
	doc, err := os.ReadFile("../docs/approvals.md")
	if err != nil {
		t.Fatal(err)
	}
	s := string(doc)
	i := strings.Index(s, "**MCP, in-band (2026-07-28).**")
	j := strings.Index(s[i:], "```json\n")
	k := strings.Index(s[i+j+8:], "```")
	if i < 0 || j < 0 || k < 0 {
		t.Fatal("no json example in the in-band section of docs/approvals.md")
	}
	var want map[string]any
	if err := json.Unmarshal([]byte(s[i+j+8:i+j+8+k]), &want); err != nil {
		t.Fatalf("the example is not JSON: %v", err)
	}
	wantRes := want["result"].(map[string]any)
	wantID := idFromURL(t, wantRes["inputRequests"].(map[string]any)["toolgate.approval"].(map[string]any)["params"].(map[string]any)["url"].(string))

	up := startInbandUpstream(t)
	e, _ := newApprovalEnvConfig(t, inbandApprovals(""), true, strings.ReplaceAll(mcpConfig, "MCPUP", up.srv.URL), map[string]proxy.Checker{})
	res := rawMCP(t, e, up.srv.URL+"/mcp", "2026-07-28", map[string]any{"elicitation": map[string]any{"url": map[string]any{}}}, "charge", map[string]any{"amount": 250}, nil)
	id, _ := rawAsk(t, res)
	b, _ := json.Marshal(res)
	b = bytes.ReplaceAll(b, []byte(id), []byte(wantID))
	var got map[string]any
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	got["requestState"] = wantRes["requestState"]
	gb, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 7, "result": got})
	wb, _ := json.Marshal(want)
	if string(gb) != string(wb) {
		t.Errorf("docs/approvals.md's example differs from the real answer:\n got %s\nwant %s", gb, wb)
	}
}
