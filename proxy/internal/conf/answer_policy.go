package conf

import (
	"fmt"
	"strings"

	"github.com/toolgate/toolgate/policies"
)

// The answer policy step: a plain HTTP tool's answers (of every status,
// with a body) decided by the Rego and WASM policies its answer section
// names (answer.policies), which see the answer as input.answer beside the
// call's usual input. A policy allows the answer, withholds it (the caller
// gets a refusal that holds the policy's message, never the answer) or
// redacts values of it by JSON pointer. It runs after the answer schema
// and the detectors.

// AnswerPolicyConfig is the answer policies' part of a tool's answer
// section.
type AnswerPolicyConfig struct {
	// Policies names policies of the policies section (the names request
	// policies use) that decide the tool's answers (of every status, with
	// a body), in order. The tool's policy_mode and fail_open apply to
	// them as to its request policies; global policies do not decide
	// answers. Default: none.
	Policies []string `yaml:"policies"`
	// PolicyHeaders names answer headers the policies see in
	// input.answer.headers besides content-type. Default: none.
	PolicyHeaders []string `yaml:"policy_headers"`
}

// compileAnswerPolicy validates the policies' part of a tool's answer
// section (p is the tool's field path). The policy names are resolved by
// the composition root, which builds the tool's AnswerChecker.
func (c *Config) compileAnswerPolicy(t *Tool, p string) error {
	a := &t.Cfg.Answer
	if len(a.Policies) == 0 {
		if len(a.PolicyHeaders) > 0 {
			return fieldErr(p+".answer.policy_headers", "set without answer.policies: no policy reads them")
		}
		return nil
	}
	if t.Cfg.Protocol == ProtocolMCP {
		return fieldErr(p+".answer.policies", "set only for protocol: http (an mcp route's answers are JSON-RPC)")
	}
	for i, name := range a.Policies {
		if strings.TrimSpace(name) == "" {
			return fieldErr(fmt.Sprintf("%s.answer.policies[%d]", p, i), "empty policy name")
		}
	}
	for i, h := range a.PolicyHeaders {
		if _, ok := policies.InjectHeader(h, ""); !ok {
			return fieldErr(fmt.Sprintf("%s.answer.policy_headers[%d]", p, i), "not a header name")
		}
		a.PolicyHeaders[i] = strings.ToLower(h)
	}
	switch {
	case a.MaxBytes < 0:
		return fieldErr(p+".answer.max_bytes", "must be positive")
	case a.MaxBytes == 0:
		a.MaxBytes = DefaultAnswerBytes
	}
	return nil
}
