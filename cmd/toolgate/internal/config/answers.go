package config

import (
	"errors"
	"fmt"

	"github.com/toolgate/toolgate/internal/section"
	"github.com/toolgate/toolgate/policies"
	"github.com/toolgate/toolgate/proxy"
)

// The answer policies' binding: each tool's answer.policies resolved
// against the loaded policies into the set its answer policy step asks.

var _ proxy.AnswerChecker = (*policies.Set)(nil)

// answerCheckers builds each tool's answer policy set (its
// answer.policies, under its policy_mode and fail_open), by tool name; a
// tool whose answer policies are all off has none.
func answerCheckers(pol *policies.Loaded, tools []proxy.ToolConfig) (map[string]proxy.AnswerChecker, error) {
	out := map[string]proxy.AnswerChecker{}
	for i, t := range tools {
		if len(t.Answer.Policies) == 0 {
			continue
		}
		set, err := pol.AnswerSetFor(t.Name, t.Answer.Policies, t.PolicyMode, t.FailOpen)
		if err != nil {
			var fe *section.Error
			if errors.As(err, &fe) {
				return nil, section.Under(fmt.Sprintf("tools[%d]", i), err)
			}
			return nil, err
		}
		if set != nil {
			out[t.Name] = set
		}
	}
	return out, nil
}
