package mcpcall

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/toolgate/toolgate/bucketing"
	"github.com/toolgate/toolgate/policies"
	"github.com/toolgate/toolgate/proxy/internal/conf"
	"github.com/toolgate/toolgate/proxy/internal/pipe"
	"github.com/toolgate/toolgate/proxy/internal/steps"
	"github.com/toolgate/toolgate/proxy/mcp"
	"github.com/toolgate/toolgate/sink"
)

// armAnswerChecks holds the answer to a request that holds a tools/call,
// on a route with answer checks: each response is checked as the result
// of the tools/call it answers, and with detectors every other message
// of the answer (notifications, the server's requests) is scanned too.
func (m *Exchange) armAnswerChecks(msgs []mcp.Message) {
	rule := m.Route.Answer
	if rule == nil || m.ans.CallID == nil {
		return
	}
	calls := map[string]string{}
	for i := range msgs {
		if msgs[i].Method == mcp.MethodToolsCall && msgs[i].IsRequest() {
			tc, _ := mcp.ParseToolCall(msgs[i].Params)
			calls[mcp.IDText(msgs[i].ID)] = tc.Name
		}
	}
	h := m.holdFor(rule.Limit, rule.Pass)
	h.calls = calls
	h.hooks = append(h.hooks, m.checkResult)
}

// verdictRank orders answer verdicts: an event keeps the strongest its
// messages got.
var verdictRank = map[string]int{"": 0, sink.AnswerPassed: 1, sink.AnswerUninspected: 2, sink.AnswerWouldRedact: 3,
	sink.AnswerRedacted: 4, sink.AnswerWouldWithhold: 5, sink.AnswerWithheld: 6}

// noteMCPAnswer records what the checks did with one message of the
// answer: the event keeps the strongest verdict, and every kind found.
func (m *Exchange) noteMCPAnswer(verdict string, kinds []string, n int) {
	c := m.Call
	v := c.Event.Answer
	if verdictRank[verdict] > verdictRank[v] {
		v = verdict
	}
	c.NoteAnswer(v, kinds, int64(n))
}

// resultTool is the tool whose result a response is: the call's, for a
// single tools/call whatever the response's id (a client of one request
// takes any response as its answer); by id in a batch. ok is false for a
// response to no tools/call of the batch.
func (m *Exchange) resultTool(id json.RawMessage) (string, bool) {
	if !m.batch {
		return m.hold.calls[mcp.IDText(m.ans.CallID)], true
	}
	name, ok := m.hold.calls[mcp.IDText(id)]
	return name, ok
}

