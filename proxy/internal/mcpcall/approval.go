package mcpcall

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/toolgate/toolgate/bucketing"
	"github.com/toolgate/toolgate/policies"
	"github.com/toolgate/toolgate/proxy/internal/conf"
	"github.com/toolgate/toolgate/proxy/internal/pipe"
	"github.com/toolgate/toolgate/proxy/internal/steps"
	"github.com/toolgate/toolgate/proxy/mcp"
	"github.com/toolgate/toolgate/sink"
)

// The in-band approval of an MCP tools/call (2026-07-28 Multi Round-Trip
// Requests, basic/patterns/mrtr and client/elicitation): a call that needs
// approval from a client that declared URL-mode elicitation gets an
// input_required result whose one input request is a URL-mode elicitation
// pointing at the Approvals page, and whose requestState is toolgate's
// token (policies/approval: an HMAC-tagged, bounded string binding the
// approval request and the call's binding key: tool, route, method,
// server URL, argument digest, agent and session).
// The client's retry echoes the token: verified, it decides the call by
// that request; approved, the call goes upstream with the token and
// toolgate's input response stripped, so the server sees the call as the
// client first made it.
//
// A requestState that is not toolgate's belongs to the server's own input
// round and passes untouched; such a continuation is never asked in-band
// (the client can echo one requestState only), so it gets the isError
// envelope when it needs approval.
const (
	// approvalInputKey is toolgate's key in inputRequests and
	// inputResponses.
	approvalInputKey = "toolgate.approval"
)

// inBandAsk is the in-band question a pending tools/call is answered with.
type inBandAsk struct {
	token string // the requestState
	url   string // the Approvals page, for the URL-mode elicitation
	id    string // the approval request
}

// mcpApprovalStep is an MCP route's approval step (approveMCP).
type mcpApprovalStep struct{ a conf.Approver }

func BuildApproval(e *pipe.ChainEnv) pipe.RequestStep {
	if e.Approver == nil {
		return nil
	}
	return mcpApprovalStep{a: e.Approver}
}

func (s mcpApprovalStep) Check(ctx context.Context, c *pipe.Call) *conf.Refusal {
	return approveMCP(c, ctx, s.a)
}

// approveMCP runs the approval step for a tools/call: as approve, with the
// in-band ask when the client can take it, and the call's own requestState
// checked when it is toolgate's.
func approveMCP(c *pipe.Call, ctx context.Context, a conf.Approver) *conf.Refusal {
	m := ExchangeOf(c)
	msg, tc := m.msg, m.tc
	annotations := m.Tools.Hints(tc.Name).AsMap()
	state, own := ownState(tc.State)
	fresh := len(tc.State) == 0 && len(tc.Responses) == 0
	ask := c.Ask
	if ask == nil {
		ask = m.pinAsk // a changed tool under mcp.pin.on_change: approve
	}
	q := policies.ApprovalCall{
		Tool: tc.Name, Arguments: tc.Args, Agent: c.Event.Agent, Session: c.Event.Session,
		TraceID: c.Event.TraceID, Annotations: annotations, Ask: ask, Token: state,
	}
	if own && m.batch {
		// The stateless era has no batches, and toolgate never asks in one:
		// its state in a batch is not its own round.
		c.NoteApproval(policies.ApprovalInvalid, nil)
		return conf.Refuse(bucketing.CodePolicy, bucketing.ReasonApprovalStateInvalid,
			fmt.Sprintf("Tool '%s' was called in a batch with toolgate's approval state, which is only accepted on a single request; call again without it", tc.Name), nil)
	}
	if n, ok := a.(conf.ApprovalNeeder); ok && !n.Needs(&q) {
		// The common case costs a map lookup: no _meta is read.
		m.strip = own
		return nil
	}
	if m.Stateless && !m.batch && msg.IsRequest() && (fresh || own) && declaresURLElicitation(tc.Meta) && !declined(tc.Responses) {
		q.InBand = true
	}
	steps.BindCall(c, &q, c.In.Method, c.Target)
	out := a.Approve(ctx, &q)
	ref := steps.ApprovalRefusal(out)
	c.NoteApproval(out.State, ref)
	switch {
	case ref != nil && out.Token != "" && out.URL != "":
		m.ask = &inBandAsk{token: out.Token, url: out.URL, id: out.ID}
	case ref == nil && own:
		m.strip = true
	}
	return ref
}

