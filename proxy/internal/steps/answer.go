package steps

import (
	"github.com/toolgate/toolgate/proxy/internal/conf"
	"github.com/toolgate/toolgate/proxy/internal/pipe"
)

// replace puts a rewritten body in place of upstream's.
func replace(a *pipe.Answer, body []byte) { a.Body, a.Replaced, a.Read1 = body, true, false }

// read reads Body as the steps that scan it do (readAnswer), once: the
// steps after the first share what it decoded, until a step replaces the
// body. The value is shared, so a step that changes it in place must
// replace the body afterwards.
func read(a *pipe.Answer, maxDepth int) (v any, text bool, why string) {
	if !a.Read1 {
		a.Value, a.Text, a.Why = readAnswer(a, maxDepth)
		a.Read1 = true
	}
	return a.Value, a.Text, a.Why
}

// answerEntry is one place in the order of answer steps: how a tool's
// step there is built (nil: the tool has none), from the tool alone
// (build) or from the snapshot too (buildEnv, for a step that calls a
// collaborator such as the answer policies).
type answerEntry struct {
	name     string
	build    func(t *conf.Tool) pipe.AnswerStep
	buildEnv func(e *pipe.ChainEnv) pipe.AnswerStep
}

// answerOrder is the order of a plain HTTP tool's answer steps. A new
// answer step is one file in this package (the step and its builder), its
// config section with its compile in conf/answer.go, and one entry here.
var answerOrder = []answerEntry{
	{name: "answer_schema", build: buildAnswerSchema},
	{name: "answer_detect", build: buildAnswerDetect},
	{name: "answer_policy", buildEnv: buildAnswerPolicy},
}

// answerBounder is an answer step that says how much of an answer it may
// read: the chain reads up to the largest bound of its steps.
type answerBounder interface {
	maxAnswerBytes() int64
}

// answerPasser is an answer step that lets an answer larger than the
// chain's bound go on unchecked. Such an answer passes only when every
// answer step of the chain is one that lets it.
type answerPasser interface {
	passesUnreadable() bool
}

// BuildAnswerSteps compiles a plain HTTP tool's answer steps, and the most
// of an answer they read.
// It also reports whether an answer larger than that passes unchecked,
// and whether a step reads answers of every status.
func BuildAnswerSteps(e *pipe.ChainEnv) (steps []pipe.AnswerStep, limit int64, pass, all bool) {
	pass = true
	for _, en := range answerOrder {
		var s pipe.AnswerStep
		if en.buildEnv != nil {
			s = en.buildEnv(e)
		} else {
			s = en.build(e.Tool)
		}
		if s == nil {
			continue
		}
		steps = append(steps, s)
		if b, ok := s.(answerBounder); ok {
			limit = max(limit, b.maxAnswerBytes())
		}
		p, ok := s.(answerPasser)
		pass = pass && ok && p.passesUnreadable()
		if a, ok := s.(answerAller); ok && a.readsEveryStatus() {
			all = true
		}
	}
	if len(steps) > 0 && limit == 0 {
		limit = conf.DefaultAnswerBytes
	}
	return steps, limit, pass && len(steps) > 0, all
}

// answerAller is an answer step that reads answers of every status, not
// only 2xx.
type answerAller interface {
	readsEveryStatus() bool
}
