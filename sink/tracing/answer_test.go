package tracing_test

import (
	"context"
	"reflect"
	"testing"

	"github.com/toolgate/toolgate/internal/otlptest"
	"github.com/toolgate/toolgate/sink"
	"github.com/toolgate/toolgate/sink/tracing"
)

// TestAnswerAttributes: what the answer checks did is on the span as the
// event says it (the verdict, the kinds found, the values replaced), and a
// call without answer checks carries none of it.
func TestAnswerAttributes(t *testing.T) {
	rcv := otlptest.Start(t)
	e := start(t, tracing.Config{Endpoint: rcv.URL()})
	tests := []struct {
		name                     string
		answer                   string
		findings                 []string
		redactions               int64
		wantAnswer               any // nil: no attribute
		wantFindings, wantRedact any
	}{
		{name: "redacted", answer: sink.AnswerRedacted, findings: []string{"pii.email", "secret.github_token"}, redactions: 3,
			wantAnswer: "redacted", wantFindings: []any{"pii.email", "secret.github_token"}, wantRedact: int64(3)},
		{name: "withheld", answer: sink.AnswerWithheld, findings: []string{"instruction"},
			wantAnswer: "withheld", wantFindings: []any{"instruction"}},
		{name: "passed", answer: sink.AnswerPassed, wantAnswer: "passed"},
		{name: "no answer checks"},
	}
	for i, tc := range tests {
		ev := event(tc.name, "")
		ev.EventID = "ev-" + tc.name
		ev.TraceID = "6666666666666666666666666666666" + string(rune('0'+i))
		ev.Answer, ev.AnswerFindings, ev.Redactions = tc.answer, tc.findings, tc.redactions
		e.TraceCall(ev, known(ev.Tool, ""))
	}
	e.Shutdown(context.Background())
	byEvent := map[any]map[string]any{}
	for _, s := range rcv.Spans() {
		byEvent[s.Attrs["toolgate.event_id"]] = s.Attrs
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a, ok := byEvent["ev-"+tc.name]
			if !ok {
				t.Fatalf("no span for the call; spans for %v", len(byEvent))
			}
			for key, want := range map[string]any{"toolgate.answer": tc.wantAnswer, "toolgate.answer_findings": tc.wantFindings, "toolgate.redactions": tc.wantRedact} {
				got, ok := a[key]
				if want == nil {
					if ok {
						t.Errorf("%s = %v, want none", key, got)
					}
					continue
				}
				if !reflect.DeepEqual(got, want) {
					t.Errorf("%s = %#v, want %#v", key, got, want)
				}
			}
		})
	}
}
