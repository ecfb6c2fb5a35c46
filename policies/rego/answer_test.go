package rego

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/bucketing"
	"github.com/toolgate/toolgate/policies"
)

// The answer rules of real Rego policies, on OPA's interpreter and on the
// compiled engine, combined by policies.Set.CheckAnswer.
const (
	ansRedactA = `package ans.a
redact contains "/email" if input.answer.body.email
redact contains "/items/0/card" if input.answer.body.items[0].card
`
	ansRedactB = `package ans.b
redact contains "/email" if input.answer.status == 200
`
	ansWithhold = `package ans.w
withhold contains "holds an ssn" if input.answer.body.ssn
withhold contains "a teapot" if input.answer.status == 418
withhold contains "not the owner asked for" if input.answer.body.owner != input.arguments.owner
`
	ansDeny = `package ans.d
deny contains "denied" if input.answer.headers["content-type"] == "text/html"
`
	ansAllow = `package ans.allow
default allow := false
allow if input.answer.body.ok == true
`
	ansBroken = `package ans.broken
withhold contains "x" if to_number(input.answer.body.email) > 1
`
)

func TestCheckAnswer(t *testing.T) {
	body := func(s string) any {
		var v any
		d := json.NewDecoder(strings.NewReader(s))
		d.UseNumber()
		if err := d.Decode(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	in := func(status int, ct, b string) *policies.Input {
		return &policies.Input{Tool: "t", Arguments: map[string]any{"owner": "ada"},
			Answer: &policies.Answer{Status: status, Headers: map[string]string{"content-type": ct}, Body: body(b)}}
	}
	rec := `{"owner":"ada","email":"e@x.org","items":[{"card":"4111"}]}`
	type bound struct {
		src, mode string
	}
	tests := []struct {
		name     string
		pols     []bound
		failOpen bool
		in       *policies.Input
		want     policies.AnswerDecision
	}{
		{name: "nothing to say", pols: []bound{{ansWithhold, policies.ModeEnforce}}, in: in(200, "application/json", `{"owner":"ada"}`),
			want: policies.AnswerDecision{}},
		{name: "redactions of two policies, each pointer once", pols: []bound{{ansRedactA, policies.ModeEnforce}, {ansRedactB, policies.ModeEnforce}},
			in:   in(200, "application/json", rec),
			want: policies.AnswerDecision{Redact: []policies.Redaction{{Policy: "p0", Pointer: "/email"}, {Policy: "p0", Pointer: "/items/0/card"}}}},
		{name: "a withhold wins over redactions", pols: []bound{{ansRedactA, policies.ModeEnforce}, {ansWithhold, policies.ModeEnforce}},
			in: in(200, "application/json", `{"owner":"bob","email":"e@x.org","ssn":"1"}`),
			want: policies.AnswerDecision{Withhold: true, Policies: []string{"p1"},
				Detail: "Tool 't' answered with content policy 'p1' withholds: holds an ssn (and 1 more problem)",
				Violations: []policies.Violation{{Reason: bucketing.ReasonPolicyDenied, Message: "holds an ssn", Code: bucketing.CodePolicy},
					{Reason: bucketing.ReasonPolicyDenied, Message: "not the owner asked for", Code: bucketing.CodePolicy}}}},
		{name: "status seen", pols: []bound{{ansWithhold, policies.ModeEnforce}}, in: in(418, "application/json", `{"owner":"ada"}`),
			want: policies.AnswerDecision{Withhold: true, Policies: []string{"p0"}, Detail: "Tool 't' answered with content policy 'p0' withholds: a teapot",
				Violations: []policies.Violation{{Reason: bucketing.ReasonPolicyDenied, Message: "a teapot", Code: bucketing.CodePolicy}}}},
		{name: "deny withholds, headers seen", pols: []bound{{ansDeny, policies.ModeEnforce}}, in: in(200, "text/html", `"<p>"`),
			want: policies.AnswerDecision{Withhold: true, Policies: []string{"p0"}, Detail: "Tool 't' answered with content policy 'p0' withholds: denied",
				Violations: []policies.Violation{{Reason: bucketing.ReasonPolicyDenied, Message: "denied", Code: bucketing.CodePolicy}}}},
		{name: "allow false withholds", pols: []bound{{ansAllow, policies.ModeEnforce}}, in: in(200, "application/json", `{"ok":false}`),
			want: policies.AnswerDecision{Withhold: true, Policies: []string{"p0"}, Detail: "Tool 't' answered with content policy 'p0' withholds: not allowed by policy 'p0'",
				Violations: []policies.Violation{{Reason: bucketing.ReasonPolicyDenied, Message: "not allowed by policy 'p0'", Code: bucketing.CodePolicy}}}},
		{name: "dry run only reports", pols: []bound{{ansWithhold, policies.ModeDryRun}, {ansRedactA, policies.ModeDryRun}, {ansRedactB, policies.ModeEnforce}},
			in: in(200, "application/json", `{"owner":"bob","email":"e@x.org"}`),
			want: policies.AnswerDecision{WouldWithhold: []string{"p0"}, WouldRedact: []policies.Redaction{{Policy: "p1", Pointer: "/email"}},
				Redact: []policies.Redaction{{Policy: "p2", Pointer: "/email"}}}},
		{name: "a failing policy withholds", pols: []bound{{ansRedactA, policies.ModeEnforce}, {ansBroken, policies.ModeEnforce}}, in: in(200, "application/json", rec),
			want: policies.AnswerDecision{Withhold: true, Reason: bucketing.ReasonPolicyError, Policies: []string{"p1"}}},
		{name: "a failing policy of a fail_open tool", pols: []bound{{ansBroken, policies.ModeEnforce}, {ansRedactB, policies.ModeEnforce}}, failOpen: true,
			in:   in(200, "application/json", rec),
			want: policies.AnswerDecision{FailedOpen: []string{"p0: policy_error"}, Redact: []policies.Redaction{{Policy: "p1", Pointer: "/email"}}}},
		{name: "a body too deep for any engine", pols: []bound{{ansRedactB, policies.ModeEnforce}},
			in:   &policies.Input{Tool: "t", Answer: &policies.Answer{Status: 200, Body: nested(policies.MaxInputDepth + 1)}},
			want: policies.AnswerDecision{Withhold: true, Reason: bucketing.ReasonPolicyError, Policies: []string{"p0"}}},
	}
	for _, engine := range []string{policies.EngineInterpreter, policies.EngineCompiled} {
		for _, tt := range tests {
			t.Run(engine+"/"+tt.name, func(t *testing.T) {
				var b []policies.Bound
				for i, p := range tt.pols {
					var ev policies.Evaluator = mustRego(t, "p"+string(rune('0'+i)), p.src)
					if engine == policies.EngineCompiled {
						c, err := ev.(*Policy).Compiled(context.Background())
						if err != nil {
							t.Fatal(err)
						}
						ev = c
					}
					b = append(b, policies.Bound{Policy: ev, Mode: p.mode})
				}
				got := policies.NewSet("t", b, 10*time.Second, tt.failOpen).CheckAnswer(context.Background(), tt.in)
				if tt.want.Reason != "" {
					// The failure's words are the engine's: only their shape.
					if !got.Withhold || got.Reason != tt.want.Reason || !reflect.DeepEqual(got.Policies, tt.want.Policies) || got.Redact != nil ||
						!strings.Contains(got.Detail, "policy '"+tt.want.Policies[0]+"'") {
						t.Fatalf("got %+v; want a withhold by %v failing (%s)", got, tt.want.Policies, tt.want.Reason)
					}
					return
				}
				if !reflect.DeepEqual(got, tt.want) {
					t.Fatalf("got  %+v\nwant %+v", got, tt.want)
				}
			})
		}
	}
}

// TestAnswerRulesIgnoredOnCalls: a policy's answer rules do not decide a
// call (Check), where there is no answer.
func TestAnswerRulesIgnoredOnCalls(t *testing.T) {
	p := mustRego(t, "w", `package w
withhold contains "always" if true
redact contains "/a" if true
`)
	d := policies.NewSet("t", []policies.Bound{{Policy: p, Mode: policies.ModeEnforce}}, 0, false).Check(context.Background(), &policies.Input{Tool: "t"})
	if !d.Allow {
		t.Fatalf("Check = %+v; want the call allowed", d)
	}
}

func nested(n int) any {
	var v any = "x"
	for range n {
		v = map[string]any{"a": v}
	}
	return v
}