// checkResult is the answer checks' hook: a response to a tools/call is
// held to the tool's outputSchema and scanned; any other message is
// scanned when the route has detectors.
func (m *Exchange) checkResult(raw []byte, msg *mcp.Message) []byte {
	rule := m.Route.Answer
	if !msg.IsResponse() {
		return m.scanOther(raw, msg)
	}
	tool, isCall := m.resultTool(msg.ID)
	if isCall && m.hold.Withheld(msg.ID) {
		return nil // its call was answered already: the answer was unreadable
	}
	subject := fmt.Sprintf("Tool '%s' answered", tool)
	if msg.Error != nil {
		return m.scanError(raw, msg, subject, tool)
	}
	v, _ := decodeAnswerJSON(msg.Result)
	res, isObj := v.(map[string]any)
	if !isObj {
		return m.hold.unreadable(raw, "a result that is not a JSON object")
	}
	if !isCall {
		tool = ""
	}
	var ref *conf.Refusal
	isError, _ := res["isError"].(bool)
	_, content := res["content"]
	_, isTask := res["task"].(map[string]any)
	isTask = isTask && !content // a CreateTaskResult: the result comes by tasks/result
	if rule.Schema != conf.OutputSchemaOff && tool != "" && !isError && !isTask && !mcp.IsInputRequired(msg.Result) {
		ref = m.checkOutputSchema(tool, subject, res)
		if ref != nil && ref.Reason == pipe.ReasonAnswerUnreadable {
			if rule.Pass {
				m.noteMCPAnswer(sink.AnswerUninspected, nil, 0)
				ref = nil
			}
		} else if ref != nil && rule.Schema == conf.OutputSchemaDryRun {
			m.noteMCPAnswer(sink.AnswerWouldWithhold, []string{steps.ReasonAnswerSchema}, 0)
			ref = nil
		}
	}
	var out map[string]any
	if ref == nil && rule.Detect != nil {
		j := steps.Judge(rule.Detect, res, false, nil)
		switch j.Verdict {
		case sink.AnswerWithheld:
			m.noteMCPAnswer(sink.AnswerWithheld, j.Kinds, 0)
			ref = j.Refusal(subject, nil)
		case sink.AnswerRedacted:
			out, _ = j.Out.(map[string]any)
			m.noteMCPAnswer(sink.AnswerRedacted, j.Kinds, j.N)
		case "":
		default:
			m.noteMCPAnswer(j.Verdict, j.Kinds, 0)
		}
	}
	if ref != nil {
		if m.Call.Event.Answer != sink.AnswerWithheld {
			m.noteMCPAnswer(sink.AnswerWithheld, []string{ref.Reason}, 0)
		}
		return m.hold.withhold(msg.ID, tool, ref)
	}
	m.noteMCPAnswer(sink.AnswerPassed, nil, 0)
	if out == nil {
		return raw
	}
	b, err := steps.MarshalAnswer(out)
	if err != nil {
		return m.hold.unreadable(raw, "a result that cannot be written again after redaction")
	}
	return rebuild(raw, "result", b)
}

// checkOutputSchema holds a result to the outputSchema its tool lists. A
// tool that lists one and answers without structuredContent breaks the
// specification ("servers MUST provide structured results that conform
// to this schema"): a violation too. It returns nil when the tool lists
// none, or the result matches.
func (m *Exchange) checkOutputSchema(tool, subject string, res map[string]any) *conf.Refusal {
	sch, listed, why := m.Tools.OutputSchema(tool)
	switch {
	case !listed:
		return nil
	case sch == nil:
		return conf.Refuse(bucketing.CodeUpstream, pipe.ReasonAnswerUnreadable,
			fmt.Sprintf("%s, and the outputSchema it lists cannot be used to check the result (%v)", subject, why), nil)
	}
	raw, has := res["structuredContent"]
	sc, isObj := raw.(map[string]any)
	var vs []policies.Violation
	switch {
	case !has:
		vs = []policies.Violation{{Path: "/structuredContent", Message: "missing: the tool lists an outputSchema, so its results must have structuredContent", Expected: "present"}}
	case !isObj:
		has = false
		vs = []policies.Violation{{Path: "/structuredContent", Message: "not a JSON object", Expected: "object"}}
	default:
		if vs = sch.Validate(sc); len(vs) == 0 {
			vs = sch.FoldedNames(sc)
		}
	}
	if len(vs) == 0 {
		return nil
	}
	for i := range vs {
		if has {
			// Member names of the result are its content: only indices
			// are shown.
			vs[i].Path = "/structuredContent" + steps.RedactPath(vs[i].Path, nil)
		}
		vs[i].Got = ""
		if vs[i].Reason == bucketing.ReasonUnknownField {
			vs[i].Message = "undeclared member"
		}
	}
	return conf.Refuse(bucketing.CodeUpstream, steps.ReasonAnswerSchema,
		fmt.Sprintf("%s with a result that does not match its outputSchema (%d violation(s), first at %s)", subject, len(vs), vs[0].Path), vs)
}

// scanError scans a JSON-RPC error's message and data: a client shows
// them to the model as it shows a result. A finding withholds the call's
// result or is redacted in place.
func (m *Exchange) scanError(raw []byte, msg *mcp.Message, subject, tool string) []byte {
	return m.scanMember(raw, "error", rawMember(raw, "error"), func(j *steps.DetectJudgement) []byte {
		return m.hold.withhold(msg.ID, tool, j.Refusal(subject, nil))
	})
}

