package proxy

// buildAnswerSteps compiles a plain HTTP tool's answer steps.
func buildAnswerSteps(t *tool) []answerStep { return nil }

// answer is upstream's answer as answer steps see it.
type answer struct{}