// ownState returns a requestState that claims to be toolgate's (a JSON
// string with the token prefix) and whether it does.
func ownState(raw json.RawMessage) (string, bool) {
	if len(raw) == 0 || raw[0] != '"' {
		return "", false
	}
	var s string
	if json.Unmarshal(raw, &s) != nil || !strings.HasPrefix(s, tokenPrefix) {
		return "", false
	}
	return s, true
}

// tokenPrefix is policies/approval.TokenPrefix; proxy does not import the
// gate, so a test keeps the two equal.
const tokenPrefix = "toolgate-approval.v1."

// declaresURLElicitation reports whether a stateless-era request's _meta
// declares URL-mode elicitation (2026-07-28 client/elicitation
// "Capabilities": an empty elicitation object means form only).
func declaresURLElicitation(meta json.RawMessage) bool {
	var mm map[string]json.RawMessage
	if len(meta) == 0 || json.Unmarshal(meta, &mm) != nil {
		return false
	}
	var caps struct {
		Elicitation *struct {
			URL json.RawMessage `json:"url"`
		} `json:"elicitation"`
	}
	if json.Unmarshal(mm[mcp.MetaClientCapabilities], &caps) != nil || caps.Elicitation == nil {
		return false
	}
	u := caps.Elicitation.URL
	return len(u) > 0 && u[0] == '{'
}

// declined reports whether the client's answer to toolgate's elicitation
// says the user declined or cancelled it: the call then ends with the
// isError envelope rather than another round.
func declined(responses json.RawMessage) bool {
	var rs map[string]json.RawMessage
	if len(responses) == 0 || json.Unmarshal(responses, &rs) != nil {
		return false
	}
	var er struct {
		Action string `json:"action"`
	}
	if json.Unmarshal(rs[approvalInputKey], &er) != nil {
		return false
	}
	return er.Action == "decline" || er.Action == "cancel"
}

// stripOwnState returns a tools/call message without toolgate's
// requestState and input responses (every params member whose name folds
// to requestState or inputResponses), so the server sees the call as the
// client first made it and never toolgate's state.
func stripOwnState(msg mcp.Message) ([]byte, error) {
	var p map[string]json.RawMessage
	if err := json.Unmarshal(msg.Params, &p); err != nil {
		return nil, err
	}
	for k := range p {
		if strings.EqualFold(k, mcp.ParamRequestState) || strings.EqualFold(k, mcp.ParamInputResponses) {
			delete(p, k)
		}
	}
	params, err := json.Marshal(p)
	if err != nil {
		return nil, err
	}
	msg.Params = params
	return json.Marshal(msg)
}

// mcpAskInBand answers a tools/call that waits for approval with the
// input_required result: one URL-mode elicitation of the Approvals page,
// and toolgate's requestState. The call never reaches the server; its
// event says outcome input_required, approval pending.
func mcpAskInBand(c *pipe.Call, r *http.Request, msg *mcp.Message, ref *conf.Refusal) *http.Response {
	ask := ExchangeOf(c).ask
	text := fmt.Sprintf("Tool '%s' needs a person's approval before it runs (toolgate approval %s). Open the Approvals page to see the request; once a person allowed to decide approves it, continue.", c.Event.Tool, ask.id)
	type elicit struct {
		Mode    string `json:"mode"`
		Message string `json:"message"`
		URL     string `json:"url"`
	}
	type inputRequest struct {
		Method string `json:"method"`
		Params elicit `json:"params"`
	}
	type result struct {
		ResultType    string                  `json:"resultType"`
		InputRequests map[string]inputRequest `json:"inputRequests"`
		RequestState  string                  `json:"requestState"`
	}
	body, _ := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Result  result          `json:"result"`
	}{"2.0", msg.ID, result{
		ResultType: "input_required",
		InputRequests: map[string]inputRequest{approvalInputKey: {Method: "elicitation/create",
			Params: elicit{Mode: "url", Message: text, URL: ask.url}}},
		RequestState: ask.token,
	}})
	c.Event.Outcome = sink.OutcomeInputRequired
	c.Event.Refused = true
	c.Event.Detail = ref.Detail
	c.Finish(bucketing.Result{Code: ref.Code, Class: bucketing.ClassOf(ref.Code), Reason: ref.Reason, RetryAfterMS: ref.RetryAfterMS}, 0, int64(len(body)))
	return mcpAnswer(r, http.StatusOK, string(ref.Code), body)
}
