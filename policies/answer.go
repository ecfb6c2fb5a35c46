package policies

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/toolgate/toolgate/bucketing"
)

// Answer policies: the policies a tool binds to its answers see upstream's
// answer as input.answer beside the call, and decide whether the caller
// gets it (allow), gets a refusal in its place (withhold), or gets it with
// some of its values replaced (redact).

// Redaction is one value an answer policy asks to replace.
type Redaction struct {
	// Policy is the name of the policy that asked.
	Policy string
	// Pointer is a JSON pointer (RFC 6901) into input.answer.body, in the
	// names the policy saw (lower case).
	Pointer string
}

// AnswerDecision is the verdict of a tool's answer policies on one answer.
type AnswerDecision struct {
	// Withhold is true when an enforced policy withheld the answer (its
	// withhold or deny messages, or allow false) or failed closed.
	Withhold bool
	// Reason is "" when a policy withheld the answer by its rules, and
	// bucketing.ReasonPolicyError or ReasonPolicyTimeout when one failed
	// closed.
	Reason string
	// Detail is one sentence naming the first policy that withheld the
	// answer and its first message (the policy author's words, never the
	// answer's), when Withhold is true.
	Detail string
	// Policies names every enforced policy that withheld the answer.
	Policies []string
	// Violations are every withhold message of every enforced policy.
	Violations []Violation
	// Redact are the values enforced policies ask to replace, in policy
	// order, each pointer once; empty when Withhold is true.
	Redact []Redaction
	// WouldWithhold names the dry-run policies that would have withheld
	// the answer.
	WouldWithhold []string
	// WouldRedact are the values dry-run policies would have replaced.
	WouldRedact []Redaction
	// FailedOpen names policies that failed and let the answer through
	// (fail_open, or a dry-run policy).
	FailedOpen []string
}

// errAnswerTooDeep is the error of an answer whose body nests deeper than
// MaxInputDepth: no engine sees it.
var errAnswerTooDeep = fmt.Errorf("answer nested deeper than %d", MaxInputDepth)

// CheckAnswer evaluates every active policy of the set on an answer (in
// must hold Answer) and combines their results as Check does: any enforced
// withhold (a withhold or deny message, or allow false) withholds the
// answer, with every enforced message; enforced redactions are gathered
// from every policy; dry-run policies are only reported; an evaluation
// that fails or runs past the deadline withholds the answer unless the
// tool fails open.
func (s *Set) CheckAnswer(ctx context.Context, in *Input) AnswerDecision {
	var d AnswerDecision
	if in.Answer == nil {
		return s.answerFailure(s.bound[0].Policy.Name(), bucketing.ReasonPolicyError, "failed: no answer to decide")
	}
	deep := !shallow(in.Answer.Body, 1)
	seen := map[string]bool{}
	for _, b := range s.bound {
		var res Result
		var err error
		timedOut := false
		if deep {
			err = errAnswerTooDeep
		} else {
			res, err, timedOut = s.eval(ctx, b.Policy, in)
		}
		if err != nil {
			reason, what := s.failure(err, timedOut)
			if s.failOpen || b.Mode == ModeDryRun {
				d.FailedOpen = append(d.FailedOpen, b.Policy.Name()+": "+reason)
				continue
			}
			return s.answerFailure(b.Policy.Name(), reason, what)
		}
		name := b.Policy.Name()
		withheld := append(slices.Clip(res.Withholds), res.Denies...)
		if len(withheld) == 0 && !res.Allowed {
			withheld = []Violation{{Reason: bucketing.ReasonPolicyDenied, Message: "not allowed by policy '" + name + "'", Code: bucketing.CodePolicy}}
		}
		switch {
		case len(withheld) > 0 && b.Mode == ModeDryRun:
			d.WouldWithhold = append(d.WouldWithhold, name)
		case len(withheld) > 0:
			d.Withhold = true
			d.Policies = append(d.Policies, name)
			d.Violations = append(d.Violations, withheld...)
		case b.Mode == ModeDryRun:
			for _, p := range res.Redacts {
				d.WouldRedact = append(d.WouldRedact, Redaction{Policy: name, Pointer: p})
			}
		default:
			for _, p := range res.Redacts {
				if !seen[p] {
					seen[p] = true
					d.Redact = append(d.Redact, Redaction{Policy: name, Pointer: p})
				}
			}
		}
	}
	if d.Withhold {
		d.Redact = nil
		d.Detail = fmt.Sprintf("Tool '%s' answered with content policy '%s' withholds: %s", s.tool, d.Policies[0], d.Violations[0].Message) + andMore(len(d.Violations)-1)
	}
	return d
}

// answerFailure is the decision of an answer whose policy failed closed.
func (s *Set) answerFailure(policy, reason, what string) AnswerDecision {
	return AnswerDecision{Withhold: true, Reason: reason, Policies: []string{policy},
		Detail:     fmt.Sprintf("Tool '%s' answered, and policy '%s' %s", s.tool, policy, what),
		Violations: []Violation{{Reason: reason, Message: "policy '" + policy + "' " + what}}}
}

// decodeAnswerRules reads the answer rules of a decision document into
// res: withhold (a set of strings, or of objects {msg}, as deny) and
// redact (a set of JSON pointers into input.answer.body, each "/..." ).
func decodeAnswerRules(doc map[string]any, res *Result) error {
	if raw, ok := doc["withhold"]; ok {
		items, isArr := raw.([]any)
		if !isArr {
			return fmt.Errorf("withhold must be a set, got %s", JSONTypeName(raw))
		}
		for _, it := range items {
			v, err := denyViolation(it)
			if err != nil {
				return errors.New(strings.Replace(err.Error(), "deny", "withhold", 1))
			}
			v.Path = "" // a path into the answer would be the answer's content
			res.Withholds = append(res.Withholds, v)
		}
		slices.SortStableFunc(res.Withholds, func(a, b Violation) int { return strings.Compare(a.Message, b.Message) })
	}
	if raw, ok := doc["redact"]; ok {
		items, isArr := raw.([]any)
		if !isArr {
			return fmt.Errorf("redact must be a set of JSON pointers, got %s", JSONTypeName(raw))
		}
		for _, it := range items {
			p, isStr := it.(string)
			if !isStr || !strings.HasPrefix(p, "/") || !validPointer(p) {
				return errors.New(`redact members must be JSON pointers into the answer's body, such as "/user/email"`)
			}
			res.Redacts = append(res.Redacts, p)
		}
		slices.Sort(res.Redacts)
	}
	return nil
}

// validPointer reports whether p's escapes are RFC 6901's: "~" is
// followed by 0 or 1.
func validPointer(p string) bool {
	for i := 0; i < len(p); i++ {
		if p[i] == '~' && (i+1 == len(p) || p[i+1] != '0' && p[i+1] != '1') {
			return false
		}
	}
	return true
}
