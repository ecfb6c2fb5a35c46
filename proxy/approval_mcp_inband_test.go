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
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/policies/approval"
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
		if _, err := cli.Decide(ctx, id, sink.VerdictApproved, "cli:dana", ""); err != nil {
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
		_, err := cli.Decide(ctx, id, sink.VerdictDenied, "cli:dana", "not today")
		return "accept", err
	}
	res, err = cs.CallTool(ctx, charge)
	if err != nil || !res.IsError || envelopeOf(t, res).Error.Reason != "approval_denied" {
		t.Fatalf("denied call: %v %+v", err, res)
	}
	// Revision requested, with its note.
	decide = func(r round) (string, error) {
		_, err := cli.Decide(ctx, idFromURL(t, r.url), sink.VerdictRevised, "cli:dana", "charge 200 at most")
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
		_, err := cli.Decide(ctx, idFromURL(t, r.url), sink.VerdictApproved, "cli:dana", "")
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