// scanOther scans a message of the answer that is not a response (a
// progress or logging notification, a request of the server's): a finding
// drops it (withhold) or is redacted in its params.
func (m *Exchange) scanOther(raw []byte, msg *mcp.Message) []byte {
	return m.scanMember(raw, "params", msg.Params, func(*steps.DetectJudgement) []byte { return nil })
}

// scanMember runs the route's detectors on one member of a message (value,
// as sent): with a finding, the message is what withhold makes of it, or
// the member is redacted in place. Without detectors it passes as it is.
func (m *Exchange) scanMember(raw []byte, member string, value []byte, withhold func(*steps.DetectJudgement) []byte) []byte {
	det := m.Route.Answer.Detect
	if det == nil || len(value) == 0 {
		return raw
	}
	v, ok := decodeAnswerJSON(value)
	if !ok {
		return m.hold.unreadable(raw, "a message whose "+member+" is not JSON")
	}
	j := steps.Judge(det, v, false, nil)
	switch j.Verdict {
	case "":
		m.noteMCPAnswer(sink.AnswerPassed, nil, 0)
		return raw
	case sink.AnswerWithheld:
		m.noteMCPAnswer(sink.AnswerWithheld, j.Kinds, 0)
		return withhold(&j)
	case sink.AnswerRedacted:
		m.noteMCPAnswer(sink.AnswerRedacted, j.Kinds, j.N)
		b, err := steps.MarshalAnswer(j.Out)
		if err != nil {
			return m.hold.unreadable(raw, "a message that cannot be written again after redaction")
		}
		return rebuild(raw, member, b)
	}
	m.noteMCPAnswer(j.Verdict, j.Kinds, 0)
	return raw
}

// decodeAnswerJSON decodes one JSON value of an answer, numbers kept as
// json.Number (so a redacted answer writes them again as they were).
func decodeAnswerJSON(b []byte) (any, bool) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil {
		return nil, false
	}
	return v, true
}

// rebuild writes a message again with one member (result, error or
// params) replaced; its other members are kept as sent.
func rebuild(raw []byte, member string, value []byte) []byte {
	var obj map[string]json.RawMessage
	if json.Unmarshal(raw, &obj) != nil {
		return nil
	}
	obj[member] = value
	b, err := steps.MarshalAnswer(obj)
	if err != nil {
		return nil
	}
	return b
}

// rawMember is one member of a JSON object, as sent; nil when absent.
func rawMember(raw []byte, name string) []byte {
	var obj map[string]json.RawMessage
	if json.Unmarshal(raw, &obj) != nil {
		return nil
	}
	return obj[name]
}

// settleAnswer completes the bucketed result of a call whose result the
// answer checks withheld: the client got an isError result toolgate made,
// recorded as a refusal with the checks' code and reason (upstream was
// called: refused stays false). ok is false when nothing was withheld.
func (m *Exchange) settleAnswer() (bucketing.Result, bool) {
	if m.hold == nil || m.hold.ref == nil {
		return bucketing.Result{}, false
	}
	ref := m.hold.ref
	ev := &m.Call.Event
	ev.Outcome = sink.OutcomeRefused
	m.Call.NoteRefusal(ref)
	return bucketing.Result{Code: ref.Code, Class: bucketing.ClassOf(ref.Code), Reason: ref.Reason}, true
}

// HoldAnswer holds upstream's answer to a call with answer checks (see
// mcpHold); it returns the client's answer when the answer is replaced
// whole, or nil when resp goes on, its body rewritten or untouched (no
// answer checks hold it).
func (m *Exchange) HoldAnswer(r *http.Request, resp *http.Response) *http.Response {
	if m.hold == nil || resp.StatusCode/100 != 2 || resp.StatusCode == http.StatusNoContent || resp.StatusCode == http.StatusAccepted {
		return nil
	}
	return m.hold.begin(r, resp)
}
