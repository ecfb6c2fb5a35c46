package pipe

import (
	"context"

	"github.com/toolgate/toolgate/policies"
)

// AnswerChecker is the answer policy step's collaborator: it decides one
// answer (in.Answer set) with a tool's answer policies. policies.Set
// satisfies it.
type AnswerChecker interface {
	CheckAnswer(ctx context.Context, in *policies.Input) policies.AnswerDecision
}
